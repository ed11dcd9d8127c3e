package jobstore

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// MaxVoters is how many nodes vote at most. Five voters survive two lost at once;
// more would slow every decision for little gain.
const MaxVoters = 5

// MaxStandbys is how many non-voters follow the log besides the voters, so that
// a lost voter is replaced by a node that needs no catch-up. Every other node
// is a client: it follows the store from a server ([Store.Follow]), so that
// the leader's replication does not grow with the cluster.
const MaxStandbys = 2

// Member is what the leader knows of a node from membership when it decides who
// votes.
type Member struct {
	Name  string
	Raft  string    // the node's Raft address; "" for a node that takes no part
	Alive bool      // alive or suspect; false for dead and left
	Since time.Time // when it was first seen alive: older nodes are preferred
	// Unreachable: membership holds it alive or suspect, but its agent refuses
	// connections (gone, seconds before membership says so). It is not made a
	// server or a voter until it answers; a server it is stays one.
	Unreachable bool
}

// Server is one node of the Raft configuration.
type Server struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// ChangeKind is one kind of change to the Raft configuration.
type ChangeKind string

const (
	AddNonvoter ChangeKind = "add-nonvoter" // a new node follows the log
	Promote     ChangeKind = "promote"      // a follower that has caught up votes
	Demote      ChangeKind = "demote"       // a voter stops voting (too many voters)
	Remove      ChangeKind = "remove"       // a node that is gone leaves the configuration
)

// Change is one step [PlanVoters] asks for.
type Change struct {
	Kind ChangeKind
	Name string
	Addr string
}

func (c Change) String() string { return fmt.Sprintf("%s %s", c.Kind, c.Name) }

// VoterTarget is how many of n live nodes should vote: all of them up to
// MaxVoters, but an odd number, since an even number survives no more losses than
// one fewer and needs a larger quorum. With 1 node it votes alone; with 2, only the
// older votes: the other may go, but if the voter goes nobody coordinates until it
// returns.
func VoterTarget(n int) int {
	t := min(n, MaxVoters)
	if t > 0 && t%2 == 0 {
		t--
	}
	return t
}

// PlanVoters is the leader's autopilot, in the manner of Consul's: given the
// Raft configuration, the members and the leader's name, it returns the changes
// that bring the configuration to the wanted shape, in the order to make them:
//   - servers whose node is gone (dead, left, or no longer a member, or now at
//     another address) are removed, the leader never;
//   - the live members with a Raft address are ranked: the leader, the voters
//     there are, the servers following the log, then the longest up; not one
//     whose agent refuses connections (Unreachable), which would count in the
//     quorum without voting: right after a recovery without it, membership
//     still holds it alive for seconds;
//   - the first VoterTarget(live members) of them vote, the next MaxStandbys
//     follow the log as non-voters ("standbys"); a voter beyond is demoted
//     first, and every server beyond is removed: it becomes a client;
//   - a member that is not a server is added as a non-voter (and promoted at a
//     later round, once it follows the log) only while the configuration has
//     fewer servers than voters and standbys wanted.
//
// So a client's death or return changes nothing, and a voter's death promotes
// a standby and adds the next candidate as a standby. It is pure: the same
// input gives the same plan.
func PlanVoters(servers []Server, members []Member, leader string) []Change {
	alive := map[string]Member{}
	for _, m := range members {
		if m.Alive && m.Raft != "" {
			alive[m.Name] = m
		}
	}
	var changes []Change
	current := map[string]Server{}
	for _, s := range servers {
		m, ok := alive[s.Name]
		if s.Name != leader && (!ok || m.Raft != s.Addr) {
			changes = append(changes, Change{Kind: Remove, Name: s.Name, Addr: s.Addr})
			continue
		}
		current[s.Name] = s
	}
	// Who should vote, in order of preference.
	cands := make([]Member, 0, len(alive))
	for _, m := range alive {
		if s, ok := current[m.Name]; m.Unreachable && !(ok && s.Voter) && m.Name != leader {
			continue
		}
		cands = append(cands, m)
	}
	rank := func(m Member) int {
		switch s, ok := current[m.Name]; {
		case m.Name == leader:
			return 0
		case ok && s.Voter:
			return 1
		case ok:
			return 2 // following the log already: can be promoted now
		}
		return 3
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if !a.Since.Equal(b.Since) {
			return a.Since.Before(b.Since)
		}
		return a.Name < b.Name
	})
	voters := VoterTarget(len(cands))
	wanted := min(len(cands), voters+MaxStandbys)
	var removals []Change
	for _, s := range servers {
		// A server whose agent refuses connections is left as it is, as
		// today: membership soon says whether it is gone.
		if _, kept := current[s.Name]; kept && !alive[s.Name].Unreachable && !slices.ContainsFunc(cands[:wanted], func(m Member) bool { return m.Name == s.Name }) && s.Name != leader {
			if s.Voter {
				changes = append(changes, Change{Kind: Demote, Name: s.Name, Addr: s.Addr})
			}
			removals = append(removals, Change{Kind: Remove, Name: s.Name, Addr: s.Addr})
			delete(current, s.Name)
		}
	}
	// Removals after every demotion, so that no quorum ever counts a voter
	// that is about to leave.
	changes = append(changes, removals...)
	for i, m := range cands[:wanted] {
		s, isServer := current[m.Name]
		switch want := i < voters; {
		case !isServer:
			changes = append(changes, Change{Kind: AddNonvoter, Name: m.Name, Addr: m.Raft})
		case want && !s.Voter:
			changes = append(changes, Change{Kind: Promote, Name: m.Name, Addr: m.Raft})
		case !want && s.Voter && m.Name != leader:
			changes = append(changes, Change{Kind: Demote, Name: m.Name, Addr: m.Raft})
		}
	}
	return changes
}

