package place

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
)

// Plan is the placement [Choose] found best, with what it predicts.
type Plan struct {
	Placement Placement
	Cost      Cost // predicted time of one iteration
	// SpreadCost is the predicted time of one iteration with the ranks placed by
	// [Spread] on the same nodes, for comparison.
	SpreadCost Cost
	// Reason says in one line why this many nodes: what the best placement on more
	// (or fewer) nodes would cost instead.
	Reason string
}

// Choose chooses how many of in.Nodes to use and which rank runs on which, to minimise
// the predicted time of one iteration ([Predict]); see the package doc for the search.
// Its errors are those of [Spread] for the same nodes, ranks and options, and
// [ErrBadTraffic] or [ErrDuplicateNode] for a bad Traffic or Nodes.
func Choose(in Input) (Plan, error) {
	m, err := newModel(in)
	if err != nil {
		return Plan{}, err
	}
	spread, err := Spread(m.nodes, in.Ranks, in.Options)
	if err != nil {
		return Plan{}, err
	}
	baseline, _ := m.indices(spread)

	best := bestByNodes{}
	chosen := m.improve(m.seeds(baseline), best)
	plan := Plan{
		Placement:  m.placement(chosen.at),
		Cost:       m.cost(chosen.at),
		SpreadCost: m.cost(baseline),
	}
	plan.Reason = m.reason(chosen, best)
	return plan, nil
}

// candidate is one placement with its objective.
type candidate struct {
	at    []int
	obj   objective
	nodes int // nodes used
}

func (m *model) candidate(at []int) candidate {
	comp, comm := m.times(at)
	count := make([]int, len(m.nodes))
	for _, a := range at {
		count[a]++
	}
	c := candidate{at: append([]int(nil), at...)}
	for a, r := range count {
		if r == 0 {
			continue
		}
		c.nodes++
		t := comp[a] + comm[a]
		c.obj.max = max(c.obj.max, t)
		c.obj.sum += float64(r) * t
	}
	c.obj.sum /= float64(m.ranks)
	return c
}

// less orders candidates by objective, then rank by rank by node name.
func (c candidate) less(d candidate) bool {
	if c.obj.better(d.obj) {
		return true
	}
	if d.obj.better(c.obj) {
		return false
	}
	for r := range c.at {
		if c.at[r] != d.at[r] {
			return c.at[r] < d.at[r]
		}
	}
	return false
}

// bestByNodes keeps the best candidate seen for each number of nodes used.
type bestByNodes map[int]candidate

func (b bestByNodes) add(c candidate) {
	if old, ok := b[c.nodes]; !ok || c.less(old) {
		b[c.nodes] = c
	}
}

func hashPlacement(at []int) uint64 {
	h := fnv.New64a()
	var buf [4]byte
	for _, a := range at {
		buf[0], buf[1], buf[2], buf[3] = byte(a), byte(a>>8), byte(a>>16), byte(a>>24)
		h.Write(buf[:])
	}
	return h.Sum64()
}

// blocks lays the ranks out in contiguous blocks over nodes, in that order, with
// block sizes in proportion to capacity as [Spread] makes them.
func (m *model) blocks(order []int) []int {
	ns := make([]Node, len(order))
	for i, a := range order {
		ns[i] = m.nodes[a]
	}
	at := make([]int, 0, m.ranks)
	for i, k := range apportion(ns, m.ranks, m.opt) {
		for ; k > 0; k-- {
			at = append(at, order[i])
		}
	}
	return at
}

// seeds are the placements the search starts from: baseline first, then contiguous
// blocks over each prefix of each of [model.orders] that has slots for every rank (the
// first few prefixes, then every other doubling, then all nodes).
func (m *model) seeds(baseline []int) []candidate {
	seen := map[uint64]bool{}
	var seeds []candidate
	add := func(at []int) {
		if h := hashPlacement(at); !seen[h] {
			seen[h] = true
			seeds = append(seeds, m.candidate(at))
		}
	}
	add(baseline)
	for _, order := range m.orders() {
		slots, first := 0, -1
		for k, a := range order {
			slots += m.slots[a]
			if slots < m.ranks {
				continue
			}
			if first < 0 {
				first = k
			}
			if d := k - first; d < 4 || d&(d-1) == 0 || k == len(order)-1 {
				add(m.blocks(order[:k+1]))
			}
		}
	}
	return seeds
}

