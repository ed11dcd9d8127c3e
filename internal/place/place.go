// Package place computes where each rank of a job runs. It is pure: it sees nodes,
// links and traffic as plain data and returns a [Placement], so it is tested without
// any network, clock or randomness from outside its input.
//
// [Spread] places ranks in contiguous blocks (neighbouring ranks usually talk most, and
// a block keeps their traffic inside one node's shared memory), with block sizes in
// proportion to each node's capacity (cores × speed), by the largest-remainder method.
// Ties are broken by node name, so a given input always gives the same placement.
//
// [Choose] also weighs who talks to whom over which links, and how many nodes to use.
//
// # The cost model
//
// [Predict] gives the time of one iteration of a bulk-synchronous job: the time of its
// slowest node, computing and then communicating. For node n with r ranks, c cores and
// speed s (0 counts as 1), and W = [Input].Work:
//
//	compute(n) = W / s × max(1, r / c)
//
// each rank has a core of its own up to c; beyond, they share the cores. Traffic is
// summed per pair of ranks, both directions together: m messages and b bytes per
// iteration. A pair on nodes x and y takes, over the link between them (latency λ in
// seconds, bandwidth β in bytes per second, shared by both directions),
//
//	t(pair) = m × λ(x, y) + b / β(x, y)
//
// and a node's links carry their pairs one after another, so
//
//	comm(n)  = Σ t(pair) over the pairs with a rank on n (a pair inside n counts once)
//	T        = max over the nodes with ranks of compute(n) + comm(n)
//
// A pair inside one node goes through [SharedMemory]; a pair of nodes that [Links] does
// not name gets [DefaultLink]. Traffic not given is [NeighbourTraffic]: a ring of
// equal messages, rank i with i+1. Under this model cores are independent: a node
// computes as fast with one busy core as with all of them, so only oversubscription or
// slower nodes make packing cost compute time, and only traffic across slow links makes
// spreading cost communication time.
//
// # The search
//
// Choosing a rank → node map to minimise T is a quadratic assignment problem; Choose
// uses a multi-start local search followed by an iterated local search (Lourenço,
// Martin and Stützle), which for up to 8 ranks on 4 nodes agrees with an exhaustive
// search within 5 % on every instance the tests generate (and is optimal on almost all):
//
//   - Seeds: the Spread layout, and contiguous blocks (sized as Spread sizes them) over
//     prefixes of several node orders: by name, by capacity, and, from up to 8 nodes
//     far apart on the network, growing by the node whose slowest link to those taken
//     is fastest. Prefixes of few nodes pack the job, long ones spread it; a prefix of
//     one site keeps it off the slow link.
//   - Descent from the Spread layout and the best seeds: each rank in turn takes its
//     best move to a node with a free slot; when no move helps, each takes its best swap
//     with a rank on another node where one of the two has partners. A placement is
//     better when its T is lower, or equal and its ranks' mean time (each rank counted
//     with its node's time) is lower: that second measure leads the search across the
//     plateaus of a max. A move or swap is weighed in time proportional to the nodes it
//     touches, from per-rank traffic summed by node.
//   - Kicks: the best placement so far is perturbed (two nodes trade their ranks, or a
//     few ranks move at random) and descends again; what is better is kept. The PRNG is
//     seeded from a digest of the input in canonical order.
//
// The search stops after a fixed amount of work, not time, so the same input always
// gives the same plan, whatever the order of its nodes and flows. Of the placements it
// finds with equal time it keeps the one that puts rank 0 on the first node by name,
// then rank 1, and so on. It is never worse than the Spread layout, which it starts
// from. [Plan].Reason compares the plan with the best placement found on more nodes
// (or, failing that, on fewer).
package place

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Node is what the planner knows of one node: a narrow view of the cluster
// member ([shoal/internal/node.Node]) with only what a placement depends
// on, so that the planner stays pure data in and out, testable with no
// cluster, and says by its fields what a plan can depend on. The coordinator
// builds it from the member and the job's history (MaxRanks).
type Node struct {
	Name  string
	Arch  string // its instruction set, as Go names it ("amd64"); see ArchSets
	Cores int
	// CPUs is the CPU time the node's ranks get together, in cores, when a quota
	// gives them less than Cores whole cores (a container's, a cgroup's); 0 means
	// Cores. A rank alone on such a node still runs at up to a whole core's speed.
	CPUs float64
	// Speed is a relative compute speed of one whole core (any unit, the same for
	// all nodes); 0 means unknown and counts as 1.
	Speed float64
	// MaxRanks bounds the job's ranks on the node whatever the options: the most
	// it ran before it killed the others (job.RankLimits). 0 means no bound.
	MaxRanks int
}

