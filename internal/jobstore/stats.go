package jobstore

import (
	"strconv"

	"github.com/hashicorp/raft"
)

// Stats is this replica's view of the job store's replication, for metrics.
type Stats struct {
	Leader       bool   // this node leads
	Term         uint64 // the Raft term it is in
	LastLogIndex uint64 // the newest entry in its log
	CommitIndex  uint64 // the newest entry it knows committed
	AppliedIndex uint64 // the newest entry applied to its replica of the jobs
}

// Stats returns the replica's replication state now.
func (s *Store) Stats() Stats {
	r := s.raft()
	st := r.Stats()
	num := func(k string) uint64 {
		n, _ := strconv.ParseUint(st[k], 10, 64)
		return n
	}
	return Stats{
		Leader:       r.State() == raft.Leader,
		Term:         num("term"),
		LastLogIndex: r.LastIndex(),
		CommitIndex:  num("commit_index"),
		AppliedIndex: r.AppliedIndex(),
	}
}
