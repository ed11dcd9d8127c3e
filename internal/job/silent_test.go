package job

import (
	"reflect"
	"testing"
	"time"
)

// TestSilentRanks: the silent ranks of the current run, each silence grown by
// the time since its node's index came; an index of an earlier run, or a rank
// not placed on the node reporting it, does not count.
func TestSilences(t *testing.T) {
	launch := time.Unix(1000, 0)
	now := launch.Add(20 * time.Second)
	sec := func(s float64) Duration { return Duration(s * float64(time.Second)) }
	placement := []string{"n1", "n1", "n2", "n2"}
	at := func(recv time.Time, s ...Silent) Heard {
		return Heard{Silent: s, At: recv}
	}
	tests := []struct {
		name    string
		indexes map[string]Heard
		want    []Silent
	}{
		{"none", map[string]Heard{"n1": at(now)}, nil},
		{"grown since received", map[string]Heard{
			"n2": at(now.Add(-3*time.Second), Silent{Rank: 3, Calls: 7, For: sec(2), Gap: sec(0.2), Busy: 0}),
			"n1": at(now.Add(-time.Second), Silent{Rank: 0, Calls: 9, For: sec(1.5), Gap: sec(0.2), Busy: 0.4}),
		}, []Silent{
			{Rank: 0, Node: "n1", Calls: 9, For: sec(2.5), Gap: sec(0.2), Busy: 0.4},
			{Rank: 3, Node: "n2", Calls: 7, For: sec(5), Gap: sec(0.2), Busy: 0},
		}},
		{"an index of an earlier run", map[string]Heard{
			"n2": at(launch.Add(-time.Second), Silent{Rank: 3, For: sec(0.5), Gap: sec(0.2)}),
		}, nil},
		{"a silence since before the launch", map[string]Heard{
			"n2": at(now, Silent{Rank: 3, For: sec(21), Gap: sec(0.2)}),
		}, nil},
		{"a rank placed elsewhere now", map[string]Heard{
			"n1": at(now, Silent{Rank: 2, For: sec(30), Gap: sec(0.2)}, Silent{Rank: 9, For: sec(30)}),
		}, nil},
	}
	for _, tt := range tests {
		got := Silences(tt.indexes, placement, launch, now)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