// maxStarts bounds the nodes the link-greedy orders start from.
const maxStarts = 8

// orders are the node orders whose prefixes seed the search: by name, by capacity, and
// from up to [maxStarts] far-apart nodes each, growing by the node whose slowest link to
// those taken is fastest. Nodes without slots are left out.
func (m *model) orders() [][]int {
	var usable []int
	for a := range m.nodes {
		if m.slots[a] > 0 {
			usable = append(usable, a)
		}
	}
	byCapacity := append([]int(nil), usable...)
	sort.SliceStable(byCapacity, func(i, j int) bool {
		return capacity(m.nodes[byCapacity[i]]) > capacity(m.nodes[byCapacity[j]])
	})
	out := [][]int{usable, byCapacity}
	dist := m.messageTimes()
	var starts []int
	for len(starts) < min(maxStarts, len(usable)) {
		next, far := -1, -1.0
		for _, a := range byCapacity {
			d := 0.0
			if len(starts) > 0 {
				d = dist(a, starts[0])
				for _, s := range starts[1:] {
					d = min(d, dist(a, s))
				}
				if d == 0 {
					continue
				}
			}
			if d > far {
				next, far = a, d
			}
		}
		if next < 0 {
			break
		}
		starts = append(starts, next)
	}
	// Each node's slowest link to the nodes taken so far is kept as the order
	// grows, rather than found again over the whole order at every step: O(n²)
	// an order instead of O(n³) (10 of the planner's 38 ms at 128 nodes).
	worstTo := make([]float64, len(m.nodes))
	taken := make([]bool, len(m.nodes))
	for _, s := range starts {
		order := []int{s}
		clear(taken)
		taken[s] = true
		for _, a := range byCapacity {
			worstTo[a] = dist(a, s)
		}
		for len(order) < len(usable) {
			next := -1
			for _, a := range byCapacity {
				if !taken[a] && (next < 0 || worstTo[a] < worstTo[next]) {
					next = a
				}
			}
			order = append(order, next)
			taken[next] = true
			for _, a := range byCapacity {
				worstTo[a] = max(worstTo[a], dist(a, next))
			}
		}
		out = append(out, order)
	}
	return out
}

// messageTimes returns how long the link between two nodes takes for the job's mean
// message (a node and itself: 0).
func (m *model) messageTimes() func(a, b int) float64 {
	msgs, bytes := 0.0, 0.0
	for _, p := range m.pairs {
		msgs += p.Msgs
		bytes += p.Bytes
	}
	size := float64(NeighbourBytes)
	if msgs > 0 {
		size = bytes / msgs
	}
	return func(a, b int) float64 {
		if a == b {
			return 0
		}
		return m.linkTime(a, b, 1, size)
	}
}

