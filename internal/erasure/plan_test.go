package erasure

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestPlanExamples(t *testing.T) {
	nodes6 := []string{"a", "b", "c", "d", "e", "f"}
	cases := []struct {
		name    string
		writers []string
		nodes   []string
		k, m    int
		want    []Group
	}{
		{"6 nodes, a rank each, rs 3+2", nodes6, nodes6, 3, 2, []Group{
			{Ranks: []int{0, 1, 2}, Parity: []string{"d", "e"}},
			{Ranks: []int{3, 4, 5}, Parity: []string{"a", "b"}},
		}},
		{"6 nodes, two ranks each, rs 3+2", append(slices.Clone(nodes6), nodes6...), nodes6, 3, 2, []Group{
			{Ranks: []int{0, 1, 2}, Parity: []string{"d", "e"}},
			{Ranks: []int{3, 4, 5}, Parity: []string{"a", "b"}},
			{Ranks: []int{6, 7, 8}, Parity: []string{"f", "d"}},
			{Ranks: []int{9, 10, 11}, Parity: []string{"c", "a"}},
		}},
		{"nodes without ranks hold parity first", []string{"c", "b", "a"}, []string{"spare2", "a", "b", "c", "spare1"}, 3, 2, []Group{
			{Ranks: []int{0, 1, 2}, Parity: []string{"spare1", "spare2"}},
		}},
		{"groups narrowed to nodes-m", []string{"a", "b", "c", "a", "b", "c"}, []string{"a", "b", "c"}, 4, 1, []Group{
			{Ranks: []int{0, 1}, Parity: []string{"c"}},
			{Ranks: []int{2, 3}, Parity: []string{"b"}},
			{Ranks: []int{4, 5}, Parity: []string{"a"}},
		}},
		{"the busiest node first", []string{"a", "a", "a", "b", "c"}, []string{"a", "b", "c", "d"}, 2, 1, []Group{
			{Ranks: []int{0, 3}, Parity: []string{"d"}},
			{Ranks: []int{1, 4}, Parity: []string{"b"}},
			{Ranks: []int{2}, Parity: []string{"c"}},
		}},
		{"no ranks", nil, []string{"a", "b"}, 3, 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Plan(c.writers, c.nodes, c.k, c.m)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Plan: got %v, %v, want %v", got, err, c.want)
			}
		})
	}
}

func TestPlanRejects(t *testing.T) {
	cases := []struct {
		name    string
		writers []string
		nodes   []string
		k, m    int
	}{
		{"too few nodes", []string{"a", "b"}, []string{"a", "b"}, 2, 2},
		{"duplicates are one node", []string{"a", "a"}, []string{"a", "a"}, 1, 1},
		{"writer not a node", []string{"a", "x"}, []string{"a", "b", "c"}, 2, 1},
		{"k 0", []string{"a"}, []string{"a", "b"}, 0, 1},
		{"m 0", []string{"a"}, []string{"a", "b"}, 1, 0},
		{"k+m 257", []string{"a"}, []string{"a", "b"}, 255, 2},
	}
	for _, c := range cases {
		if got, err := Plan(c.writers, c.nodes, c.k, c.m); err == nil {
			t.Errorf("%s: Plan got %v, want an error", c.name, got)
		}
	}
}

// TestPlanProperties plans thousands of placements and checks what a plan promises.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	cases := 0
	for nnodes := 1; nnodes <= 7; nnodes++ {
		for nranks := 1; nranks <= 12; nranks++ {
			for pattern := range 8 {
				nodes := make([]string, nnodes)
				for i := range nodes {
					nodes[i] = fmt.Sprintf("n%c", 'a'+rng.IntN(26)) + fmt.Sprint(i)
				}
				// Ranks on the first `used` nodes, skewed towards one in odd patterns.
				used := 1 + rng.IntN(nnodes)
				writers := make([]string, nranks)
				for r := range writers {
					if pattern%2 == 1 && rng.IntN(2) == 0 {
						writers[r] = nodes[0]
					} else {
						writers[r] = nodes[rng.IntN(used)]
					}
				}
				for k := 1; k <= 4; k++ {
					for m := 1; m <= 3; m++ {
						checkPlan(t, rng, writers, nodes, k, m)
						cases++
					}
				}
			}
		}
	}
	t.Logf("%d plans checked", cases)
}

func checkPlan(t *testing.T, rng *rand.Rand, writers, nodes []string, k, m int) {
	t.Helper()
	groups, err := Plan(writers, nodes, k, m)
	if (err != nil) != (len(nodes) < m+1) {
		t.Fatalf("Plan(%v, %v, %d, %d): error %v with %d nodes", writers, nodes, k, m, err, len(nodes))
	}
	if err != nil {
		return
	}
	shuffled := append(slices.Clone(nodes), nodes[rng.IntN(len(nodes))])
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if again, _ := Plan(writers, shuffled, k, m); !reflect.DeepEqual(again, groups) {
		t.Fatalf("Plan(%v, %v, %d, %d) = %v, but %v with nodes in another order", writers, nodes, k, m, groups, again)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("Plan(%v, %v, %d, %d) = %v: %s", writers, nodes, k, m, groups, fmt.Sprintf(format, args...))
	}

	width := min(k, len(nodes)-m)
	seen := make([]int, len(writers))
	for gi, g := range groups {
		if len(g.Ranks) < 1 || len(g.Ranks) > width {
			fail("group %d has %d ranks, want 1 to %d", gi, len(g.Ranks), width)
		}
		if !slices.IsSorted(g.Ranks) {
			fail("group %d ranks not ascending", gi)
		}
		holders := map[string]bool{}
		for _, r := range g.Ranks {
			seen[r]++
			if holders[writers[r]] {
				fail("group %d has two ranks on %s", gi, writers[r])
			}
			holders[writers[r]] = true
		}
		if len(g.Parity) != m {
			fail("group %d has %d parity nodes, want %d", gi, len(g.Parity), m)
		}
		for _, p := range g.Parity {
			if holders[p] || !slices.Contains(nodes, p) {
				fail("group %d: parity node %s holds a piece already or is not a node", gi, p)
			}
			holders[p] = true
		}
		// Whichever m nodes are lost, the group keeps as many pieces as it has ranks.
		for _, lost := range subsets(nodes, m) {
			kept := len(g.Ranks) + m
			for _, n := range lost {
				if holders[n] {
					kept--
				}
			}
			if kept < len(g.Ranks) {
				fail("group %d keeps %d pieces when %v are lost", gi, kept, lost)
			}
		}
	}
	for r, n := range seen {
		if n != 1 {
			fail("rank %d is in %d groups", r, n)
		}
	}
	// As few groups as any plan could have.
	perNode := map[string]int{}
	most := 0
	for _, w := range writers {
		perNode[w]++
		most = max(most, perNode[w])
	}
	if want := max(most, (len(writers)+width-1)/width); len(groups) != want {
		fail("%d groups, %d would do", len(groups), want)
	}
}

// subsets returns every n-element subset of s.
func subsets(s []string, n int) [][]string {
	if n == 0 {
		return [][]string{nil}
	}
	var out [][]string
	for i := range s {
		for _, rest := range subsets(s[i+1:], n-1) {
			out = append(out, append([]string{s[i]}, rest...))
		}
	}
	return out
}
