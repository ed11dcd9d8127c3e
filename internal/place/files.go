package place

import (
	"fmt"
	"strings"
)

// Rankfile renders p as an Open MPI rankfile (docs/rankfile.md): one line per rank,
// "rank R=HOST slot=S", S counting the node's ranks from 0 and wrapping at its cores.
func Rankfile(p Placement, cores map[string]int) string {
	var b strings.Builder
	next := map[string]int{}
	for r, host := range p {
		slot := next[host]
		next[host]++
		if c := cores[host]; c > 0 {
			slot %= c
		}
		fmt.Fprintf(&b, "rank %d=%s slot=%d\n", r, host, slot)
	}
	return b.String()
}

// MachineFile renders p as an MPICH Hydra machine file: a "HOST:N" line for
// each run of consecutive ranks on one host, in rank order. Hydra gives the
// first line's N ranks to its host, the next line's to the next, so any
// placement is kept, cyclic ones included (a host named on two lines gets a
// daemon for each).
func MachineFile(p Placement) string {
	var b strings.Builder
	for i := 0; i < len(p); {
		j := i
		for j < len(p) && p[j] == p[i] {
			j++
		}
		fmt.Fprintf(&b, "%s:%d\n", p[i], j-i)
		i = j
	}
	return b.String()
}

// Hostfile renders the hosts of p as an Open MPI hostfile, in order of first rank:
// "HOST slots=N" with N the ranks placed there.
func Hostfile(p Placement) string {
	var b strings.Builder
	counts := p.Counts()
	seen := map[string]bool{}
	for _, host := range p {
		if !seen[host] {
			seen[host] = true
			fmt.Fprintf(&b, "%s slots=%d\n", host, counts[host])
		}
	}
	return b.String()
}
