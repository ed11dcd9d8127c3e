package place

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
)

// The search's effort. Descents start from the [Spread] layout and the best of the
// other seeds: at least descents of them, more for small jobs, up to descentBudget /
// (ranks × nodes). Then up to maxKicks kicks. All of it stops after searchBudget units
// of work (a node's time weighed once is one unit, about 11 ns on the 2-core build
// machine), half of it for the descents.
const (
	descents      = 4
	descentBudget = 4096
	maxKicks      = 100
	searchBudget  = 2 << 20
)

// improve searches from seeds (the baseline first) and returns the best placement it
// finds; every local optimum it reaches is offered to best. It descends from the best
// seeds, then kicks the best placement so far and descends again (iterated local
// search), keeping what is better, with a PRNG seeded from the input.
func (m *model) improve(seeds []candidate, best bestByNodes) candidate {
	for _, c := range seeds {
		best.add(c)
	}
	// The baseline always starts a descent, so the plan is never worse than it.
	starts := append([]candidate{seeds[0]}, seeds[1:]...)
	sort.SliceStable(starts[1:], func(i, j int) bool { return starts[1+i].less(starts[1+j]) })
	starts = starts[:min(len(starts), max(descents, descentBudget/(m.ranks*len(m.nodes))))]
	budget := searchBudget / 2
	var chosen candidate
	var s *search
	for i, c := range starts {
		s = newSearch(m, c.at)
		s.descend(budget / (len(starts) - i))
		budget -= s.work
		d := m.candidate(s.at)
		best.add(d)
		if i == 0 || d.less(chosen) {
			chosen = d
		}
	}
	budget += searchBudget / 2
	rng := rand.New(rand.NewPCG(m.hash(), 11))
	for k := 0; k < maxKicks && budget > 0; k++ {
		s.reset(chosen.at)
		s.kick(rng)
		s.descend(budget)
		budget -= s.work
		d := m.candidate(s.at)
		best.add(d)
		if d.less(chosen) {
			chosen = d
		}
	}
	return chosen
}

// hash digests the model (nodes in name order, slots, traffic, links), to seed the
// search's PRNG: the same input gives the same search, in whatever order it came.
func (m *model) hash() uint64 {
	h := fnv.New64a()
	put := func(vs ...float64) {
		var b [8]byte
		for _, v := range vs {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			h.Write(b[:])
		}
	}
	for a, n := range m.nodes {
		h.Write([]byte(n.Name))
		put(float64(m.slots[a]), m.perRank[a], m.cores[a])
	}
	for _, p := range m.pairs {
		put(float64(p.I), float64(p.J), p.Msgs, p.Bytes)
	}
	put(m.lat...)
	put(m.perB...)
	return h.Sum64()
}

// search is one placement under local search, kept so that a move or a swap is weighed
// in time proportional to the nodes: every node's rank count and times, and, for every
// rank, its traffic summed by the node its partners are on.
type search struct {
	m          *model
	n          int
	at         []int
	count      []int
	comp, comm []float64
	partM      []float64 // [r*n+a]: messages rank r exchanges with the ranks on node a
	partB      []float64 // the same in bytes
	obj        objective

	// A change being weighed: the comm change of each node it touches.
	delta   []float64
	mark    []int // mark[x] == stamp: x is in touched
	stamp   int
	touched []int
	// top holds the slowest nodes, slowest first, so that a change that touches none
	// of them is weighed without a look at every node.
	top []int
	raw float64 // Σ ranks × time over the nodes

	work int // nodes touched in weighing changes so far: what the search has cost
}

// objective orders placements: the slowest node's time first, then the ranks' mean
// time (each rank counted with its node's time), which breaks the plateaus where a
// change helps every node but the slowest.
type objective struct{ max, sum float64 }

// better reports whether o is better than cur by more than rounding.
func (o objective) better(cur objective) bool {
	tol := 1e-9 * cur.max
	if o.max < cur.max-tol {
		return true
	}
	if o.max > cur.max+tol {
		return false
	}
	return o.sum < cur.sum-1e-9*cur.sum
}

// topNodes is how many of the slowest nodes a search keeps track of.
const topNodes = 4

func newSearch(m *model, at []int) *search {
	n := len(m.nodes)
	s := &search{m: m, n: n, at: make([]int, m.ranks), count: make([]int, n),
		partM: make([]float64, m.ranks*n), partB: make([]float64, m.ranks*n),
		delta: make([]float64, n), mark: make([]int, n)}
	s.reset(at)
	return s
}

