package engine

import (
	"slices"
	"strings"
	"testing"

	"shoal/internal/job"
	"shoal/internal/place"
)

func TestNodeKills(t *testing.T) {
	p := place.Placement{"n1", "n1", "n4", "n4", "n4", "n4", "n4"}
	const since = 100
	tests := []struct {
		name   string
		states []RankState
		want   []job.NodeKills
	}{
		{"a sweep on n4", []RankState{
			{Rank: 0, State: StateStopped, Signal: 15, TimeNs: 150},
			{Rank: 1, State: StateRunning},
			{Rank: 2, State: StateStopped, Signal: 15, TimeNs: 150},
			{Rank: 3, State: StateExited, TimeNs: 140},
			{Rank: 4, State: StateSignaled, Signal: 9, TimeNs: 120},
			{Rank: 5, State: StateVanished},
			// rank 6 never wrote: it did not run on
		}, []job.NodeKills{{Node: "n1", Placed: 2, Killed: 0, Kept: 2}, {Node: "n4", Placed: 5, Killed: 1, Kept: 2}}},
		{"an earlier run's states do not count", []RankState{
			{Rank: 2, State: StateSignaled, Signal: 9, TimeNs: 50},
			{Rank: 3, State: StateStopped, Signal: 15, TimeNs: 50},
			{Rank: 4, State: StateSignaled, Signal: 15, TimeNs: 120},
		}, []job.NodeKills{{Node: "n1", Placed: 2, Killed: 0, Kept: 0}, {Node: "n4", Placed: 5, Killed: 0, Kept: 0}}},
		{"a rank the run does not have", []RankState{{Rank: 9, State: StateVanished}},
			[]job.NodeKills{{Node: "n1", Placed: 2, Killed: 0, Kept: 0}, {Node: "n4", Placed: 5, Killed: 0, Kept: 0}}},
	}
	for _, tt := range tests {
		got := NodeKills(tt.states, p, since)
		slices.SortFunc(got, func(a, b job.NodeKills) int { return strings.Compare(a.Node, b.Node) })
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
