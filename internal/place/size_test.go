package place

import (
	"errors"
	"slices"
	"testing"
)

func TestSize(t *testing.T) {
	even := func(n int) bool { return n%2 == 0 }
	nodes := func(cores ...int) []Node {
		var out []Node
		for i, c := range cores {
			out = append(out, Node{Name: string(rune('a' + i)), Cores: c})
		}
		return out
	}
	tests := []struct {
		name string
		in   Input
		s    Sizing
		want int
		why  string
	}{
		{"one per core, nothing learned", Input{Nodes: nodes(2, 2, 3)}, Sizing{Lo: 1, Hi: 64}, 7, "one per core on a, b, c"},
		{"the 3-core node lost, learned at 7", Input{Nodes: nodes(2, 2), Ranks: 7, Work: 1}, Sizing{Lo: 1, Hi: 64}, 4, "one per core on a, b"},
		{"a node joins a job shrunk to 4", Input{Nodes: nodes(2, 2, 3), Ranks: 4, Work: 1}, Sizing{Lo: 1, Hi: 64}, 7, "one per core on a, b, c"},
		{"capped by the job's maximum", Input{Nodes: nodes(2, 2, 3)}, Sizing{Lo: 1, Hi: 5}, 5, "5 of the 7 cores of a, b, c: the most the job allows there"},
		{"an even count below the cores", Input{Nodes: nodes(2, 2, 3)}, Sizing{Lo: 2, Hi: 64, Allows: even}, 6, "6 of the 7 cores of a, b, c: the most the job allows there"},
		{"more than the slots when the job needs it", Input{Nodes: nodes(2, 2)}, Sizing{Lo: 6, Hi: 8}, 6, "the fewest the job allows, more than the 4 slots of a, b"},
		{"one rank per node", Input{Nodes: nodes(2, 2, 3), Options: Options{MaxPerNode: 1}}, Sizing{Lo: 1, Hi: 64}, 3, "one per core on a, b, c"},
		{"two ranks per core allowed, one per core faster", Input{Nodes: nodes(2, 2), Options: Options{MaxOversubscribe: 2}}, Sizing{Lo: 1, Hi: 64}, 4, "one per core on a, b"},
		{
			// Ranks on the slow node would hold the others back.
			"a slow node left idle",
			Input{Nodes: []Node{{Name: "a", Cores: 2, Speed: 1}, {Name: "b", Cores: 2, Speed: 0.25}}, Ranks: 1, Work: 1},
			Sizing{Lo: 1, Hi: 64}, 2, "500 ms per iteration predicted against 1 s at one per core on a, b",
		},
		{
			// A slow link between the two nodes and ranks that talk a lot:
			// the 2 cores of one node beat 4 across the link, and 1 rank.
			"traffic over a slow link",
			Input{Nodes: nodes(2, 2), Ranks: 4, Work: 0.01, Measured: true, Traffic: NeighbourTrafficOf(4, 8<<20),
				Links: Links{{"a", "b"}: {Latency: 1e-3, Bandwidth: 1e6}}},
			Sizing{Lo: 1, Hi: 64}, 2, "21.6 ms per iteration predicted against 33.6 s at one per core on a, b",
		},
	}
	for _, tt := range tests {
		got, err := Size(tt.in, tt.s)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got.Ranks != tt.want || got.Why != tt.why {
			t.Errorf("%s: Size = %d, %q; want %d, %q", tt.name, got.Ranks, got.Why, tt.want, tt.why)
		}
	}
	if _, err := Size(Input{Nodes: nodes(2)}, Sizing{Lo: 3, Hi: 2}); !errors.Is(err, ErrBadRankCount) {
		t.Errorf("no count allowed: err %v, want ErrBadRankCount", err)
	}
	if _, err := Size(Input{}, Sizing{Lo: 1, Hi: 4}); !errors.Is(err, ErrNoNodes) {
		t.Errorf("no nodes: err %v, want ErrNoNodes", err)
	}
}

// NeighbourTrafficOf is NeighbourTraffic with bytes per message.
func NeighbourTrafficOf(ranks int, bytes float64) []Flow {
	fs := NeighbourTraffic(ranks)
	for i := range fs {
		fs[i].Bytes = bytes
	}
	return fs
}

func TestRescaleTraffic(t *testing.T) {
	ring := func(n int, bytes float64) []Flow { return NeighbourTrafficOf(n, bytes) }
	tests := []struct {
		name  string
		flows []Flow
		n, m  int
		want  []Flow
	}{
		{"same count", ring(3, 10), 3, 3, ring(3, 10)},
		{
			// 4 → 2: 0,1 merge and 2,3 merge; 1↔2 and 3↔0 stay boundaries.
			"halved", ring(4, 10), 4, 2,
			[]Flow{{0, 1, 10, 1}, {1, 0, 10, 1}},
		},
		{
			// 2 → 4: old 0 is new 0-1, old 1 new 2-3; 0→1 faces 1→2, 1→0 faces 2→1;
			// inside each part a new boundary of the mean flow.
			"doubled", []Flow{{0, 1, 10, 1}, {1, 0, 30, 3}}, 2, 4,
			[]Flow{{0, 1, 20, 2}, {1, 0, 20, 2}, {1, 2, 10, 1}, {2, 1, 30, 3}, {2, 3, 20, 2}, {3, 2, 20, 2}},
		},
		{
			// 7 → 4: 0,1 → 0; 2,3 → 1; 4,5 → 2; 6 → 3. Flows that land on
			// one pair take the largest; those inside a new rank vanish.
			"uneven", []Flow{{0, 1, 5, 1}, {1, 2, 7, 1}, {0, 2, 12, 1}, {2, 3, 9, 1}, {5, 6, 4, 1}}, 7, 4,
			[]Flow{{0, 1, 12, 1}, {2, 3, 4, 1}},
		},
	}
	for _, tt := range tests {
		got, err := RescaleTraffic(tt.flows, tt.n, tt.m)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s:\n got %v\nwant %v", tt.name, got, tt.want)
		}
	}
	if _, err := RescaleTraffic([]Flow{{0, 5, 1, 1}}, 4, 2); !errors.Is(err, ErrBadTraffic) {
		t.Errorf("a flow beyond the ranks: err %v, want ErrBadTraffic", err)
	}
}
