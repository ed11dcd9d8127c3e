package place

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"shoal/internal/job"
)

// DescribeMoves says where the ranks of a lost node (one not in live) went,
// and how many ranks of the surviving nodes moved too (placing every rank anew
// may move some to balance the load): "2 of c's ranks → a, 1 → b; 1 other rank
// moved". Nothing when no node was lost.
func DescribeMoves[N any](prev, next Placement, live map[string]N) string {
	if prev == nil {
		return ""
	}
	var parts []string
	lost := map[string]map[string]int{}
	var order []string
	others := 0
	for r, from := range prev {
		if r >= len(next) {
			continue
		}
		if _, ok := live[from]; ok {
			if next[r] != from {
				others++
			}
			continue
		}
		if lost[from] == nil {
			lost[from] = map[string]int{}
			order = append(order, from)
		}
		lost[from][next[r]]++
	}
	for _, from := range order {
		moves := sortedMoves(lost[from])
		first := strings.Replace(moves[0], " → ", " of "+from+"'s ranks → ", 1)
		parts = append(parts, strings.Join(append([]string{first}, moves[1:]...), ", "))
	}
	if len(parts) > 0 && others > 0 {
		parts = append(parts, job.Plural(others, "other rank")+" moved")
	}
	return strings.Join(parts, "; ")
}

func sortedMoves(m map[string]int) []string {
	var out []string
	for dst, n := range m {
		out = append(out, fmt.Sprintf("%d → %s", n, dst))
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.SplitN(out[i], " → ", 2)[1] < strings.SplitN(out[j], " → ", 2)[1]
	})
	return out
}

// Tightest is the most ranks per core p puts on any node.
func Tightest(p Placement, nodes []Node) float64 {
	cores := map[string]int{}
	for _, n := range nodes {
		cores[n.Name] = n.Cores
	}
	most := 0.0
	for name, k := range p.Counts() {
		if c := cores[name]; c > 0 {
			most = max(most, float64(k)/float64(c))
		}
	}
	return most
}

// ModelDoubt bounds the seconds of communication the model may predict of an
// iteration (one second of the job's traffic, as its ranks reported it) on the
// layout the ranks reported it from: they carried it within a second, and the
// model, which adds up a node's bytes both ways and its messages as if none
// overlapped, may count up to about twice that, some more for latency. A
// prediction beyond says the links are measured slower than the job finds
// them (a probe taken while the machine was too busy to answer it), and the
// gain it predicts of a move is not believed.
const ModelDoubt = 3.0

// LinksDoubted predicts an iteration of in's traffic with the ranks placed as
// p, and says whether the links that prediction rests on are too far off what
// the job found to move it by: p is the layout the traffic was reported from
// (reportedOn) and its communication is predicted beyond ModelDoubt seconds.
func LinksDoubted(in Input, p, reportedOn Placement) (Cost, bool, error) {
	cur, err := Predict(in, p)
	if err != nil {
		return cur, false, err
	}
	return cur, slices.Equal(p, reportedOn) && cur.Comm > ModelDoubt, nil
}
