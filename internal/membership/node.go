package membership

import (
	"sort"
	"sync"
	"time"
)

// State is a node's membership state as this node sees it.
type State int

const (
	// StateAlive: the node answers probes.
	StateAlive State = iota
	// StateSuspect: a probe of this node got no answer, directly or through
	// other nodes; unless it refutes, it will be declared dead.
	StateSuspect
	// StateDead: the failure detector gave up on the node: it crashed, was
	// killed, or its network is cut.
	StateDead
	// StateLeft: the node left the cluster on purpose (`shoal leave`, SIGTERM).
	StateLeft
)

var stateNames = [...]string{"alive", "suspect", "dead", "left"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}

// Member reports whether a node in state s is still in the cluster: alive, or
// suspect and not yet declared dead.
func (s State) Member() bool { return s == StateAlive || s == StateSuspect }

// ParseState is the inverse of [State.String].
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return 0, false
}

// Node is one member of the cluster as this node's gossip sees it: the
// table's entry, with the member's metadata as it was announced (Meta).
// The agent turns it into the member every other package sees
// ([shoal/internal/node.Node]), with the role the job store gives it.
type Node struct {
	Name string
	// Addr is the gossip address, host:port.
	Addr string
	Meta Meta
	// State and Since: the state and when this node saw it begin.
	State State
	Since time.Time
	// RTT is the round-trip time of the last direct probe of the node that this
	// node made (0 if none yet, and for the local node).
	RTT time.Duration
	// Local is true for the node reading the table.
	Local bool
}

// table holds every node seen, alive or not. Safe for concurrent use.
type table struct {
	mu    sync.Mutex
	nodes map[string]*Node
	// byAPI names the nodes by the API address in their metadata: more than one
	// when a node that is gone had the address a live one has now.
	byAPI map[string]map[string]bool
}

func newTable() *table { return &table{nodes: map[string]*Node{}, byAPI: map[string]map[string]bool{}} }

// set records n and returns the previous entry (zero, false if none).
func (t *table) set(n Node) (Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.nodes[n.Name]
	if ok {
		t.unindex(*old)
	}
	t.nodes[n.Name] = &n
	t.index(n)
	if !ok {
		return Node{}, false
	}
	return *old, true
}

// update applies f to the named node under the lock; it reports whether the node
// exists and returns the node before and after.
func (t *table) update(name string, f func(*Node)) (before, after Node, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[name]
	if !ok {
		return Node{}, Node{}, false
	}
	before = *n
	f(n)
	if n.Meta.API != before.Meta.API {
		t.unindex(before)
		t.index(*n)
	}
	return before, *n, true
}

// index and unindex add and remove n in byAPI. The caller holds mu.
func (t *table) index(n Node) {
	if n.Meta.API == "" {
		return
	}
	names := t.byAPI[n.Meta.API]
	if names == nil {
		names = map[string]bool{}
		t.byAPI[n.Meta.API] = names
	}
	names[n.Name] = true
}

func (t *table) unindex(n Node) {
	names := t.byAPI[n.Meta.API]
	delete(names, n.Name)
	if len(names) == 0 {
		delete(t.byAPI, n.Meta.API)
	}
}

// at returns the nodes whose metadata gives api as their API address, sorted
// by name: as many look-ups as nodes had the address, not one per node known.
func (t *table) at(api string) []Node {
	t.mu.Lock()
	out := make([]Node, 0, len(t.byAPI[api]))
	for name := range t.byAPI[api] {
		out = append(out, *t.nodes[name])
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (t *table) get(name string) (Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[name]
	if !ok {
		return Node{}, false
	}
	return *n, true
}

// list returns a copy of every node, sorted by name.
func (t *table) list() []Node {
	t.mu.Lock()
	out := make([]Node, 0, len(t.nodes))
	for _, n := range t.nodes {
		out = append(out, *n)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// forget removes dead and left nodes whose state is older than cutoff.
func (t *table) forget(cutoff time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, n := range t.nodes {
		if (n.State == StateDead || n.State == StateLeft) && n.Since.Before(cutoff) {
			t.unindex(*n)
			delete(t.nodes, name)
		}
	}
}
