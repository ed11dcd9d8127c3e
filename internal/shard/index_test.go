package shard

import (
	"testing"
	"time"

	"shoal/internal/job"
)

// TestTagFollowsWhatTheHangRuleWeighs: a silent rank's report changes the tag
// when the silence is new (its calls) and when the rank turns idle, the two
// things job.Hung weighs that a client cannot work out from an older report;
// the silence's length and a busy share that stays busy do not.
func TestTagFollowsWhatTheHangRuleWeighs(t *testing.T) {
	with := func(calls int64, busy float64, silence time.Duration) string {
		return Index{Job: "j", Silent: []job.Silent{{Rank: 1, Calls: calls, For: job.Duration(silence), Busy: busy}}}.ComputeTag()
	}
	base := with(40, 0.3, time.Second)
	for _, c := range []struct {
		what  string
		tag   string
		moves bool
	}{
		{"longer silence", with(40, 0.3, 9*time.Second), false},
		{"less busy, still busy", with(40, 0.06, 9*time.Second), false},
		{"idle now", with(40, 0.01, 9*time.Second), true},
		{"unknown share", with(40, -1, 9*time.Second), true},
		{"another silence", with(41, 0.3, time.Second), true},
		{"no silence", Index{Job: "j"}.ComputeTag(), true},
	} {
		if moved := c.tag != base; moved != c.moves {
			t.Errorf("%s: tag changed %v, want %v", c.what, moved, c.moves)
		}
	}
}