// Servers returns the Raft configuration as this node knows it: on a node that
// follows the store from a server, as that server knows it.
func (s *Store) Servers() ([]Server, error) {
	if _, servers, ok := s.mirrored(); ok {
		return servers, nil
	}
	return s.Configuration()
}

// Configuration returns this node's own latest Raft configuration.
func (s *Store) Configuration() ([]Server, error) {
	f := s.raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, s.wrap(err)
	}
	var out []Server
	for _, sv := range f.Configuration().Servers {
		out = append(out, Server{Name: string(sv.ID), Addr: string(sv.Address), Voter: sv.Suffrage == raft.Voter})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Reconcile makes the changes [PlanVoters] asks for, one at a time, and returns
// those it made. Only the leader can.
func (s *Store) Reconcile(members []Member) ([]Change, error) {
	if !s.IsLeader() {
		return nil, ErrNotLeader
	}
	servers, err := s.Configuration()
	if err != nil {
		return nil, err
	}
	var done []Change
	for _, c := range PlanVoters(servers, members, s.cfg.Node) {
		id, addr := raft.ServerID(c.Name), raft.ServerAddress(c.Addr)
		var f raft.IndexFuture
		switch c.Kind {
		case Remove:
			f = s.raft().RemoveServer(id, 0, 5*time.Second)
		case AddNonvoter:
			f = s.raft().AddNonvoter(id, addr, 0, 5*time.Second)
		case Promote:
			f = s.raft().AddVoter(id, addr, 0, 5*time.Second)
		case Demote:
			f = s.raft().DemoteVoter(id, 0, 5*time.Second)
		}
		if err := f.Error(); err != nil {
			return done, fmt.Errorf("%s: %w", c, s.wrap(err))
		}
		done = append(done, c)
	}
	return done, nil
}

// HandOver passes the lead to another live voter, for a leader about to leave;
// when this node is the only voter it first makes the longest-up live follower
// among others a voter. It returns once another node leads, or with why not.
func (s *Store) HandOver(others []Member) error {
	if !s.IsLeader() {
		return ErrNotLeader
	}
	servers, err := s.Configuration()
	if err != nil {
		return err
	}
	alive := map[string]Member{}
	for _, m := range others {
		if m.Alive && m.Raft != "" {
			alive[m.Name] = m
		}
	}
	var follower *Member
	for _, sv := range servers {
		m, ok := alive[sv.Name]
		if !ok || sv.Name == s.cfg.Node {
			continue
		}
		if sv.Voter {
			return s.Transfer()
		}
		if follower == nil || m.Since.Before(follower.Since) {
			follower = &m
		}
	}
	if follower == nil {
		return fmt.Errorf("%w: no other live node follows the job store", ErrNoLeader)
	}
	if err := s.raft().AddVoter(raft.ServerID(follower.Name), raft.ServerAddress(follower.Raft), 0, 5*time.Second).Error(); err != nil {
		return s.wrap(err)
	}
	return s.Transfer()
}