// reset starts the search again from placement at, its work at 0.
func (s *search) reset(at []int) {
	m, n := s.m, s.n
	copy(s.at, at)
	s.comp, s.comm = m.times(s.at)
	clear(s.count)
	for _, a := range s.at {
		s.count[a]++
	}
	clear(s.partM)
	clear(s.partB)
	for r, es := range m.adj {
		for _, e := range es {
			s.partM[r*n+s.at[e.j]] += e.msgs
			s.partB[r*n+s.at[e.j]] += e.bytes
		}
	}
	s.settle()
	s.work = m.ranks + len(m.pairs)
}

// kick moves the search off a local optimum: it trades the ranks of two nodes when
// each fits the other's slots, or moves from one rank up to half of them to nodes with
// a free slot (small kicks alone leave some deep basins unexplored).
func (s *search) kick(rng *rand.Rand) {
	m := s.m
	if s.n > 1 && rng.IntN(2) == 0 {
		a, c := rng.IntN(s.n), rng.IntN(s.n-1)
		if c >= a {
			c++
		}
		if s.count[a]+s.count[c] > 0 && s.count[a] <= m.slots[c] && s.count[c] <= m.slots[a] {
			var fromA, fromC []int
			for r, x := range s.at {
				if x == a {
					fromA = append(fromA, r)
				} else if x == c {
					fromC = append(fromC, r)
				}
			}
			for _, r := range fromA {
				s.apply(r, c)
			}
			for _, r := range fromC {
				s.apply(r, a)
			}
			s.settle()
			return
		}
	}
	for k := 1 + rng.IntN(max(3, m.ranks/2)); k > 0; k-- {
		i := rng.IntN(m.ranks)
		var free []int
		for c := 0; c < s.n; c++ {
			if c != s.at[i] && s.count[c] < m.slots[c] {
				free = append(free, c)
			}
		}
		if len(free) > 0 {
			s.apply(i, free[rng.IntN(len(free))])
		} else if j := rng.IntN(m.ranks); s.at[j] != s.at[i] {
			a, c := s.at[i], s.at[j]
			s.apply(i, c)
			s.apply(j, a)
		}
	}
	s.settle()
}

// time is node x's time with r ranks, compute comp and its comm changed by dcomm.
func (s *search) time(x, r int, comp, dcomm float64) float64 {
	if r == 0 {
		return 0
	}
	return comp + s.comm[x] + dcomm
}

// settle recomputes the objective and the slowest nodes after a change.
func (s *search) settle() {
	s.raw, s.obj.max = 0, 0
	s.top = s.top[:0]
	for x := 0; x < s.n; x++ {
		t := s.time(x, s.count[x], s.comp[x], 0)
		s.raw += float64(s.count[x]) * t
		s.obj.max = max(s.obj.max, t)
		// Insertion into top, slowest first, ties by node order.
		i := len(s.top)
		for i > 0 && s.time(s.top[i-1], s.count[s.top[i-1]], s.comp[s.top[i-1]], 0) < t {
			i--
		}
		if i < topNodes {
			if len(s.top) < topNodes {
				s.top = append(s.top, 0)
			}
			copy(s.top[i+1:], s.top[i:])
			s.top[i] = x
		}
	}
	s.obj.sum = s.raw / float64(s.m.ranks)
}

// begin starts weighing a change.
func (s *search) begin() {
	s.stamp++
	s.touched = s.touched[:0]
}

func (s *search) add(x int, d float64) {
	if s.mark[x] != s.stamp {
		s.mark[x] = s.stamp
		s.delta[x] = 0
		s.touched = append(s.touched, x)
	}
	s.delta[x] += d
}

// objective is the objective with the change weighed since begin and, when a ≥ 0, one
// rank moved from node a to node c.
func (s *search) objective(a, c int) objective {
	if a >= 0 {
		s.add(a, 0)
		s.add(c, 0)
	}
	var o objective
	raw := s.raw
	s.work += len(s.touched)
	for _, x := range s.touched {
		r, comp := s.count[x], s.comp[x]
		old := s.time(x, r, comp, 0)
		if x == a {
			r--
			comp = s.m.compute(x, r)
		} else if x == c {
			r++
			comp = s.m.compute(x, r)
		}
		t := s.time(x, r, comp, s.delta[x])
		o.max = max(o.max, t)
		raw += float64(r)*t - float64(s.count[x])*old
	}
	o.sum = raw / float64(s.m.ranks)
	for _, x := range s.top {
		if s.mark[x] != s.stamp {
			o.max = max(o.max, s.time(x, s.count[x], s.comp[x], 0))
			return o
		}
	}
	if len(s.top) < s.n { // every node in top was touched: look at the others
		for x := 0; x < s.n; x++ {
			if s.mark[x] != s.stamp {
				o.max = max(o.max, s.time(x, s.count[x], s.comp[x], 0))
			}
		}
	}
	return o
}

