package place

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Link is what is known of the network between two nodes. A field ≤ 0 is unknown and
// takes [DefaultLink]'s value.
type Link struct {
	Latency   float64 // seconds per message
	Bandwidth float64 // bytes per second, both directions together
}

// Measured on this project's build machine (docs/architecture.md): Open MPI between two
// ranks of one machine over shared memory, and a default for a network nobody measured.
var (
	// SharedMemory is the link between ranks of one node: 0.15 µs, 10.7 GB/s.
	SharedMemory = Link{Latency: 0.15e-6, Bandwidth: 10.7e9}
	// DefaultLink is a link between two nodes that [Links] does not name: 100 µs,
	// 1 Gbit/s, a wired LAN.
	DefaultLink = Link{Latency: 100e-6, Bandwidth: 125e6}
)

// NodePair names the two ends of a link.
type NodePair struct{ A, B string }

// Links holds the links between nodes, by pair of node names in either order. A pair
// it does not hold is [DefaultLink]; a node and itself is [SharedMemory] unless the
// pair {N, N} is given.
type Links map[NodePair]Link

// Between returns the link between nodes a and b: {a, b} if given, else {b, a}, with
// unknown fields filled in.
func (l Links) Between(a, b string) Link {
	def := DefaultLink
	if a == b {
		def = SharedMemory
	}
	k, ok := l[NodePair{a, b}]
	if !ok {
		k = l[NodePair{b, a}]
	}
	if !(k.Latency > 0) {
		k.Latency = def.Latency
	}
	if !(k.Bandwidth > 0) {
		k.Bandwidth = def.Bandwidth
	}
	return k
}

// time is how long the link takes to carry msgs messages of bytes in all.
func (k Link) time(msgs, bytes float64) float64 {
	return msgs*k.Latency + bytes/k.Bandwidth
}

// Flow is what rank From sends rank To in one iteration.
type Flow struct {
	From, To int
	Bytes    float64
	Messages float64
}

// NeighbourBytes is what [NeighbourTraffic] assumes each neighbour pair exchanges in one
// iteration, each way, in one message.
const NeighbourBytes = 64 << 10

// NeighbourTraffic is the traffic assumed when none was measured: a ring in which rank
// i exchanges one message of [NeighbourBytes] each way with rank i+1, and the last rank
// with rank 0.
func NeighbourTraffic(ranks int) []Flow {
	if ranks < 2 {
		return nil
	}
	var fs []Flow
	for i := 0; i < ranks; i++ {
		j := (i + 1) % ranks
		if ranks == 2 && i == 1 {
			break // 1 → 0 is the pair 0 ↔ 1 again
		}
		fs = append(fs, Flow{i, j, NeighbourBytes, 1}, Flow{j, i, NeighbourBytes, 1})
	}
	return fs
}

// Input is everything [Choose] and [Predict] know of a job and the nodes it may use.
type Input struct {
	Nodes []Node
	Ranks int
	// Work is one rank's compute in one iteration, in seconds on a core of speed 1: a
	// rank takes Work / Speed seconds on a core of its own. With Speed in loops per
	// second, as agents measure it, Work is in loops. ≤ 0 means unknown, taken as 1 s
	// on a core of the fastest node.
	Work float64
	// Traffic is what ranks send each other in one iteration. Flows of one pair add
	// up; a rank's flows to itself are ignored. nil or empty means unknown, taken as
	// [NeighbourTraffic], unless Measured.
	Traffic []Flow
	// Measured says Traffic was measured: empty then means the ranks send each
	// other nothing, not that nobody knows.
	Measured bool
	// Links between the nodes; nil means every pair is [DefaultLink].
	Links   Links
	Options Options
}

// Cost is the predicted time of one iteration: that of the slowest node.
type Cost struct {
	Node    string  // the slowest node (the first by name among equals)
	Compute float64 // seconds its ranks compute
	Comm    float64 // seconds its links carry traffic
}

// Total is the predicted seconds of one iteration.
func (c Cost) Total() float64 { return c.Compute + c.Comm }

