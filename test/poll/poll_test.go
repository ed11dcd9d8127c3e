package poll

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of ending the test, so that a wait's failure
// can be checked.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	asked := 0
	f := &fakeT{TB: t}
	Until(f, time.Minute, func() string {
		if asked++; asked < 3 {
			return "not yet"
		}
		return ""
	})
	if f.failed != "" || asked != 3 {
		t.Fatalf("failed %q after %d questions, want success after 3", f.failed, asked)
	}
}

func TestUntilFailsWithTheLastAnswer(t *testing.T) {
	f := &fakeT{TB: t}
	n := 0
	// A Fatalf that returns lets Until go on; stop it by holding from then on.
	Until(f, 3*Interval, func() string {
		if f.failed != "" {
			return ""
		}
		n++
		return fmt.Sprintf("wrong %d", n)
	})
	prefix := fmt.Sprintf("after %v: wrong ", 3*Interval)
	if !strings.HasPrefix(f.failed, prefix) || f.failed == prefix+"1" {
		t.Fatalf("failed with %q, want the last of several answers after %v", f.failed, 3*Interval)
	}
}

func TestHoldsFailsWhenTheConditionStopsHolding(t *testing.T) {
	f := &fakeT{TB: t}
	n := 0
	Holds(f, 10*Interval, func() string {
		if n++; n == 3 {
			return "broke"
		}
		return ""
	})
	if f.failed != "stopped holding: broke" {
		t.Fatalf("failed with %q, want stopped holding: broke", f.failed)
	}
	f = &fakeT{TB: t}
	Holds(f, 3*Interval, func() string { return "" })
	if f.failed != "" {
		t.Fatalf("a condition that held failed: %q", f.failed)
	}
}