// cpus is how many whole cores' worth of CPU n's ranks get together.
func (n Node) cpus() float64 {
	c := float64(max(n.Cores, 1))
	if n.CPUs > 0 {
		c = min(c, n.CPUs)
	}
	return c
}

// Placement maps each rank (the index) to the name of its node.
type Placement []string

// Errors of the planner.
var (
	ErrNoNodes      = errors.New("place: no nodes")
	ErrTooFewSlots  = errors.New("place: not enough cores")
	ErrBadRankCount = errors.New("place: rank count must be at least 1")
	// ErrBadTraffic: a flow names a rank the job does not have, or a negative amount.
	ErrBadTraffic = errors.New("place: bad traffic")
	// ErrDuplicateNode: two nodes of one input share a name.
	ErrDuplicateNode = errors.New("place: node listed twice")
)

// Options bound a placement.
type Options struct {
	// MaxOversubscribe is how many ranks a node may run per core (1 means never more
	// ranks than cores; 0.5, one rank per two cores). 0 means 1.
	MaxOversubscribe float64
	// MaxPerNode bounds the ranks of any one node, whatever its cores (1 spreads
	// the ranks one per node, as bandwidth tests want). 0 means no bound.
	MaxPerNode int
}

func (o Options) slots(n Node) int {
	f := o.MaxOversubscribe
	if f <= 0 {
		f = 1
	}
	s := int(math.Floor(float64(n.Cores)*f + 1e-9))
	if o.MaxPerNode > 0 {
		s = min(s, o.MaxPerNode)
	}
	if n.MaxRanks > 0 {
		s = min(s, n.MaxRanks)
	}
	return s
}

// Spread places nranks ranks over nodes in proportion to cores × speed, never giving
// a node more ranks than its slots. Nodes are taken in name order.
func Spread(nodes []Node, nranks int, opt Options) (Placement, error) {
	if nranks < 1 {
		return nil, ErrBadRankCount
	}
	if len(nodes) == 0 {
		return nil, ErrNoNodes
	}
	ns := append([]Node(nil), nodes...)
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	total := 0
	for _, n := range ns {
		total += opt.slots(n)
	}
	if total < nranks {
		return nil, fmt.Errorf("%w: %d ranks, %d slots on %d nodes (allow more ranks per core with --max-oversubscribe, or per node with --ranks-per-node)",
			ErrTooFewSlots, nranks, total, len(ns))
	}
	counts := apportion(ns, nranks, opt)
	p := make(Placement, 0, nranks)
	for i, n := range ns {
		for k := 0; k < counts[i]; k++ {
			p = append(p, n.Name)
		}
	}
	return p, nil
}

// Cyclic deals nranks ranks to nodes in turn, in name order, rank i to the
// next node with a free slot: round-robin placement, for comparison in
// benchmarks. Its errors are Spread's.
func Cyclic(nodes []Node, nranks int, opt Options) (Placement, error) {
	if _, err := Spread(nodes, nranks, opt); err != nil {
		return nil, err
	}
	ns := append([]Node(nil), nodes...)
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	used := make([]int, len(ns))
	p := make(Placement, 0, nranks)
	for k := 0; len(p) < nranks; k = (k + 1) % len(ns) {
		if used[k] < opt.slots(ns[k]) {
			p = append(p, ns[k].Name)
			used[k]++
		}
	}
	return p, nil
}

