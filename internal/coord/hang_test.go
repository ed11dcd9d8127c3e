package coord

import (
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/place"
	"shoal/internal/shard"
)

// TestCheckHung: a stopped rank past its bound ends the run as hung, naming
// it; not while the run waits, held at a checkpoint, for a move or a
// hand-over (its ranks make no calls on purpose), nor with --hang-after off.
func TestCheckHung(t *testing.T) {
	now := time.Now()
	stopped := job.Silent{Rank: 1, Calls: 40, For: job.Duration(11 * time.Second), Gap: job.Duration(200 * time.Millisecond), Every: job.Duration(2 * time.Millisecond), Busy: 0}
	backend := func(after job.Duration) *clusterBackend {
		return &clusterBackend{
			j:         &jobRun{spec: job.Spec{ID: "heat", HangAfter: after}},
			placement: place.Placement{"n1", "n2"},
			launchAt:  now.Add(-time.Minute),
			received:  map[string]nodeIndex{"n2": {idx: shard.Index{Job: "heat", Silent: []job.Silent{stopped}}, at: now}},
		}
	}
	tests := []struct {
		name string
		b    *clusterBackend
		want string // the loss's words; "" for none
	}{
		{"stopped", backend(0), "rank 1 on n2 made no snapshot call for 11 s (usually every 2 ms), idle: hung"},
		{"held for a move", func() *clusterBackend { b := backend(0); b.pending = &reconfig{}; return b }(), ""},
		{"held for a hand-over", func() *clusterBackend { b := backend(0); b.handed = true; return b }(), ""},
		{"off", backend(job.HangOff), ""},
		{"within a given bound", backend(job.Duration(time.Minute)), ""},
	}
	for _, tt := range tests {
		loss := tt.b.checkHung(now)
		got := ""
		if loss != nil {
			got = loss.String()
			if loss.hung == nil || loss.hung.Rank != 1 || len(loss.nodes) != 1 || loss.nodes[0] != "n2" {
				t.Errorf("%s: loss %+v, want rank 1 on n2 hung", tt.name, loss)
			}
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
