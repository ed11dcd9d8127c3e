package place

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Mixed names the set of a world over several instruction sets
// (job.Spec.MixArch).
const Mixed = "mixed"

// ArchSet is the live nodes of one instruction set, or of several (Mixed), by
// name.
type ArchSet struct {
	Arch  string
	Nodes map[string]Node
}

// ArchSets groups live by instruction set, since neither Open MPI nor MPICH
// runs one world across two (docs/testbed.md, "arm64 hosts"): the sets the
// job's program is built for (allowed; nil: any), those whose nodes offer the
// most CPU time first (CPUs, else cores, times speed), then those of more
// nodes, then by name. The job runs on the first set its ranks fit. none says
// why no set is given though nodes are live.
func ArchSets(live map[string]Node, allowed []string, mix bool) (sets []ArchSet, none string) {
	bySet := map[string][]Node{}
	for _, n := range live {
		bySet[n.Arch] = append(bySet[n.Arch], n)
	}
	for set, nodes := range bySet {
		if allowed != nil && !slices.Contains(allowed, set) {
			continue
		}
		s := ArchSet{Arch: set, Nodes: map[string]Node{}}
		for _, n := range nodes {
			s.Nodes[n.Name] = n
		}
		sets = append(sets, s)
	}
	if len(sets) == 0 && len(live) > 0 {
		return nil, fmt.Sprintf("no node of an instruction set the program is built for (%s): %s",
			strings.Join(allowed, ", "), describeSets(bySet, ""))
	}
	if mix && len(sets) > 1 {
		all := ArchSet{Arch: Mixed, Nodes: map[string]Node{}}
		for _, s := range sets {
			maps.Copy(all.Nodes, s.Nodes)
		}
		return []ArchSet{all}, ""
	}
	sort.Slice(sets, func(i, j int) bool {
		ci, cj := setCapacity(sets[i].Nodes), setCapacity(sets[j].Nodes)
		if ci != cj {
			return ci > cj
		}
		if len(sets[i].Nodes) != len(sets[j].Nodes) {
			return len(sets[i].Nodes) > len(sets[j].Nodes)
		}
		return sets[i].Arch < sets[j].Arch
	})
	return sets, ""
}

// LeftOut says which of live a run on chosen leaves out and why, "" when it
// leaves out none: "running on the arm64 nodes; n1, n2 (amd64) left out: one
// MPI world per instruction set".
func LeftOut(live map[string]Node, chosen ArchSet, allowed []string) string {
	if len(chosen.Nodes) == len(live) {
		return ""
	}
	bySet := map[string][]Node{}
	built := false
	for _, n := range live {
		if _, in := chosen.Nodes[n.Name]; !in {
			bySet[n.Arch] = append(bySet[n.Arch], n)
			built = built || allowed == nil || slices.Contains(allowed, n.Arch)
		}
	}
	why := "one MPI world per instruction set (--mix-arch allows one over several)"
	if !built {
		why = fmt.Sprintf("the program is built for %s only (shoal run --program-for ARCH=PATH adds a build)", strings.Join(allowed, ", "))
	}
	on := "the " + chosen.Arch + " nodes"
	if chosen.Arch == Mixed {
		on = "the nodes of every instruction set it is built for"
	}
	return fmt.Sprintf("running on %s; %s left out: %s", on, describeSets(bySet, chosen.Arch), why)
}

// setCapacity is the CPU time nodes offer together, in single-core iterations per
// second.
func setCapacity(nodes map[string]Node) float64 {
	var c float64
	for _, n := range nodes {
		cpus := n.CPUs
		if cpus == 0 {
			cpus = float64(n.Cores)
		}
		c += cpus * n.Speed
	}
	return c
}

// describeSets names the nodes of every set but skip: "n3, n4 (arm64)".
func describeSets(bySet map[string][]Node, skip string) string {
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
