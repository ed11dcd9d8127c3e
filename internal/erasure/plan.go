package erasure

import (
	"cmp"
	"fmt"
	"slices"
)

// Group is one group of a planned epoch: the ranks whose shards it protects
// (ascending; their nodes distinct) and the nodes that hold its parity rows
// (Parity[i] holds row i; none of them holds one of the group's ranks).
type Group struct {
	Ranks  []int
	Parity []string
}

// Plan splits the ranks of a run into groups: writers[r] is the node rank r runs on
// (and writes its shard on), nodes are the run's nodes, every writer's node among them,
// some perhaps running no rank. Each group has at most k ranks, on distinct nodes, and
// exactly m parity nodes, distinct and holding none of the group's ranks, so losing any
// m nodes costs a group at most m of its pieces. Plan fails when there are fewer than
// m+1 distinct nodes, as no group can then be formed.
//
// A group has at most min(k, nodes−m) ranks. Plan forms as few groups as possible:
// each group takes one rank from each of the nodes with the most ranks still ungrouped,
// which reaches the lower bound max(most ranks on one node, ⌈ranks / group size⌉).
// Parity rows go to the nodes holding the fewest rows so far, then the fewest ranks,
// then by name, to spread the parity's storage and write traffic. The result depends
// only on the inputs, not on the order of nodes.
func Plan(writers []string, nodes []string, k, m int) ([]Group, error) {
	if k < 1 || m < 1 || k+m > maxPieces {
		return nil, fmt.Errorf("erasure: rs %d+%d: need k ≥ 1, m ≥ 1 and k+m ≤ %d", k, m, maxPieces)
	}
	names := slices.Clone(nodes)
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) < m+1 {
		return nil, fmt.Errorf("erasure: rs %d+%d needs at least %d nodes, the run has %d", k, m, m+1, len(names))
	}
	type node struct {
		name   string
		ranks  []int // ungrouped, ascending
		total  int   // ranks it runs
		parity int   // parity rows it holds so far
	}
	all := make([]*node, len(names))
	byName := make(map[string]*node, len(names))
	for i, name := range names {
		all[i] = &node{name: name}
		byName[name] = all[i]
	}
	for r, name := range writers {
		n, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("erasure: rank %d runs on node %q, which is not among the run's nodes", r, name)
		}
		n.ranks = append(n.ranks, r)
		n.total++
	}

	width := min(k, len(names)-m)
	var groups []Group
	for {
		busiest := slices.Clone(all)
		slices.SortStableFunc(busiest, func(a, b *node) int { return cmp.Compare(len(b.ranks), len(a.ranks)) })
		for len(busiest) > 0 && len(busiest[len(busiest)-1].ranks) == 0 {
			busiest = busiest[:len(busiest)-1]
		}
		if len(busiest) == 0 {
			return groups, nil
		}
		members := busiest[:min(width, len(busiest))]
		g := Group{Ranks: make([]int, len(members))}
		for i, n := range members {
			g.Ranks[i], n.ranks = n.ranks[0], n.ranks[1:]
		}
		slices.Sort(g.Ranks)

		candidates := slices.DeleteFunc(slices.Clone(all), func(n *node) bool {
			return slices.Contains(members, n)
		})
		slices.SortStableFunc(candidates, func(a, b *node) int {
			return cmp.Or(cmp.Compare(a.parity, b.parity), cmp.Compare(a.total, b.total))
		})
		for _, n := range candidates[:m] {
			g.Parity = append(g.Parity, n.name)
			n.parity++
		}
		groups = append(groups, g)
	}
}
