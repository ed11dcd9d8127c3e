package place

import (
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	nodes := []Node{{Name: "a", Cores: 2, Speed: 1}, {Name: "b", Cores: 2, Speed: 1}, {Name: "c", Cores: 3, Speed: 1},
		{Name: "fast", Cores: 2, Speed: 2}, {Name: "unknown", Cores: 2}, {Name: "quota", Cores: 2, CPUs: 0.5, Speed: 1}}
	cases := []struct {
		name string
		p    Placement
		want float64
	}{
		{"empty", nil, 0},
		{"one rank per core", Placement{"a", "a", "b", "b"}, 1},
		{"one node oversubscribed sets the pace", Placement{"a", "a", "a", "b"}, 2.0 / 3},
		{"DESIGN scenario, rank by rank 4+3 on 2+2", Placement{"a", "a", "a", "a", "b", "b", "b"}, 0.5},
		{"DESIGN scenario, block 5+2 on 2+2", Placement{"a", "a", "a", "a", "a", "b", "b"}, 0.4},
		{"a faster node", Placement{"fast", "fast"}, 2},
		{"fast but crowded", Placement{"fast", "fast", "fast", "fast"}, 1},
		{"slowest node wins", Placement{"fast", "a"}, 1},
		{"speed 0 counts as 1", Placement{"unknown", "unknown"}, 1},
		{"fewer ranks than cores", Placement{"c"}, 1},
		{"unknown node", Placement{"a", "gone"}, 0},
		{"a rank alone under a half-CPU quota", Placement{"quota"}, 0.5},
		{"two ranks share the half CPU", Placement{"quota", "quota"}, 0.25},
	}
	for _, c := range cases {
		if got := Rate(c.p, nodes); abs(got-c.want) > 1e-12 {
			t.Errorf("%s: Rate(%v) = %g, want %g", c.name, c.p, got, c.want)
		}
	}
}

// A job that lost its 3-core node runs faster as 4 ranks on the 4 cores left
// than as 7 ranks on them, and rebalancing weighs that.
func TestThroughput(t *testing.T) {
	nodes := []Node{{Name: "a", Cores: 2, Speed: 1}, {Name: "b", Cores: 2, Speed: 1}}
	tests := []struct {
		name string
		p    Placement
		want float64
	}{
		{"7 ranks on 4 cores", Placement{"a", "a", "a", "a", "b", "b", "b"}, 3.5},
		{"4 ranks on 4 cores", Placement{"a", "a", "b", "b"}, 4},
		{"2 ranks on 4 cores", Placement{"a", "b"}, 2},
		{"a rank on a node not given", Placement{"a", "gone"}, 0},
		{"no ranks", nil, 0},
	}
	for _, tt := range tests {
		if got := Throughput(tt.p, nodes); got != tt.want {
			t.Errorf("%s: Throughput(%v) = %g, want %g", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestWeigh(t *testing.T) {
	s := time.Second
	cases := []struct {
		name            string
		remaining, cost time.Duration
		cur, next       float64
		ratio           float64
		gain            time.Duration
		worth           bool
	}{
		{"twice as fast halves the rest", 60 * s, 5 * s, 0.5, 1, 1, 30 * s, true},
		{"gain below the cost", 6 * s, 5 * s, 0.5, 1, 1, 3 * s, false},
		{"gain above the cost but below the ratio", 60 * s, 11 * s, 0.5, 1, 3, 30 * s, false},
		{"gain above ratio x cost", 60 * s, 9 * s, 0.5, 1, 3, 30 * s, true},
		{"no faster: no gain", 60 * s, 0, 1, 1, 1, 0, false},
		{"slower: no gain", 60 * s, 0, 1, 0.5, 1, 0, false},
		{"ratio below 1 counts as 1", 10 * s, 5 * s, 0.5, 1, 0.1, 5 * s, false},
		{"no current rate", 60 * s, 0, 0, 1, 1, 0, false},
		{"negative remaining", -s, 0, 0.5, 1, 1, 0, false},
		{"4+3 against 5+2", 100 * s, 0, 0.4, 0.5, 1, 20 * s, true},
	}
	for _, c := range cases {
		e := Weigh(c.remaining, c.cost, c.cur, c.next)
		if e.Gain != c.gain || e.Worth(c.ratio) != c.worth {
			t.Errorf("%s: gain %v worth %v, want %v %v", c.name, e.Gain, e.Worth(c.ratio), c.gain, c.worth)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
