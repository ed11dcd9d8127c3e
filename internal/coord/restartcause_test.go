package coord

import (
	"encoding/json"
	"testing"
	"time"

	"shoal/internal/job"
)

// TestRestartEventNamesItsCause: the event of a transition into restarting
// says what interrupted the run and whether the relaunch counts, for the
// restart metrics of every node's replica.
func TestRestartEventNamesItsCause(t *testing.T) {
	p := job.RestartPolicy{MaxRestarts: 3}
	tests := []struct {
		kind job.OutcomeKind
		want job.RestartCause
	}{
		{job.RankKilled, job.RestartCause{Cause: "rank_killed", Counted: true}},
		{job.NodeLost, job.RestartCause{Cause: "node_lost", Counted: true}},
		{job.LauncherFailed, job.RestartCause{Cause: "launcher_failed", Counted: true}},
		{job.CoordinatorLost, job.RestartCause{Cause: "coordinator_lost", Counted: true}},
		{job.LeadMoved, job.RestartCause{Cause: "lead_moved"}},
		{job.CopyCorrupt, job.RestartCause{Cause: "copy_corrupt"}},
	}
	j := &jobRun{spec: job.Spec{ID: "j"}}
	for _, tt := range tests {
		o := job.Outcome{Kind: tt.kind}
		d := p.Decide(o, 0)
		e := j.transitionEvent(o, d, 1, time.Now())
		var got job.RestartCause
		if err := json.Unmarshal(e.Data, &got); err != nil {
			t.Errorf("%s: data %q: %v", o, e.Data, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: got %+v, want %+v", o, got, tt.want)
		}
	}
	if e := j.transitionEvent(job.Outcome{Kind: job.RanksSucceeded}, p.Decide(job.Outcome{Kind: job.RanksSucceeded}, 0), 0, time.Now()); len(e.Data) != 0 {
		t.Errorf("success: got data %s, want none", e.Data)
	}
}
