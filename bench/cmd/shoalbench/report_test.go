package main

import (
	"slices"
	"testing"
	"time"

	"shoal/internal/job"
)

func TestEpochsLost(t *testing.T) {
	ev := func(typ, msg string) job.Event { return job.Event{Type: typ, Message: msg} }
	tests := []struct {
		name     string
		evs      []job.Event
		restarts int
		lost     []uint64
	}{
		{"no restart", []job.Event{ev("launch", "launching 4 ranks"), ev("epoch", "epoch 1 complete (4 shards)")}, 0, nil},
		{"from the newest epoch", []job.Event{ev("launch", "launching 4 ranks"), ev("epoch", "epoch 1 complete"),
			ev("epoch", "epoch 2 complete"), ev("launch", "launching 4 ranks on n2, n3, from epoch 2")}, 1, nil},
		{"from an older epoch, then from the beginning", []job.Event{ev("launch", "launching 4 ranks"),
			ev("epoch", "epoch 1 complete"), ev("epoch", "epoch 2 complete"), ev("launch", "launching 4 ranks, from epoch 1"),
			ev("epoch", "epoch 3 complete"), ev("launch", "launching 4 ranks")}, 2, []uint64{1, 2, 3}},
	}
	for _, tt := range tests {
		restarts, lost, _ := epochsLost(tt.evs)
		slices.Sort(lost)
		if restarts != tt.restarts || !slices.Equal(lost, tt.lost) {
			t.Errorf("%s: epochsLost = %d restarts, lost %v; want %d, %v", tt.name, restarts, lost, tt.restarts, tt.lost)
		}
	}
}

func TestShardsOnDownHosts(t *testing.T) {
	end := time.Now()
	w := &world{windows: []window{
		{host: "n3", why: whyCut, from: end.Add(-5 * time.Second), to: end.Add(5 * time.Second)},
		{host: "n1", why: whyKilled, from: end.Add(-3 * time.Second), to: end.Add(-time.Second)},
		{host: "n4", why: whyLeft, from: end.Add(-3 * time.Second)},
	}}
	tests := []struct {
		reason, want string
	}{
		{"epoch 9 lost: shards of rank 1 were only on n1, n3", ""},
		{"epoch 9 lost: shards of rank 1 were only on n2, n3", "but n2 was neither killed nor cut"},
		{"epoch 9 lost: shards of ranks 1, 2 were only on n4", "but n4 was neither killed nor cut"},
		{"rank 0 exited with code 1", "not a loss of every copy of a shard"},
	}
	for _, tt := range tests {
		j := &chaosJob{reason: tt.reason, events: []job.Event{{Type: "done", Time: end}}}
		if got := w.shardsOnDownHosts(j); got != tt.want {
			t.Errorf("shardsOnDownHosts(%q) = %q, want %q", tt.reason, got, tt.want)
		}
	}
}
