// Package poll is how tests wait for what another goroutine or process brings
// about: until a condition holds, or while it must go on holding. A condition
// returns "" when it holds and otherwise says what is still wrong, which is
// what a failed wait reports.
package poll

import (
	"testing"
	"time"
)

// Interval is how often a condition is asked.
const Interval = 25 * time.Millisecond

// Until asks cond every Interval until it returns "", and fails t with cond's
// last answer once timeout has passed.
func Until(t testing.TB, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, msg)
		}
		time.Sleep(Interval)
	}
}

// Holds asks cond every Interval for d, and fails t the first time it returns
// anything but "".
func Holds(t testing.TB, d time.Duration, cond func() string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(Interval) {
		if msg := cond(); msg != "" {
			t.Fatalf("stopped holding: %s", msg)
		}
	}
}
