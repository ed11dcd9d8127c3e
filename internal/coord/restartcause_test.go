package coord

import (
	"encoding/json"
	"testing"
	"time"

	"shoal/internal/epochs"
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

// TestEpochStats: the event of an epoch complete says when its checkpoint
// was taken, what its ranks wrote and what its copies moved.
func TestEpochStats(t *testing.T) {
	taken := time.Unix(1700000000, 0)
	b := &clusterBackend{book: epochs.NewBook(2, 2), wire: map[uint64]wireBytes{3: {raw: 200, sent: 120, wire: 60}}}
	b.book.Epochs[3] = &epochs.Entry{CreatedNs: uint64(taken.UnixNano()), Shards: []epochs.ShardEntry{{Size: 100}, {Size: 100}}}
	b.book.Epochs[4] = &epochs.Entry{Shards: []epochs.ShardEntry{{Size: 50}}}
	tests := []struct {
		epoch uint64
		want  job.EpochStats
	}{
		{3, job.EpochStats{Taken: taken, Bytes: 200, Copied: 200, Sent: 120, Wire: 60}},
		{4, job.EpochStats{Bytes: 50}},
	}
	for _, tt := range tests {
		if got := b.epochStats(tt.epoch); !got.Taken.Equal(tt.want.Taken) || got.Bytes != tt.want.Bytes ||
			got.Copied != tt.want.Copied || got.Sent != tt.want.Sent || got.Wire != tt.want.Wire {
			t.Errorf("epoch %d: got %+v, want %+v", tt.epoch, got, tt.want)
		}
	}
}
