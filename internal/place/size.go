package place

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// PerCore is the rank count of a run that gives each rank a core of its own
// over nodes: each node's whole cores (what a quota leaves, rounded down, at
// least one), no more than its slots.
func PerCore(nodes []Node, opt Options) int {
	n := 0
	for _, nd := range nodes {
		n += min(max(int(math.Floor(nd.cpus()+1e-9)), 1), opt.slots(nd))
	}
	return n
}

// Sizing is the rank counts an elastic job allows: from Lo to Hi, those
// Allows accepts (nil: all of them).
type Sizing struct {
	Lo, Hi int
	Allows func(n int) bool
}

func (s Sizing) allows(n int) bool {
	return n >= max(s.Lo, 1) && n <= s.Hi && (s.Allows == nil || s.Allows(n))
}

// Sized is the rank count [Size] chose, what it predicts of one iteration,
// and why, in words for the line that announces a resize.
type Sized struct {
	Ranks int
	Cost  Cost // one iteration at Ranks, the ranks in blocks; zero when they do not fit
	Why   string
}

// Size chooses an elastic job's rank count over in.Nodes: of the counts s
// allows that fit the nodes' slots (in.Options), the one whose iteration is
// predicted shortest ([Predict], the ranks in blocks: [Spread] or [Packed]),
// the fewest ranks among equals. What was learned of the job at in.Ranks
// ranks is rescaled to each count M: a rank's work is in.Work × in.Ranks / M,
// the traffic is [RescaleTraffic]'s. Where nothing was learned (in.Ranks 0)
// the job is taken to run a second of work per rank on a core of the fastest
// node at one rank per core, with [NeighbourTraffic]: the count is then one
// rank per core ([PerCore]) on equal nodes.
//
// When no count the job allows fits the slots, Size returns the fewest it
// allows, which does not fit: placing it fails, or oversubscribes, as the
// caller's options say. It fails only when s allows no count at all, or the
// input is bad.
func Size(in Input, s Sizing) (Sized, error) {
	if len(in.Nodes) == 0 {
		return Sized{}, ErrNoNodes
	}
	slots, cores := 0, PerCore(in.Nodes, in.Options)
	for _, nd := range in.Nodes {
		slots += in.Options.slots(nd)
	}
	on := nodeNames(in.Nodes)
	if in.Ranks < 1 {
		in.Ranks, in.Work, in.Traffic, in.Measured = max(cores, 1), 0, nil, false
	}
	if in.Work <= 0 {
		fastest := 0.0
		for _, nd := range in.Nodes {
			fastest = max(fastest, speed(nd))
		}
		in.Work = fastest
	}
	best, perCore := Sized{}, Sized{}
	for m := max(s.Lo, 1); m <= min(s.Hi, slots); m++ {
		if !s.allows(m) {
			continue
		}
		at, err := rescaled(in, m)
		if err != nil {
			return Sized{}, err
		}
		c, ok, err := quickest(at)
		if err != nil {
			return Sized{}, err
		}
		if !ok {
			continue
		}
		if best.Ranks == 0 || c.Total() < best.Cost.Total()*(1-1e-9) {
			best = Sized{Ranks: m, Cost: c}
		}
		if m == cores {
			perCore = Sized{Ranks: m, Cost: c}
		}
	}
	switch {
	case best.Ranks == 0:
		for m := max(s.Lo, 1); m <= s.Hi; m++ {
			if s.allows(m) {
				return Sized{Ranks: m, Why: fmt.Sprintf("the fewest the job allows, more than the %d slots of %s", slots, on)}, nil
			}
		}
		return Sized{}, fmt.Errorf("%w: the job allows no count from %d to %d", ErrBadRankCount, s.Lo, s.Hi)
	case best.Ranks == cores:
		best.Why = "one per core on " + on
	case perCore.Ranks > 0:
		best.Why = fmt.Sprintf("%s per iteration predicted against %s at one per core on %s", seconds(best.Cost.Total()), seconds(perCore.Cost.Total()), on)
	default:
		best.Why = fmt.Sprintf("%d of the %d cores of %s: the most the job allows there", best.Ranks, cores, on)
	}
	return best, nil
}

