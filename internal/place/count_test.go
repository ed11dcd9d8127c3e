package place

import "testing"

func TestCount(t *testing.T) {
	any := func(int) bool { return true }
	even := func(n int) bool { return n%2 == 0 }
	nodes := func(cores ...int) []Node {
		var out []Node
		for i, c := range cores {
			out = append(out, Node{Name: string(rune('a' + i)), Cores: c})
		}
		return out
	}
	tests := []struct {
		name   string
		nodes  []Node
		opt    Options
		lo, hi int
		allows func(int) bool
		want   int
		why    string
	}{
		{"one per core", nodes(2, 2, 3), Options{}, 1, 64, any, 7, "one per core on a, b, c"},
		{"after the 3-core node is lost", nodes(2, 2), Options{}, 1, 64, any, 4, "one per core on a, b"},
		{"capped by the job's maximum", nodes(2, 2, 3), Options{}, 1, 5, any, 5, "5 of the 7 cores of a, b, c"},
		{"an even count below the cores", nodes(2, 2, 3), Options{}, 2, 64, even, 6, "6 of the 7 cores of a, b, c"},
		{"more than the cores when the job needs it", nodes(2, 2), Options{}, 6, 8, any, 6, "the fewest the job allows, over the 4 cores of a, b"},
		{"one rank per node", nodes(2, 2, 3), Options{MaxPerNode: 1}, 1, 64, any, 3, "one per core on a, b, c"},
		{"a quota of half a core", []Node{{Name: "a", Cores: 4, CPUs: 0.5}, {Name: "b", Cores: 2}}, Options{}, 1, 64, any, 3, "one per core on a, b"},
		{"none allowed", nodes(2), Options{}, 3, 2, any, 0, ""},
	}
	for _, tt := range tests {
		n, why := Count(tt.nodes, tt.opt, tt.lo, tt.hi, tt.allows)
		if n != tt.want || why != tt.why {
			t.Errorf("%s: Count = %d, %q; want %d, %q", tt.name, n, why, tt.want, tt.why)
		}
	}
}