// Predict returns the time one iteration takes with the ranks placed as p, by the
// model of the package doc.
func Predict(in Input, p Placement) (Cost, error) {
	m, err := newModel(in)
	if err != nil {
		return Cost{}, err
	}
	at, err := m.indices(p)
	if err != nil {
		return Cost{}, err
	}
	return m.cost(at), nil
}

// model is an Input made ready for search: nodes in name order, pairs of ranks with
// their traffic both ways summed, and the link times per message and per byte of every
// pair of nodes.
type model struct {
	nodes     []Node
	index     map[string]int
	slots     []int
	perRank   []float64 // compute seconds of one rank alone on a core of each node
	cores     []float64
	ranks     int
	pairs     []pair
	adj       [][]edge // adj[i]: rank i's pairs
	lat, perB []float64
	links     Links
	opt       Options
}

// pair is the traffic of ranks I < J both ways together in one iteration.
type pair struct {
	I, J        int
	Msgs, Bytes float64
}

type edge struct {
	j           int
	msgs, bytes float64
}

func newModel(in Input) (*model, error) {
	if in.Ranks < 1 {
		return nil, ErrBadRankCount
	}
	if len(in.Nodes) == 0 {
		return nil, ErrNoNodes
	}
	m := &model{nodes: append([]Node(nil), in.Nodes...), index: map[string]int{}, ranks: in.Ranks, links: in.Links, opt: in.Options}
	sort.Slice(m.nodes, func(i, j int) bool { return m.nodes[i].Name < m.nodes[j].Name })
	n := len(m.nodes)
	work, fastest := in.Work, 0.0
	for i, nd := range m.nodes {
		if _, dup := m.index[nd.Name]; dup {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateNode, nd.Name)
		}
		m.index[nd.Name] = i
		fastest = max(fastest, speed(nd))
	}
	if !(work > 0) {
		work = fastest
	}
	m.slots = make([]int, n)
	m.perRank = make([]float64, n)
	m.cores = make([]float64, n)
	for i, nd := range m.nodes {
		m.slots[i] = max(in.Options.slots(nd), 0)
		m.perRank[i] = work / speed(nd)
		m.cores[i] = nd.cpus()
	}
	m.lat, m.perB = make([]float64, n*n), make([]float64, n*n)
	for a := range m.nodes {
		for b := range m.nodes {
			k := in.Links.Between(m.nodes[a].Name, m.nodes[b].Name)
			m.lat[a*n+b], m.perB[a*n+b] = k.Latency, 1/k.Bandwidth
		}
	}
	traffic := in.Traffic
	if len(traffic) == 0 && !in.Measured {
		traffic = NeighbourTraffic(in.Ranks)
	}
	flows := make([]pair, 0, len(traffic))
	for _, f := range traffic {
		if f.From < 0 || f.From >= in.Ranks || f.To < 0 || f.To >= in.Ranks {
			return nil, fmt.Errorf("%w: flow %d → %d for %d ranks", ErrBadTraffic, f.From, f.To, in.Ranks)
		}
		if f.Bytes < 0 || f.Messages < 0 || math.IsNaN(f.Bytes+f.Messages) || math.IsInf(f.Bytes+f.Messages, 0) {
			return nil, fmt.Errorf("%w: flow %d → %d of %g bytes in %g messages", ErrBadTraffic, f.From, f.To, f.Bytes, f.Messages)
		}
		if f.From != f.To && f.Bytes+f.Messages > 0 {
			flows = append(flows, pair{min(f.From, f.To), max(f.From, f.To), f.Messages, f.Bytes})
		}
	}
	for _, f := range sortPairs(flows, in.Ranks) {
		if k := len(m.pairs) - 1; k >= 0 && m.pairs[k].I == f.I && m.pairs[k].J == f.J {
			m.pairs[k].Msgs += f.Msgs
			m.pairs[k].Bytes += f.Bytes
		} else {
			m.pairs = append(m.pairs, f)
		}
	}
	m.adj = make([][]edge, in.Ranks)
	for _, p := range m.pairs {
		m.adj[p.I] = append(m.adj[p.I], edge{p.J, p.Msgs, p.Bytes})
		m.adj[p.J] = append(m.adj[p.J], edge{p.I, p.Msgs, p.Bytes})
	}
	return m, nil
}