// addMove weighs the comm change of rank i going from node a to node c, its partner
// skip (a swap moves that one too) left out.
func (s *search) addMove(i, a, c, skip int) {
	m := s.m
	one := func(x int, msgs, bytes float64) {
		before := m.linkTime(a, x, msgs, bytes)
		after := m.linkTime(c, x, msgs, bytes)
		s.add(a, -before)
		if x != a {
			s.add(x, -before)
		}
		s.add(c, after)
		if x != c {
			s.add(x, after)
		}
	}
	// Through the rank's partners when it has fewer than there are nodes, else
	// through its traffic summed by node.
	if len(m.adj[i]) < s.n {
		s.work += len(m.adj[i])
		for _, e := range m.adj[i] {
			if e.j != skip {
				one(s.at[e.j], e.msgs, e.bytes)
			}
		}
		return
	}
	var skipM, skipB float64
	skipAt := -1
	if skip >= 0 {
		skipAt = s.at[skip]
		for _, e := range m.adj[i] {
			if e.j == skip {
				skipM, skipB = e.msgs, e.bytes
			}
		}
	}
	s.work += s.n
	row := i * s.n
	for x := 0; x < s.n; x++ {
		msgs, bytes := s.partM[row+x], s.partB[row+x]
		if x == skipAt {
			msgs -= skipM
			bytes -= skipB
		}
		if msgs != 0 || bytes != 0 {
			one(x, msgs, bytes)
		}
	}
}

// weighMove is the objective after rank i moves to node c.
func (s *search) weighMove(i, c int) objective {
	s.begin()
	a := s.at[i]
	s.addMove(i, a, c, -1)
	return s.objective(a, c)
}

// weighSwap is the objective after ranks i and k, on different nodes, trade places.
// Their traffic with each other stays on the same link.
func (s *search) weighSwap(i, k int) objective {
	s.begin()
	a, c := s.at[i], s.at[k]
	s.addMove(i, a, c, k)
	s.addMove(k, c, a, i)
	return s.objective(-1, -1)
}

// apply moves rank i to node c.
func (s *search) apply(i, c int) {
	s.begin()
	a := s.at[i]
	s.addMove(i, a, c, -1)
	for _, x := range s.touched {
		s.comm[x] += s.delta[x]
	}
	s.count[a]--
	s.count[c]++
	s.comp[a], s.comp[c] = s.m.compute(a, s.count[a]), s.m.compute(c, s.count[c])
	s.at[i] = c
	n := s.n
	for _, e := range s.m.adj[i] {
		s.partM[e.j*n+a] -= e.msgs
		s.partB[e.j*n+a] -= e.bytes
		s.partM[e.j*n+c] += e.msgs
		s.partB[e.j*n+c] += e.bytes
	}
}

// descend improves the placement until no single move of a rank to another node with
// a free slot, and no swap of two ranks on different nodes, makes it better: each
// rank in turn takes its best move, and when no move helps, its best swap. A swap is
// only weighed when one of the two ranks has partners on the other's node: otherwise
// it only trades one link for another. It stops early when it has spent budget.
func (s *search) descend(budget int) {
	m := s.m
	for s.work < budget {
		moved := false
		for i := 0; i < m.ranks && s.work < budget; i++ {
			bestC, best := -1, s.obj
			for c := 0; c < s.n; c++ {
				if c == s.at[i] || s.count[c] >= m.slots[c] {
					continue
				}
				if o := s.weighMove(i, c); o.better(best) {
					bestC, best = c, o
				}
			}
			if bestC >= 0 {
				s.apply(i, bestC)
				s.settle()
				moved = true
			}
		}
		if moved {
			continue
		}
		for i := 0; i < m.ranks && s.work < budget; i++ {
			bestK, best := -1, s.obj
			a := s.at[i]
			for k := i + 1; k < m.ranks; k++ {
				c := s.at[k]
				if c == a || !s.partners(i, c) && !s.partners(k, a) {
					continue
				}
				if o := s.weighSwap(i, k); o.better(best) {
					bestK, best = k, o
				}
			}
			if bestK >= 0 {
				c := s.at[bestK]
				s.apply(i, c)
				s.apply(bestK, a)
				s.settle()
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

// partners reports whether rank r exchanges traffic with a rank on node x.
func (s *search) partners(r, x int) bool {
	return s.partM[r*s.n+x] != 0 || s.partB[r*s.n+x] != 0
}
