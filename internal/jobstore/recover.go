package jobstore

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/raft"
)

// Recover forces a new Raft configuration in which this node is the only
// voter, for a cluster that lost a majority of its voters for good: with no
// quorum, nothing can be committed, so no configuration change can remove the
// lost voters. It stops this node's Raft, rewrites its state with
// raft.RecoverCluster (every entry of this node's log counts as committed,
// and the new configuration is stored in a snapshot), and starts Raft again on
// the same address; a single voter elects itself within a heartbeat timeout.
// The leader's voter plan then adds the other live nodes, as it adds nodes
// that join ([PlanVoters]), and they take its log over theirs.
//
// What it costs: entries committed on the lost voters and not yet on this
// node are gone; entries on this node that were never committed now are.
// Run on two sides of a partition, it makes two clusters. A lost voter must
// not come back with its old state: with another lost voter it could make a
// majority of the old configuration and elect a leader of its own.
//
// A node that knows a leader is refused with [ErrHasLeader]. Recover is not
// to be called concurrently with itself or [Store.Close].
func (s *Store) Recover() error {
	if s.Leader() != "" {
		return fmt.Errorf("%w (%s leads)", ErrHasLeader, s.Leader())
	}
	old, oldTrans := s.raft(), s.trans.Load()
	adv := oldTrans.LocalAddr()
	// Shutdown also closes the transport, freeing its address.
	if err := old.Shutdown().Error(); err != nil {
		return fmt.Errorf("jobstore: recover: stop raft: %w", err)
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.Node), Address: adv}}}
	recoverErr := raft.RecoverCluster(s.rc, newFSM(), s.logs, s.db, s.snaps, oldTrans, conf)
	// Raft starts again in any case: on a failed recovery, with the state it had.
	if err := s.start(); err != nil {
		return errors.Join(recoverErr, fmt.Errorf("jobstore: recover: %w", err))
	}
	if recoverErr != nil {
		return fmt.Errorf("jobstore: recover: %w", recoverErr)
	}
	return nil
}

// start starts Raft again, after Recover or Forget stopped it, on the address
// it listened at.
func (s *Store) start() error {
	trans, err := s.listen(s.bound, s.rc.Logger)
	if err != nil {
		return err
	}
	r, err := raft.NewRaft(s.rc, s.fsm, s.logs, s.db, s.snaps, trans)
	if err != nil {
		trans.Close()
		return fmt.Errorf("start raft: %w", err)
	}
	s.trans.Store(trans)
	s.rp.Store(r)
	s.observe(r)
	return nil
}

// Forget drops this replica's copy of the jobs and starts again as a node
// that was never part of a cluster, to be added by the leader as a new node
// is: for a node whose copy belongs to a configuration the cluster no longer
// has (its voters were recovered without it, [Store.Recover]), where it must
// not vote. The old copy is kept aside, in Dir with the suffix
// ".stale-UNIXTIME", whose name it returns. Forget is not to be called
// concurrently with itself, Recover or [Store.Close].
func (s *Store) Forget() (kept string, err error) {
	if err := s.raft().Shutdown().Error(); err != nil {
		return "", fmt.Errorf("jobstore: forget: stop raft: %w", err)
	}
	s.db.Close()
	kept = fmt.Sprintf("%s.stale-%d", s.cfg.Dir, time.Now().Unix())
	moved := os.Rename(s.cfg.Dir, kept)
	if moved == nil {
		moved = os.MkdirAll(s.cfg.Dir, 0o700)
		s.fsm.reset()
	}
	if err := s.openState(s.rc.Logger); err != nil {
		return "", errors.Join(moved, fmt.Errorf("jobstore: forget: %w", err))
	}
	if err := s.start(); err != nil {
		return "", errors.Join(moved, fmt.Errorf("jobstore: forget: %w", err))
	}
	if moved != nil {
		return "", fmt.Errorf("jobstore: forget: %w", moved)
	}
	return kept, nil
}
