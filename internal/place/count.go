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

// Count is the rank count of an elastic job's run over nodes, from lo to hi,
// as allows permits: one rank per core ([PerCore]) when the job allows that
// count; else the largest count below it that it allows, so that no core runs
// two ranks; else, when it allows none that low, the smallest it allows. why
// says which, for the lines that announce a resize: "one per core on n1, n2",
// "6 of the 7 cores of n1, n2, n3 (a multiple of 2)". Count is 0 when the job
// allows no count in lo..hi.
func Count(nodes []Node, opt Options, lo, hi int, allows func(int) bool) (n int, why string) {
	cores := PerCore(nodes, opt)
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Name
	}
	sort.Strings(names)
	on := strings.Join(names, ", ")
	for n := min(cores, hi); n >= lo; n-- {
		if allows(n) {
			if n == cores {
				return n, "one per core on " + on
			}
			return n, fmt.Sprintf("%d of the %d cores of %s", n, cores, on)
		}
	}
	for n := max(cores+1, lo); n <= hi; n++ {
		if allows(n) {
			return n, fmt.Sprintf("the fewest the job allows, over the %d cores of %s", cores, on)
		}
	}
	return 0, ""
}
