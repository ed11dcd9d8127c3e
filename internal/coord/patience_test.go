package coord

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/place"
)

// TestWaitForSilentNode: a node membership declares dead is waited for as long
// as giving up would cost, the wait is said once, and the node's return ends
// it; once the wait is over the node is lost, and the reason says why.
func TestWaitForSilentNode(t *testing.T) {
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a", "b", "c"}, "a", "b", "c")
	var events []job.Event
	b.j.out.Events = func(e job.Event) { events = append(events, e) }
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
		if e.Type == job.EventNodes && strings.HasPrefix(e.Message, "node c declared dead after ") && strings.Contains(e.Message, "waiting for it up to 30 s") {
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
