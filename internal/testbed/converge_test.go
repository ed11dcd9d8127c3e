package testbed

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func alives(names ...string) map[string]string {
	m := map[string]string{}
	for _, n := range names {
		m[n] = "alive"
	}
	return m
}

func TestConvergenceAsksOnlyHostsNotDone(t *testing.T) {
	up := []string{"n1", "n2", "n3"}
	c := newConvergence(nil)
	if got := c.toAsk(up); !slices.Equal(got, up) {
		t.Fatalf("first pass asks %v, want %v", got, up)
	}
	n3 := alives("n1", "n2")
	n3["n2"] = "suspect"
	problem, missing, closer := c.record(up, map[string]view{
		"n1": {seen: alives("n1", "n2", "n3")},
		"n2": {seen: alives("n1", "n2")},
		"n3": {seen: n3},
	})
	if problem != "n2 sees n3 nothing" || missing != 2 || !closer {
		t.Fatalf("first pass: got %q, %d missing, closer %v; want \"n2 sees n3 nothing\", 2, true", problem, missing, closer)
	}
	if got, want := c.toAsk(up), []string{"n2", "n3"}; !slices.Equal(got, want) {
		t.Fatalf("second pass asks %v, want %v (n1's view was complete)", got, want)
	}
	// No better: n3 still suspects n2, and n2 cannot answer.
	problem, missing, closer = c.record(up, map[string]view{
		"n2": {err: errors.New("shoal nodes in n2: timeout")},
		"n3": {seen: n3},
	})
	if problem != "shoal nodes in n2: timeout" || missing != 3 || closer {
		t.Fatalf("second pass: got %q, %d missing, closer %v; want the error, 3, false", problem, missing, closer)
	}
	problem, missing, closer = c.record(up, map[string]view{
		"n2": {seen: alives("n1", "n3")},
		"n3": {seen: alives("n1", "n2")},
	})
	if problem != "" || missing != 0 || !closer {
		t.Fatalf("third pass: got %q, %d missing, closer %v; want \"\", 0, true", problem, missing, closer)
	}
	if got := c.toAsk(up); len(got) != 0 {
		t.Fatalf("after every view was complete it asks %v, want none", got)
	}
}

func TestConvergenceFocus(t *testing.T) {
	// n4 has just joined: every host must see it, and it every host; the others' views
	// of each other do not count.
	up := []string{"n1", "n2", "n3", "n4"}
	c := newConvergence([]string{"n4"})
	problem, missing, _ := c.record(up, map[string]view{
		"n1": {seen: alives("n1", "n4")},
		"n2": {seen: alives("n2")},
		"n3": {seen: map[string]string{"n4": "alive", "n1": "dead"}},
		"n4": {seen: alives("n1", "n2", "n3")},
	})
	if problem != "n2 sees n4 nothing" || missing != 1 {
		t.Fatalf("got %q, %d missing; want \"n2 sees n4 nothing\", 1", problem, missing)
	}
	if got, want := c.toAsk(up), []string{"n2"}; !slices.Equal(got, want) {
		t.Fatalf("next pass asks %v, want %v", got, want)
	}
}

func TestConvergenceLoneHost(t *testing.T) {
	c := newConvergence(nil)
	if got := c.toAsk([]string{"n1"}); len(got) != 0 {
		t.Fatalf("a lone host: asks %v, want none", got)
	}
	if problem, _, _ := c.record([]string{"n1"}, nil); problem != "" {
		t.Fatalf("a lone host: problem %q, want none", problem)
	}
}

// The bound on a wait that gets no closer follows memberlist's state exchange
// interval, which it stretches past 32 nodes.
func TestPushPullInterval(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{4, 30 * time.Second}, {32, 30 * time.Second}, {33, 60 * time.Second}, {64, 60 * time.Second}, {128, 90 * time.Second}, {10000, 300 * time.Second}} {
		if got := pushPullInterval(30*time.Second, c.n); got != c.want {
			t.Errorf("pushPullInterval(30s, %d) = %v, want %v", c.n, got, c.want)
		}
	}
}
