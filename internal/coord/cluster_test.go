package coord

import (
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/place"
)

func TestDescribeMoves(t *testing.T) {
	live := map[string]api.Node{"a": {Name: "a"}, "b": {Name: "b"}}
	cases := []struct {
		prev, next place.Placement
		want       string
	}{
		{nil, place.Placement{"a", "b"}, ""},
		{place.Placement{"a", "b", "c", "c", "c"}, place.Placement{"a", "a", "a", "a", "b"}, "2 of c's ranks → a, 1 → b"},
		{place.Placement{"a", "c", "d"}, place.Placement{"a", "b", "b"}, "1 of c's ranks → b; 1 of d's ranks → b"},
		{place.Placement{"a", "b"}, place.Placement{"b", "a"}, ""}, // nothing lost: nothing said
	}
	for _, c := range cases {
		if got := describeMoves(c.prev, c.next, live); got != c.want {
			t.Errorf("describeMoves(%v, %v) = %q, want %q", c.prev, c.next, got, c.want)
		}
	}
}

func TestRemainingFromProgress(t *testing.T) {
	now := time.Now()
	b := &clusterBackend{launchAt: now.Add(-10 * time.Second)}
	if _, ok := b.remaining(); ok {
		t.Error("an estimate without any progress report")
	}
	b.noteProgress(&api.Progress{Fraction: 0.9, At: now.Add(-20 * time.Second)}) // an earlier run's
	if b.progFirst != nil {
		t.Error("a report from before the launch counted")
	}
	b.noteProgress(&api.Progress{Fraction: 0.2, At: now.Add(-8 * time.Second)})
	if b.restartCost != 2*time.Second {
		t.Errorf("restart cost %v, want 2s (launch to first report)", b.restartCost)
	}
	if _, ok := b.remaining(); ok {
		t.Error("an estimate from a single report")
	}
	b.noteProgress(&api.Progress{Fraction: 0.4, At: now})
	rem, ok := b.remaining()
	// 0.2 of the work took 8 s; 0.6 is left: 24 s.
	if !ok || rem < 23900*time.Millisecond || rem > 24*time.Second {
		t.Errorf("remaining %v %v, want about 24s", rem, ok)
	}
	b.noteProgress(&api.Progress{Fraction: 0.4, At: now.Add(time.Millisecond)})
	if b.restartCost != 2*time.Second {
		t.Error("a later report changed the restart cost")
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 restarts", 1: "1 restart", 2: "2 restarts"} {
		if got := plural(n, "restart"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCoresNeeded(t *testing.T) {
	cases := []struct {
		ranks int
		over  float64
		want  int
	}{{6, 0, 6}, {6, 1, 6}, {6, 2, 3}, {7, 2, 4}, {6, 3, 2}, {1, 1.5, 1}}
	for _, c := range cases {
		if got := coresNeeded(api.JobSpec{Ranks: c.ranks, MaxOversubscribe: c.over}); got != c.want {
			t.Errorf("coresNeeded(%d ranks, %g) = %d, want %d", c.ranks, c.over, got, c.want)
		}
	}
}
