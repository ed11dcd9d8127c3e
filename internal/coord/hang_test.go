package coord

import (
	"reflect"
	"testing"
	"time"

	"shoal/internal/api"
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
		return nodeIndex{idx: api.ShardIndex{Job: "heat", Silent: s}, at: recv}
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
