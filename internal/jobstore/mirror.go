package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// ErrNotServer refuses [Store.Follow] on a node that is not a server of the
// job store: its copy may be behind the cluster for good.
var ErrNotServer = errors.New("jobstore: this node does not replicate the job store")

// Entry is one applied command of the replicated log, with its Raft index.
type Entry struct {
	Index   uint64          `json:"index"`
	Command json.RawMessage `json:"command"`
}

// FollowReply is what a server sends a node that follows the job store from
// it: the commands applied after the index asked for, in order, or, when it
// no longer keeps them all, its whole state.
type FollowReply struct {
	// Index is the index of the server's state: the follower's once it has
	// taken Snapshot or Entries (entries past the last command are
	// configuration changes, which change no job). With neither, the server
	// applied no command past the index asked for, and Index may be behind it.
	Index uint64 `json:"index"`
	// Entries are the commands applied after the index asked for, in order.
	Entries []Entry `json:"entries,omitempty"`
	// Snapshot, when set, is the server's whole state at Index (the jobs, as in
	// a Raft snapshot): the commands asked for are no longer all kept.
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
	// Leader and Servers are the Raft configuration as the server knows it.
	Leader  string   `json:"leader,omitempty"`
	Servers []Server `json:"servers,omitempty"`
}

// Follow answers a node that follows the job store from this one: once this
// replica has applied a command after index after, or wait has passed, it
// returns the commands applied after after (after 0 or older than what it
// keeps: its whole state). Only a server of the job store answers: any other
// node is refused with [ErrNotServer].
func (s *Store) Follow(ctx context.Context, after uint64, wait time.Duration) (FollowReply, error) {
	if !s.isServer() {
		return FollowReply{}, fmt.Errorf("%w: %s", ErrNotServer, s.cfg.Node)
	}
	f := s.fsm
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	s.leaderMu.Lock()
	newLeader := s.newLeader
	s.leaderMu.Unlock()
	for waiting := true; waiting; {
		f.mu.RLock()
		index, changed := f.index, f.changed
		f.mu.RUnlock()
		if index > after {
			break
		}
		select {
		case <-newLeader:
			waiting = false
		case <-changed:
		case <-timeout.C:
			waiting = false
		case <-ctx.Done():
			return FollowReply{}, ctx.Err()
		case <-s.done:
			return FollowReply{}, fmt.Errorf("%w: closed", ErrNotServer)
		}
	}
	reply, err := f.since(after)
	if err != nil {
		return FollowReply{}, err
	}
	reply.Leader = s.Leader()
	reply.Servers, _ = s.Configuration()
	return reply, nil
}