// Packed fills nodes in name order, each to its slots, before the next: the
// fewest nodes, for comparison in benchmarks. Its errors are Spread's.
func Packed(nodes []Node, nranks int, opt Options) (Placement, error) {
	if _, err := Spread(nodes, nranks, opt); err != nil {
		return nil, err
	}
	ns := append([]Node(nil), nodes...)
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	p := make(Placement, 0, nranks)
	for _, n := range ns {
		for k := 0; k < opt.slots(n) && len(p) < nranks; k++ {
			p = append(p, n.Name)
		}
	}
	return p, nil
}

// apportion gives each node a share of nranks in proportion to its capacity, capped by
// its slots, by largest remainder; what a capped node cannot take goes round again.
func apportion(ns []Node, nranks int, opt Options) []int {
	counts := make([]int, len(ns))
	left := nranks
	for left > 0 {
		var open []int
		capTotal := 0.0
		for i, n := range ns {
			if counts[i] < opt.slots(n) {
				open = append(open, i)
				capTotal += capacity(n)
			}
		}
		type share struct {
			i    int
			frac float64
		}
		var shares []share
		given := 0
		for _, i := range open {
			exact := float64(left) * capacity(ns[i]) / capTotal
			whole := int(math.Floor(exact + 1e-9))
			room := opt.slots(ns[i]) - counts[i]
			if whole > room {
				whole = room
			}
			counts[i] += whole
			given += whole
			if counts[i] < opt.slots(ns[i]) {
				shares = append(shares, share{i, exact - math.Floor(exact+1e-9)})
			}
		}
		sort.SliceStable(shares, func(a, b int) bool { return shares[a].frac > shares[b].frac })
		rest := left - given
		for _, s := range shares {
			if rest == 0 {
				break
			}
			counts[s.i]++
			rest--
		}
		left = rest
	}
	return counts
}

func capacity(n Node) float64 {
	s := n.Speed
	if s <= 0 {
		s = 1
	}
	return n.cpus() * s
}

// Block is the layout older systems produce after a loss, kept for comparison in
// benchmarks: every rank of a lost node moves, as one block, to the surviving node
// with the most free cores; the other ranks stay where they were.
func Block(prev Placement, live []Node) (Placement, error) {
	if len(live) == 0 {
		return nil, ErrNoNodes
	}
	alive := map[string]bool{}
	used := map[string]int{}
	for _, n := range live {
		alive[n.Name] = true
	}
	for _, name := range prev {
		if alive[name] {
			used[name]++
		}
	}
	ns := append([]Node(nil), live...)
	sort.Slice(ns, func(i, j int) bool {
		fi, fj := ns[i].Cores-used[ns[i].Name], ns[j].Cores-used[ns[j].Name]
		if fi != fj {
			return fi > fj
		}
		return ns[i].Name < ns[j].Name
	})
	target := ns[0].Name
	out := make(Placement, len(prev))
	for r, name := range prev {
		out[r] = name
		if !alive[name] {
			out[r] = target
		}
	}
	return out, nil
}

// Counts returns how many ranks each node runs.
func (p Placement) Counts() map[string]int {
	c := map[string]int{}
	for _, n := range p {
		c[n]++
	}
	return c
}

// String renders a placement as "n1:0-1 n2:2-3", for messages.
func (p Placement) String() string {
	var parts []string
	for start := 0; start < len(p); {
		end := start
		for end+1 < len(p) && p[end+1] == p[start] {
			end++
		}
		if start == end {
			parts = append(parts, fmt.Sprintf("%s:%d", p[start], start))
		} else {
			parts = append(parts, fmt.Sprintf("%s:%d-%d", p[start], start, end))
		}
		start = end + 1
	}
	return strings.Join(parts, " ")
}