// quickest predicts an iteration of in with the ranks in blocks: spread in
// proportion to the nodes' capacity ([Spread]) or packed onto the fewest
// ([Packed]), whichever is shorter; false when the ranks fit neither. The
// planner's search, which the caller runs for the count chosen, does no worse.
func quickest(in Input) (Cost, bool, error) {
	var best Cost
	found := false
	for _, layout := range []func([]Node, int, Options) (Placement, error){Spread, Packed} {
		p, err := layout(in.Nodes, in.Ranks, in.Options)
		if err != nil {
			continue
		}
		c, err := Predict(in, p)
		if err != nil {
			return Cost{}, false, err
		}
		if !found || c.Total() < best.Total() {
			best, found = c, true
		}
	}
	return best, found, nil
}

// rescaled is in as learned at in.Ranks ranks, made a job of m ranks.
func rescaled(in Input, m int) (Input, error) {
	out := in
	out.Ranks = m
	out.Work = in.Work * float64(in.Ranks) / float64(m)
	if len(in.Traffic) > 0 || in.Measured {
		t, err := RescaleTraffic(in.Traffic, in.Ranks, m)
		if err != nil {
			return Input{}, err
		}
		out.Traffic = t
	}
	return out, nil
}

// RescaleTraffic is the traffic flows, measured between n ranks, of the same
// job run on m ranks of contiguous blocks of its data: rank i of n holds the
// part that ranks i·m/n to (i+1)·m/n (rounded down) of m hold. A flow between
// ranks i and j becomes one between the ranks of m that hold the two facing
// ends of their parts: the last of i's and the first of j's when i < j, and
// the other way round. When m < n, a flow between two ranks whose parts merge
// into one rank's vanishes into its memory, and flows that land on one pair
// of ranks take the largest of them, not their sum: the boundary between two
// blocks is as large however many blocks of the old count it spans. When
// m > n, the new boundaries inside an old rank's part carry, each way, the
// mean of the measured flows. It is a 1-D model of a decomposition, good for
// the stencils and pipelines that talk to their neighbours; the coordinator
// learns the traffic again at the new count.
func RescaleTraffic(flows []Flow, n, m int) ([]Flow, error) {
	if n < 1 || m < 1 {
		return nil, ErrBadRankCount
	}
	for _, f := range flows {
		if f.From < 0 || f.From >= n || f.To < 0 || f.To >= n {
			return nil, fmt.Errorf("%w: flow %d → %d for %d ranks", ErrBadTraffic, f.From, f.To, n)
		}
	}
	if n == m {
		return append([]Flow(nil), flows...), nil
	}
	first := func(i int) int { return (i*m + n - 1) / n } // ⌈i·m/n⌉
	last := func(i int) int { return max(first(i+1)-1, first(i)) }
	if m < n {
		first = func(i int) int { return i * m / n }
		last = first
	}
	type key struct{ from, to int }
	merged := map[key]Flow{}
	var sum Flow
	counted := 0
	for _, f := range flows {
		if f.From == f.To || f.Bytes+f.Messages <= 0 {
			continue
		}
		sum.Bytes += f.Bytes
		sum.Messages += f.Messages
		counted++
		a, b := last(f.From), first(f.To)
		if f.From > f.To {
			a, b = first(f.From), last(f.To)
		}
		if a == b {
			continue
		}
		k := key{a, b}
		g := merged[k]
		merged[k] = Flow{From: a, To: b, Bytes: max(g.Bytes, f.Bytes), Messages: max(g.Messages, f.Messages)}
	}
	if m > n && counted > 0 {
		mean := Flow{Bytes: sum.Bytes / float64(counted), Messages: sum.Messages / float64(counted)}
		for i := range n {
			for r := first(i); r < last(i); r++ {
				for _, k := range []key{{r, r + 1}, {r + 1, r}} {
					merged[k] = Flow{From: k.from, To: k.to, Bytes: mean.Bytes, Messages: mean.Messages}
				}
			}
		}
	}
	out := make([]Flow, 0, len(merged))
	for _, f := range merged {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out, nil
}

// nodeNames names nodes in name order: "n1, n2".
func nodeNames(nodes []Node) string {
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