// observe has r report leader changes to leaderChanges.
func (s *Store) observe(r *raft.Raft) {
	r.RegisterObserver(raft.NewObserver(s.observed, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
}

// leaderChanges wakes the followers waiting on this node when the leader
// changes: no command may follow for a while, and they would ask the old one.
func (s *Store) leaderChanges() {
	for {
		select {
		case <-s.done:
			return
		case <-s.observed:
		}
		s.leaderMu.Lock()
		close(s.newLeader)
		s.newLeader = make(chan struct{})
		s.leaderMu.Unlock()
	}
}

// since is the reply to a follower at index after.
func (f *fsm) since(after uint64) (FollowReply, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if after >= f.index {
		return FollowReply{Index: f.index}, nil
	}
	if after == 0 || after < f.floor {
		b, err := json.Marshal(f.jobs)
		if err != nil {
			return FollowReply{}, fmt.Errorf("jobstore: encode the state: %w", err)
		}
		return FollowReply{Index: f.index, Snapshot: b}, nil
	}
	i := 0
	for i < len(f.recent) && f.recent[i].Index <= after {
		i++
	}
	return FollowReply{Index: f.index, Entries: append([]Entry(nil), f.recent[i:]...)}, nil
}

// take applies a reply to a mirror: the snapshot, then the entries past what
// it holds, in order; and keeps the server's view of the configuration.
func (f *fsm) take(r FollowReply) error {
	if r.Snapshot != nil && r.Index > f.at() {
		st := state{Index: r.Index}
		if err := json.Unmarshal(r.Snapshot, &st.Jobs); err != nil {
			return fmt.Errorf("jobstore: follow: decode the state: %w", err)
		}
		if st.Jobs == nil {
			st.Jobs = map[string]*Record{}
		}
		f.restore(st)
	}
	for _, e := range r.Entries {
		if e.Index > f.at() {
			f.applyAt(e.Index, e.Command) // a refusal here is the one every replica met
		}
	}
	f.mu.Lock()
	if r.Snapshot == nil {
		// The entries were every command up to r.Index: the ones after are
		// configuration entries, which change no job.
		f.index = max(f.index, r.Index)
	}
	f.leader, f.servers = r.Leader, r.Servers
	f.wake() // Leader and Servers may have changed
	f.mu.Unlock()
	return nil
}

// isServer reports whether this node is in its own latest Raft configuration
// and hears from a leader (or is it): a server removed while it could not hear
// of it learns nothing more, and is no longer taken for one after
// lostContact.
func (s *Store) isServer() bool {
	servers, err := s.Configuration()
	if err != nil {
		return false
	}
	in := false
	for _, sv := range servers {
		in = in || sv.Name == s.cfg.Node
	}
	if !in {
		return false
	}
	r := s.raft()
	return r.State() == raft.Leader || time.Since(r.LastContact()) < lostContact*s.cfg.Timing.HeartbeatTimeout
}

// lostContact is how many heartbeat timeouts a server goes without hearing from
// a leader before it follows the store from another node as a client does.
const lostContact = 3

// follow keeps the mirror up to date while this node is not a server, through
// Config.Follow; it backs off on errors, up to followBackoff.
func (s *Store) follow() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-s.done
		cancel()
	}()
	backoff := followRetry
	for {
		if s.isServer() {
			s.client.Store(false)
			select {
			case <-s.done:
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.client.Store(true)
		reply, err := s.cfg.Follow(ctx, s.mirror.at())
		if err == nil {
			err = s.mirror.take(reply)
		}
		if err == nil {
			backoff = followRetry
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.cfg.Log.Debug("following the job store", "err", err)
		select {
		case <-s.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, followBackoff)
	}
}

// Retry of a failed follow: at first after followRetry, doubled at each
// failure up to followBackoff.
const (
	followRetry   = 100 * time.Millisecond
	followBackoff = 5 * time.Second
)

// track keeps the source of reads on the replica that is further along; on a
// tie (the same state), the one this node keeps up to date: the mirror while it
// is not a server, which also holds the leader and servers it was told of.
// When the source changes, every waiter of the old one is woken, to read
// again from the new one: both number a job's events alike, having applied
// the same commands in the same order.
func (s *Store) track() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.fsm.mu.RLock()
		rc := s.fsm.changed
		s.fsm.mu.RUnlock()
		s.mirror.mu.RLock()
		mc := s.mirror.changed
		s.mirror.mu.RUnlock()
		want := s.fsm
		if m, r := s.mirror.at(), s.fsm.at(); m > r || (m == r && s.client.Load()) {
			want = s.mirror
		}
		if old := s.src.Load(); old != want {
			s.src.Store(want)
			old.mu.Lock()
			old.wake()
			old.mu.Unlock()
		}
		select {
		case <-s.done:
			return
		case <-rc:
		case <-mc:
		case <-tick.C:
		}
	}
}

// view returns the replica reads are answered from, read-locked: the caller
// unlocks it. A reader that locked the old source after a switch woke its
// waiters takes the new one.
func (s *Store) view() *fsm {
	for {
		f := s.src.Load()
		f.mu.RLock()
		if s.src.Load() == f {
			return f
		}
		f.mu.RUnlock()
	}
}

// mirrored returns the leader and servers the followed server named, and
// whether reads are answered from the mirror.
func (s *Store) mirrored() (leader string, servers []Server, ok bool) {
	f := s.view()
	defer f.mu.RUnlock()
	return f.leader, append([]Server(nil), f.servers...), f == s.mirror
}
