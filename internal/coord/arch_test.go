package coord

import (
	"slices"
	"sort"
	"testing"

	nodepkg "shoal/internal/node"
)

func TestArchSets(t *testing.T) {
	node := func(name, arch string, cores int, speed uint64) nodepkg.Node {
		return nodepkg.Node{Name: name, Arch: arch, Cores: cores, Speed: speed}
	}
	mixed := []nodepkg.Node{node("n1", "amd64", 2, 100), node("n2", "amd64", 2, 100), node("n3", "arm64", 4, 30), node("n4", "arm64", 4, 30)}
	tests := []struct {
		name    string
		live    []nodepkg.Node
		allowed []string
		mix     bool
		want    [][]string // each set's nodes, in the order tried
		none    string
		leftOut string // by a run on the first set
	}{
		{"one set: all of them", mixed[:2], nil, false, [][]string{{"n1", "n2"}}, "", ""},
		{"the set of the most CPU time first", mixed, nil, false, [][]string{{"n1", "n2"}, {"n3", "n4"}}, "",
			"running on the amd64 nodes; n3, n4 (arm64) left out: one MPI world per instruction set (--mix-arch allows one over several)"},
		{"the most CPU time, by quota", []nodepkg.Node{{Name: "n1", Arch: "amd64", Cores: 8, CPUs: 1, Speed: 100}, node("n3", "arm64", 4, 30)}, nil, false,
			[][]string{{"n3"}, {"n1"}}, "", "running on the arm64 nodes; n1 (amd64) left out: one MPI world per instruction set (--mix-arch allows one over several)"},
		{"only the sets built for", mixed, []string{"arm64"}, false, [][]string{{"n3", "n4"}}, "",
			"running on the arm64 nodes; n1, n2 (amd64) left out: the program is built for arm64 only (shoal run --program-for ARCH=PATH adds a build)"},
		{"the set left when the other is lost", mixed[2:], []string{"amd64", "arm64"}, false, [][]string{{"n3", "n4"}}, "", ""},
		{"equal CPU time: the most nodes", []nodepkg.Node{node("n1", "arm64", 4, 50), node("n2", "amd64", 2, 50), node("n3", "amd64", 2, 50)}, nil, false,
			[][]string{{"n2", "n3"}, {"n1"}}, "", "running on the amd64 nodes; n1 (arm64) left out: one MPI world per instruction set (--mix-arch allows one over several)"},
		{"none built for", mixed[2:], []string{"amd64"}, false, nil, "no node of an instruction set the program is built for (amd64): n3, n4 (arm64)", ""},
		{"no nodes", nil, []string{"amd64"}, false, nil, "", ""},
		{"one world over both sets", mixed, []string{"amd64", "arm64"}, true, [][]string{{"n1", "n2", "n3", "n4"}}, "", ""},
		{"one world over the sets built for", append(mixed, node("n5", "riscv64", 8, 10)), []string{"amd64", "arm64"}, true,
			[][]string{{"n1", "n2", "n3", "n4"}}, "",
			"running on the nodes of every instruction set it is built for; n5 (riscv64) left out: the program is built for amd64, arm64 only (shoal run --program-for ARCH=PATH adds a build)"},
		{"a mix of one set", mixed[:2], []string{"amd64", "arm64"}, true, [][]string{{"n1", "n2"}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := map[string]nodepkg.Node{}
			for _, n := range tt.live {
				live[n.Name] = n
			}
			sets, none := archSets(live, tt.allowed, tt.mix)
			var got [][]string
			for _, s := range sets {
				var names []string
				for name, n := range s.nodes {
					if n.Arch != s.arch && s.arch != mixedArch {
						t.Errorf("%s (%s) in the set of %s", name, n.Arch, s.arch)
					}
					names = append(names, name)
				}
				sort.Strings(names)
				got = append(got, names)
			}
			if !slices.EqualFunc(got, tt.want, slices.Equal) || none != tt.none {
				t.Errorf("archSets = %v, %q\nwant %v, %q", got, none, tt.want, tt.none)
			}
			if len(sets) > 0 {
				if note := leftOut(live, sets[0], tt.allowed); note != tt.leftOut {
					t.Errorf("leftOut = %q\nwant %q", note, tt.leftOut)
				}
			}
		})
	}
}
