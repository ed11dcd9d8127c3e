package coord

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/place"
)

func TestPatience(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		silent, epoch time.Time
		relaunch      time.Duration
		want          time.Duration
	}{
		{t0, t0.Add(-9 * time.Second), time.Second, 10 * time.Second}, // work plus relaunch
		{t0, t0, 2 * time.Second, 2 * time.Second},                    // an epoch just taken
		{t0, t0.Add(time.Second), 0, 0},                               // clocks apart: never negative
		{t0, t0.Add(-time.Hour), time.Second, MaxPatience},            // bounded
	} {
		if got := Patience(c.silent, c.epoch, c.relaunch); got != c.want {
			t.Errorf("Patience(silent %v, epoch %v, relaunch %v) = %v, want %v", c.silent.Sub(t0), c.epoch.Sub(t0), c.relaunch, got, c.want)
		}
	}
	// A node fences its ranks no later than its coordinator gives up on it,
	// whatever the work and the relaunch, when the node's newest shard is no
	// older than the run's newest complete epoch and their first doubts are
	// up to a second apart.
	for _, work := range []time.Duration{0, 300 * time.Millisecond, 5 * time.Second, 2 * time.Minute} {
		for _, ahead := range []time.Duration{0, 700 * time.Millisecond, 10 * time.Second} { // the node's shard newer by
			for _, skew := range []time.Duration{-time.Second, 0, 400 * time.Millisecond, time.Second} { // the node doubts later by
				for _, relaunch := range []time.Duration{0, 2 * time.Second} {
					epoch := t0.Add(-work)
					givesUp := t0.Add(Patience(t0, epoch, relaunch))
					doubt := t0.Add(skew)
					fence := doubt.Add(FenceAfter(doubt, epoch.Add(min(ahead, work))))
					// A fence at the doubt itself waits, as the coordinator does,
					// for membership's verdict alone.
					if fence.After(givesUp) && FenceAfter(doubt, epoch.Add(min(ahead, work))) > 0 {
						t.Errorf("work %v, shard %v newer, doubt %v later, relaunch %v: the node fences at %v, after its coordinator gives up (%v)",
							work, ahead, skew, relaunch, fence.Sub(t0), givesUp.Sub(t0))
					}
				}
			}
		}
	}
}

// TestWaitForSilentNode: a node membership declares dead is waited for as long
// as giving up would cost, the wait is said once, and the node's return ends
// it; once the wait is over the node is lost, and the reason says why.
func TestWaitForSilentNode(t *testing.T) {
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a", "b", "c"}, "a", "b", "c")
	var events []Event
	b.j.out.Events = func(e Event) { events = append(events, e) }
	news, stop := b.watch(context.Background())
	defer stop()
	ctx := context.Background()
	silence := func(relaunch time.Duration) {
		t.Helper()
		f.change(func() { f.cut["c"] = true })
		b.mu.Lock()
		b.launchAt, b.restartCost = time.Now(), relaunch
		b.mu.Unlock()
		f.setState("c", "suspect")
		if loss := b.poll(ctx); loss != nil {
			t.Fatalf("poll with c suspect: loss %v", loss)
		}
		pollUntil(t, b, news, "the probe of c did not fail", func() bool { return !b.mayAnswer("c") })
		f.setState("c", "dead")
	}

	// Declared dead within what a restart would cost: the run waits.
	silence(30 * time.Second)
	for range 3 {
		if loss := b.poll(ctx); loss != nil {
			t.Fatalf("poll with c dead 1 s into a 30 s wait: loss %v", loss)
		}
	}
	waits := 0
	for _, e := range events {
		if e.Kind == EventNodes && strings.HasPrefix(e.Message, "node c declared dead after ") && strings.Contains(e.Message, "waiting for it up to 30 s") {
			waits++
		}
	}
	if waits != 1 {
		t.Fatalf("events %+v: want one saying the run waits for c up to 30 s", events)
	}
	// It comes back.
	f.change(func() { f.cut["c"] = false })
	f.setState("c", "alive")
	if loss := b.poll(ctx); loss != nil {
		t.Fatalf("poll with c back: loss %v", loss)
	}
	if last := events[len(events)-1]; !strings.HasPrefix(last.Message, "node c is back after ") {
		t.Errorf("last event %q, want c back", last.Message)
	}

	// Silent again, for longer than a restart costs: lost once the wait is over.
	silence(1500 * time.Millisecond)
	var loss *nodeLoss
	deadline := time.After(10 * time.Second)
	for loss == nil {
		select {
		case <-deadline:
			t.Fatal("c not lost 10 s into a wait of 1.5 s")
		case <-time.After(50 * time.Millisecond):
		}
		loss = b.poll(ctx)
	}
	if !slices.Equal(loss.nodes, []string{"c"}) || !strings.HasPrefix(loss.reason, "no answer for ") {
		t.Errorf("loss %+v, want c lost: no answer for …", loss)
	}
	// Whether the run waited first depends on how long the failed probe
	// took; when it did, the reason says why it stopped.
	if _, waited := b.waiting["c"]; waited {
		t.Error("c still waited for after its loss")
	}
}