// reason says why the chosen candidate uses as many nodes as it does, against the best
// candidate seen on more nodes (or, when none did better, on fewer).
func (m *model) reason(chosen candidate, best bestByNodes) string {
	names := m.usedNames(chosen.at)
	cost := m.cost(chosen.at)
	var more, fewer *candidate
	for k, c := range best {
		c := c
		if k > chosen.nodes && (more == nil || c.less(*more)) {
			more = &c
		}
		if k < chosen.nodes && (fewer == nil || c.less(*fewer)) {
			fewer = &c
		}
	}
	switch {
	case more != nil:
		alt := m.cost(more.at)
		if !(alt.Total() > cost.Total()*1.005) {
			return fmt.Sprintf("packed %d ranks on %s: no slower than over %d nodes (predicted %s/iter)",
				m.ranks, names, more.nodes, seconds(cost.Total()))
		}
		return fmt.Sprintf("packed %d ranks on %s: over %d nodes %s would make each iteration %s as long (%s against %s)",
			m.ranks, names, more.nodes, m.bottleneck(more.at, alt, cost), ratio(alt.Total(), cost.Total()), seconds(alt.Total()), seconds(cost.Total()))
	case fewer != nil:
		alt := m.cost(fewer.at)
		if !(alt.Total() > cost.Total()*1.005) {
			return fmt.Sprintf("spread %d ranks over %d nodes: packed on %d they would be no faster (predicted %s/iter)",
				m.ranks, chosen.nodes, fewer.nodes, seconds(cost.Total()))
		}
		if alt.Compute >= alt.Comm {
			return fmt.Sprintf("spread %d ranks over %d nodes: compute dominates (predicted %s/iter against %s packed on %d)",
				m.ranks, chosen.nodes, seconds(cost.Total()), seconds(alt.Total()), fewer.nodes)
		}
		return fmt.Sprintf("spread %d ranks over %d nodes: predicted %s/iter against %s packed on %d",
			m.ranks, chosen.nodes, seconds(cost.Total()), seconds(alt.Total()), fewer.nodes)
	}
	if chosen.nodes > 1 && chosen.nodes == m.fewestNodes() {
		return fmt.Sprintf("spread %d ranks over %d nodes: fewer lack the slots (predicted %s/iter: compute %s, communication %s)",
			m.ranks, chosen.nodes, seconds(cost.Total()), seconds(cost.Compute), seconds(cost.Comm))
	}
	return fmt.Sprintf("placed %d ranks on %s: predicted %s/iter (compute %s, communication %s)",
		m.ranks, names, seconds(cost.Total()), seconds(cost.Compute), seconds(cost.Comm))
}

// fewestNodes is how few nodes have the slots for every rank.
func (m *model) fewestNodes() int {
	slots := append([]int(nil), m.slots...)
	sort.Sort(sort.Reverse(sort.IntSlice(slots)))
	sum := 0
	for k, s := range slots {
		if sum += s; sum >= m.ranks {
			return k + 1
		}
	}
	return len(slots)
}

// bottleneck names what makes the slowest node of at (cost c) slower than the
// chosen layout (cost than): its busiest link when its communication is what
// grew more, else its compute.
func (m *model) bottleneck(at []int, c, than Cost) string {
	b := m.index[c.Node]
	if c.Compute-than.Compute >= c.Comm-than.Comm {
		return fmt.Sprintf("%s's compute", c.Node)
	}
	load := make([]float64, len(m.nodes))
	for _, p := range m.pairs {
		x, y := at[p.I], at[p.J]
		if x == b {
			load[y] += m.linkTime(x, y, p.Msgs, p.Bytes)
		} else if y == b {
			load[x] += m.linkTime(x, y, p.Msgs, p.Bytes)
		}
	}
	busiest := 0
	for a := range load {
		if load[a] > load[busiest] {
			busiest = a
		}
	}
	if busiest == b {
		return fmt.Sprintf("shared memory on %s", c.Node)
	}
	x, y := m.nodes[b].Name, m.nodes[busiest].Name
	if y < x {
		x, y = y, x
	}
	return fmt.Sprintf("the %s–%s link (%s)", x, y, bitRate(m.links.Between(x, y).Bandwidth))
}

// usedNames lists the nodes of at by name, or counts them when there are many.
func (m *model) usedNames(at []int) string {
	used := map[int]bool{}
	for _, a := range at {
		used[a] = true
	}
	var names []string
	for a := range m.nodes {
		if used[a] {
			names = append(names, m.nodes[a].Name)
		}
	}
	if len(names) > 4 {
		return fmt.Sprintf("%d nodes (%s, …)", len(names), strings.Join(names[:3], ", "))
	}
	return strings.Join(names, ", ")
}

func ratio(x, y float64) string {
	r := x / y
	if r < 1.1 {
		return fmt.Sprintf("%.2f×", r)
	}
	return fmt.Sprintf("%.1f×", r)
}

// seconds renders a time with three significant digits in s, ms or µs.
func seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}

// bitRate renders bytes per second as a network rate: 1.25e6 is "10 Mbit/s".
func bitRate(bytesPerSecond float64) string {
	b := bytesPerSecond * 8
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.3g Gbit/s", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.3g Mbit/s", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.3g kbit/s", b/1e3)
	}
	return fmt.Sprintf("%.3g bit/s", b)
}