// sortPairs sorts flows by ranks I then J, and the flows of one pair by amount, so
// that their sums do not depend on the order they came in: two counting sorts, as there
// may be ranks² flows.
func sortPairs(flows []pair, ranks int) []pair {
	by := func(in []pair, key func(pair) int) []pair {
		start := make([]int, ranks+1)
		for _, f := range in {
			start[key(f)+1]++
		}
		for r := 1; r <= ranks; r++ {
			start[r] += start[r-1]
		}
		out := make([]pair, len(in))
		for _, f := range in {
			out[start[key(f)]] = f
			start[key(f)]++
		}
		return out
	}
	flows = by(by(flows, func(f pair) int { return f.J }), func(f pair) int { return f.I })
	for i := 0; i < len(flows); {
		j := i + 1
		for j < len(flows) && flows[j].I == flows[i].I && flows[j].J == flows[i].J {
			j++
		}
		if j-i > 2 { // two add up the same either way
			slices.SortFunc(flows[i:j], func(x, y pair) int {
				return cmp.Or(cmp.Compare(x.Msgs, y.Msgs), cmp.Compare(x.Bytes, y.Bytes))
			})
		}
		i = j
	}
	return flows
}

func speed(n Node) float64 {
	if n.Speed > 0 {
		return n.Speed
	}
	return 1
}

// compute is how long node a takes for its share of an iteration with r ranks: each has
// a core of its own up to the node's CPUs (its cores, or fewer under a quota), beyond
// them they share.
func (m *model) compute(a, r int) float64 {
	if r == 0 {
		return 0
	}
	return m.perRank[a] * max(1, float64(r)/m.cores[a])
}

// linkTime is how long the link between nodes a and b takes for a pair's traffic.
func (m *model) linkTime(a, b int, msgs, bytes float64) float64 {
	k := a*len(m.nodes) + b
	return msgs*m.lat[k] + bytes*m.perB[k]
}

// indices turns a placement into node indices, checking it places every rank on a
// known node.
func (m *model) indices(p Placement) ([]int, error) {
	if len(p) != m.ranks {
		return nil, fmt.Errorf("place: placement of %d ranks for %d", len(p), m.ranks)
	}
	at := make([]int, len(p))
	for r, name := range p {
		a, ok := m.index[name]
		if !ok {
			return nil, fmt.Errorf("place: rank %d on %q, not one of the nodes", r, name)
		}
		at[r] = a
	}
	return at, nil
}

func (m *model) placement(at []int) Placement {
	p := make(Placement, len(at))
	for r, a := range at {
		p[r] = m.nodes[a].Name
	}
	return p
}

// times returns every node's compute and communication seconds with rank r on node
// at[r]: a pair on one node counts once, on its node; a pair across a link counts on
// both ends.
func (m *model) times(at []int) (comp, comm []float64) {
	n := len(m.nodes)
	count := make([]int, n)
	for _, a := range at {
		count[a]++
	}
	comp, comm = make([]float64, n), make([]float64, n)
	for a := range comp {
		comp[a] = m.compute(a, count[a])
	}
	for _, p := range m.pairs {
		a, b := at[p.I], at[p.J]
		t := m.linkTime(a, b, p.Msgs, p.Bytes)
		comm[a] += t
		if b != a {
			comm[b] += t
		}
	}
	return comp, comm
}

func (m *model) cost(at []int) Cost {
	comp, comm := m.times(at)
	best := -1
	for a := range m.nodes {
		if best < 0 || comp[a]+comm[a] > comp[best]+comm[best] {
			best = a
		}
	}
	return Cost{Node: m.nodes[best].Name, Compute: comp[best], Comm: comm[best]}
}
