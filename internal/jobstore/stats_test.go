package jobstore

import (
	"testing"

	"shoal/internal/job"
)

// TestStats: the leader says it leads, every replica the same term, and a
// follower's applied index reaches the entry the leader committed.
func TestStats(t *testing.T) {
	stores := cluster(t, 2)
	if err := stores[0].Submit(job.Job{ID: "heat-1", State: job.Running}, nil); err != nil {
		t.Fatal(err)
	}
	lead := stores[0].Stats()
	if !lead.Leader || lead.Term == 0 || lead.CommitIndex == 0 || lead.AppliedIndex == 0 {
		t.Errorf("leader: got %+v, want leader, a term, entries committed and applied", lead)
	}
	waitFor(t, "n2 applies the submission", func() bool { return stores[1].Stats().AppliedIndex >= lead.CommitIndex })
	if got := stores[1].Stats(); got.Leader || got.Term != lead.Term {
		t.Errorf("follower: got %+v, want no leader, term %d", got, lead.Term)
	}
}
