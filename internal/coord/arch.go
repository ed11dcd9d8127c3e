package coord

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"shoal/internal/api"
)

// archSet is the live nodes of one instruction set.
type archSet struct {
	arch  string
	nodes map[string]api.Node
}

// archSets groups live by instruction set, since neither Open MPI nor MPICH
// runs one world across two (docs/testbed.md, "arm64 hosts"): the sets the
// job's program is built for (allowed; nil: any), those whose nodes offer the
// most CPU time first (CPUs, else cores, times speed), then those of more
// nodes, then by name. The job runs on the first set its ranks fit. none says
// why no set is given though nodes are live.
func archSets(live map[string]api.Node, allowed []string) (sets []archSet, none string) {
	bySet := map[string][]api.Node{}
	for _, n := range live {
		bySet[n.Arch] = append(bySet[n.Arch], n)
	}
	for set, nodes := range bySet {
		if allowed != nil && !slices.Contains(allowed, set) {
			continue
		}
		s := archSet{arch: set, nodes: map[string]api.Node{}}
		for _, n := range nodes {
			s.nodes[n.Name] = n
		}
		sets = append(sets, s)
	}
	if len(sets) == 0 && len(live) > 0 {
		return nil, fmt.Sprintf("no node of an instruction set the program is built for (%s): %s",
			strings.Join(allowed, ", "), describeSets(bySet, ""))
	}
	sort.Slice(sets, func(i, j int) bool {
		ci, cj := capacity(sets[i].nodes), capacity(sets[j].nodes)
		if ci != cj {
			return ci > cj
		}
		if len(sets[i].nodes) != len(sets[j].nodes) {
			return len(sets[i].nodes) > len(sets[j].nodes)
		}
		return sets[i].arch < sets[j].arch
	})
	return sets, ""
}

// leftOut says which of live a run on chosen leaves out and why, "" when it
// leaves out none: "running on the arm64 nodes; n1, n2 (amd64) left out: one
// MPI world per instruction set".
func leftOut(live map[string]api.Node, chosen archSet, allowed []string) string {
	if len(chosen.nodes) == len(live) {
		return ""
	}
	bySet := map[string][]api.Node{}
	built := false
	for _, n := range live {
		if _, in := chosen.nodes[n.Name]; !in {
			bySet[n.Arch] = append(bySet[n.Arch], n)
			built = built || allowed == nil || slices.Contains(allowed, n.Arch)
		}
	}
	why := "one MPI world per instruction set"
	if !built {
		why = fmt.Sprintf("the program is built for %s only (shoal run --program-for ARCH=PATH adds a build)", strings.Join(allowed, ", "))
	}
	return fmt.Sprintf("running on the %s nodes; %s left out: %s", chosen.arch, describeSets(bySet, chosen.arch), why)
}

// capacity is the CPU time nodes offer together, in single-core iterations per
// second.
func capacity(nodes map[string]api.Node) float64 {
	var c float64
	for _, n := range nodes {
		cpus := n.CPUs
		if cpus == 0 {
			cpus = float64(n.Cores)
		}
		c += cpus * float64(n.Speed)
	}
	return c
}

// describeSets names the nodes of every set but skip: "n3, n4 (arm64)".
func describeSets(bySet map[string][]api.Node, skip string) string {
	var sets []string
	for set := range bySet {
		if set != skip {
			sets = append(sets, set)
		}
	}
	sort.Strings(sets)
	parts := make([]string, len(sets))
	for i, set := range sets {
		names := make([]string, len(bySet[set]))
		for j, n := range bySet[set] {
			names[j] = n.Name
		}
		sort.Strings(names)
		label := set
		if label == "" {
			label = "instruction set unknown"
		}
		parts[i] = fmt.Sprintf("%s (%s)", strings.Join(names, ", "), label)
	}
	return strings.Join(parts, "; ")
}
