package job

import (
	"maps"
	"slices"
	"testing"
)

func TestRankLimitsLearn(t *testing.T) {
	tests := []struct {
		name   string
		before RankLimits
		runs   []NodeKills
		want   RankLimits
		said   []string
	}{
		{"a sweep", RankLimits{}, []NodeKills{{"n4", 19, 1, 15}, {"n1", 2, 0, 2}},
			RankLimits{"n4": 15}, []string{"n4 killed ranks by signal 9 while it stayed up and kept 15 of its 19: placing at most 15 ranks there"}},
		{"one rank killed, the others kept: a rank lost", RankLimits{}, []NodeKills{{"n2", 4, 1, 3}}, RankLimits{}, nil},
		{"one more on a node with a limit", RankLimits{"n4": 15}, []NodeKills{{"n4", 15, 1, 14}},
			RankLimits{"n4": 14}, []string{"n4 killed ranks by signal 9 while it stayed up and kept 14 of its 15: placing at most 14 ranks there"}},
		{"ranks gone with no SIGKILL seen: no limit", RankLimits{}, []NodeKills{{"n1", 3, 0, 1}}, RankLimits{}, nil},
		{"every rank killed: no limit", RankLimits{}, []NodeKills{{"n1", 2, 2, 0}, {"n2", 2, 2, 0}}, RankLimits{}, nil},
		{"none ran on: half", RankLimits{}, []NodeKills{{"n4", 20, 1, 0}},
			RankLimits{"n4": 10}, []string{"n4 killed ranks by signal 9 while it stayed up and none of its 20 ran on: placing at most 10 ranks there"}},
		{"none ran on again: half again", RankLimits{"n4": 10}, []NodeKills{{"n4", 10, 1, 0}},
			RankLimits{"n4": 5}, []string{"n4 killed ranks by signal 9 while it stayed up and none of its 10 ran on: placing at most 5 ranks there"}},
		{"none ran on at one: stays one", RankLimits{"n4": 1}, []NodeKills{{"n4", 2, 1, 0}}, RankLimits{"n4": 1}, nil},
		{"a limit never rises", RankLimits{"n4": 10}, []NodeKills{{"n4", 14, 2, 12}}, RankLimits{"n4": 10}, nil},
		{"down to one", RankLimits{}, []NodeKills{{"n3", 3, 1, 1}},
			RankLimits{"n3": 1}, []string{"n3 killed ranks by signal 9 while it stayed up and kept 1 of its 3: placing at most 1 rank there"}},
		{"two nodes, in name order", RankLimits{}, []NodeKills{{"n5", 8, 3, 5}, {"n4", 8, 1, 6}},
			RankLimits{"n4": 6, "n5": 5}, []string{
				"n4 killed ranks by signal 9 while it stayed up and kept 6 of its 8: placing at most 6 ranks there",
				"n5 killed ranks by signal 9 while it stayed up and kept 5 of its 8: placing at most 5 ranks there"}},
	}
	for _, tt := range tests {
		l := maps.Clone(tt.before)
		said := l.Learn(tt.runs)
		if !maps.Equal(l, tt.want) || !slices.Equal(said, tt.said) {
			t.Errorf("%s: Learn(%v) on %v: got %v, %q; want %v, %q", tt.name, tt.runs, tt.before, l, said, tt.want, tt.said)
		}
	}
}
