package coord

import (
	"reflect"
	"testing"
	"time"

	"shoal/internal/shard"

	"shoal/internal/job"
	"shoal/internal/place"
)

// TestSilentRanks: the silent ranks of the current run, each silence grown by
// the time since its node's index came; an index of an earlier run, or a rank
// not placed on the node reporting it, does not count.
func TestSilentRanks(t *testing.T) {
	launch := time.Unix(1000, 0)
	now := launch.Add(20 * time.Second)
	sec := func(s float64) job.Duration { return job.Duration(s * float64(time.Second)) }
	placement := place.Placement{"n1", "n1", "n2", "n2"}
	at := func(recv time.Time, s ...job.Silent) nodeIndex {
		return nodeIndex{idx: shard.Index{Job: "heat", Silent: s}, at: recv}
	}
	tests := []struct {
		name    string
		indexes map[string]nodeIndex
		want    []job.Silent
	}{
		{"none", map[string]nodeIndex{"n1": at(now)}, nil},
		{"grown since received", map[string]nodeIndex{
			"n2": at(now.Add(-3*time.Second), job.Silent{Rank: 3, Calls: 7, For: sec(2), Gap: sec(0.2), Busy: 0}),
			"n1": at(now.Add(-time.Second), job.Silent{Rank: 0, Calls: 9, For: sec(1.5), Gap: sec(0.2), Busy: 0.4}),
		}, []job.Silent{
			{Rank: 0, Node: "n1", Calls: 9, For: sec(2.5), Gap: sec(0.2), Busy: 0.4},
			{Rank: 3, Node: "n2", Calls: 7, For: sec(5), Gap: sec(0.2), Busy: 0},
		}},
		{"an index of an earlier run", map[string]nodeIndex{
			"n2": at(launch.Add(-time.Second), job.Silent{Rank: 3, For: sec(0.5), Gap: sec(0.2)}),
		}, nil},
		{"a silence since before the launch", map[string]nodeIndex{
			"n2": at(now, job.Silent{Rank: 3, For: sec(21), Gap: sec(0.2)}),
		}, nil},
		{"a rank placed elsewhere now", map[string]nodeIndex{
			"n1": at(now, job.Silent{Rank: 2, For: sec(30), Gap: sec(0.2)}, job.Silent{Rank: 9, For: sec(30)}),
		}, nil},
	}
	for _, tt := range tests {
		got := silentRanks(tt.indexes, placement, launch, now)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

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
