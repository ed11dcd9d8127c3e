package coord

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"shoal/internal/node"
)

// mixedArch names the set of a world over several instruction sets
// (job.Spec.MixArch).
const mixedArch = "mixed"

// archSet is the live nodes of one instruction set, or of several (mixedArch).
type archSet struct {
	arch  string
	nodes map[string]node.Node
}

// archSets groups live by instruction set, since neither Open MPI nor MPICH
// runs one world across two (docs/testbed.md, "arm64 hosts"): the sets the
// job's program is built for (allowed; nil: any), those whose nodes offer the
// most CPU time first (CPUs, else cores, times speed), then those of more
// nodes, then by name. The job runs on the first set its ranks fit. none says
// why no set is given though nodes are live.
func archSets(live map[string]node.Node, allowed []string, mix bool) (sets []archSet, none string) {
	bySet := map[string][]node.Node{}
	for _, n := range live {
		bySet[n.Arch] = append(bySet[n.Arch], n)
	}
	for set, nodes := range bySet {
		if allowed != nil && !slices.Contains(allowed, set) {
			continue
		}
		s := archSet{arch: set, nodes: map[string]node.Node{}}
		for _, n := range nodes {
			s.nodes[n.Name] = n
		}
		sets = append(sets, s)
	}
	if len(sets) == 0 && len(live) > 0 {
		return nil, fmt.Sprintf("no node of an instruction set the program is built for (%s): %s",
			strings.Join(allowed, ", "), describeSets(bySet, ""))
	}
	if mix && len(sets) > 1 {
		all := archSet{arch: mixedArch, nodes: map[string]node.Node{}}
		for _, s := range sets {
			maps.Copy(all.nodes, s.nodes)
		}
		return []archSet{all}, ""
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
func leftOut(live map[string]node.Node, chosen archSet, allowed []string) string {
	if len(chosen.nodes) == len(live) {
		return ""
	}
	bySet := map[string][]node.Node{}
	built := false
	for _, n := range live {
		if _, in := chosen.nodes[n.Name]; !in {
			bySet[n.Arch] = append(bySet[n.Arch], n)
			built = built || allowed == nil || slices.Contains(allowed, n.Arch)
		}
	}
	why := "one MPI world per instruction set (--mix-arch allows one over several)"
	if !built {
		why = fmt.Sprintf("the program is built for %s only (shoal run --program-for ARCH=PATH adds a build)", strings.Join(allowed, ", "))
	}
	on := "the " + chosen.arch + " nodes"
	if chosen.arch == mixedArch {
		on = "the nodes of every instruction set it is built for"
	}
	return fmt.Sprintf("running on %s; %s left out: %s", on, describeSets(bySet, chosen.arch), why)
}

// capacity is the CPU time nodes offer together, in single-core iterations per
// second.
func capacity(nodes map[string]node.Node) float64 {
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
func describeSets(bySet map[string][]node.Node, skip string) string {
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
