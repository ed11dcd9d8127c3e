// Package place computes where each rank of a job runs. It is pure: it sees nodes as
// plain data and returns a [Placement], so it is tested without any network.
//
// Ranks go to nodes in contiguous blocks (neighbouring ranks usually talk most, and a
// block keeps their traffic inside one node's shared memory), with block sizes in
// proportion to each node's capacity (cores × speed), by the largest-remainder method.
// Ties are broken by node name, so a given input always gives the same placement.
package place

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Node is what the planner knows of one node.
type Node struct {
	Name  string
	Cores int
	// Speed is a relative compute speed (any unit, the same for all nodes); 0 means
	// unknown and counts as 1.
	Speed float64
}

// Placement maps each rank (the index) to the name of its node.
type Placement []string

// Errors of the planner.
var (
	ErrNoNodes      = errors.New("place: no nodes")
	ErrTooFewSlots  = errors.New("place: not enough cores")
	ErrBadRankCount = errors.New("place: rank count must be at least 1")
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
	return float64(n.Cores) * s
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
