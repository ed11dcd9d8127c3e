package place

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func nodes(spec ...any) []Node {
	var ns []Node
	for i := 0; i < len(spec); i += 2 {
		ns = append(ns, Node{Name: spec[i].(string), Cores: spec[i+1].(int)})
	}
	return ns
}

func TestSpread(t *testing.T) {
	tests := []struct {
		name   string
		nodes  []Node
		nranks int
		opt    Options
		want   string
		err    error
	}{
		{"one node", nodes("a", 4), 4, Options{}, "a:0-3", nil},
		{"2+2+3 cores", nodes("a", 2, "b", 2, "c", 3), 7, Options{}, "a:0-1 b:2-3 c:4-6", nil},
		{"proportional", nodes("a", 2, "b", 6), 4, Options{}, "a:0 b:1-3", nil},
		{"name order", nodes("b", 2, "a", 2), 4, Options{}, "a:0-1 b:2-3", nil},
		{"remainder to the larger fraction", nodes("a", 1, "b", 2), 2, Options{}, "a:0 b:1", nil},
		{"capped node overflows to others", nodes("a", 1, "b", 8), 9, Options{}, "a:0 b:1-8", nil},
		{"oversubscribe evenly", nodes("a", 2, "b", 2), 7, Options{MaxOversubscribe: 2}, "a:0-3 b:4-6", nil},
		{"speed counts", []Node{{Name: "a", Cores: 2, Speed: 3}, {Name: "b", Cores: 2, Speed: 1}}, 4, Options{}, "a:0-1 b:2-3", nil},
		{"speed counts under oversubscription", []Node{{Name: "a", Cores: 2, Speed: 3}, {Name: "b", Cores: 2, Speed: 1}}, 8, Options{MaxOversubscribe: 4}, "a:0-5 b:6-7", nil},
		{"too few cores", nodes("a", 2, "b", 2), 5, Options{}, "", ErrTooFewSlots},
		{"one rank per node", nodes("a", 4, "b", 4, "c", 4), 3, Options{MaxPerNode: 1}, "a:0 b:1 c:2", nil},
		{"one rank per node, too few nodes", nodes("a", 4, "b", 4), 3, Options{MaxPerNode: 1}, "", ErrTooFewSlots},
		{"per-node bound below the cores", nodes("a", 8, "b", 2), 6, Options{MaxPerNode: 4}, "a:0-3 b:4-5", nil},
		{"one rank per two cores", nodes("a", 4, "b", 2, "c", 1), 3, Options{MaxOversubscribe: 0.5}, "a:0-1 b:2", nil},
		{"a node's own bound", []Node{{Name: "a", Cores: 2}, {Name: "b", Cores: 24, MaxRanks: 15}}, 20, Options{MaxOversubscribe: 4}, "a:0-4 b:5-19", nil},
		{"a node's own bound, too few slots", []Node{{Name: "a", Cores: 2}, {Name: "b", Cores: 24, MaxRanks: 15}}, 18, Options{}, "", ErrTooFewSlots},
		{"no nodes", nil, 1, Options{}, "", ErrNoNodes},
		{"no ranks", nodes("a", 1), 0, Options{}, "", ErrBadRankCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Spread(tt.nodes, tt.nranks, tt.opt)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("Spread err = %v, want %v", err, tt.err)
			}
			if err == nil && p.String() != tt.want {
				t.Errorf("Spread = %s, want %s", p, tt.want)
			}
		})
	}
}

// TestSpreadProperties checks every small input, under every bound: all ranks
// placed when they fit the slots (cores × oversubscription, at most MaxPerNode a
// node) and an error naming the slots when they do not; slots respected,
// contiguous blocks, shares within one rank of the proportional ideal (when no
// node is capped), and the same answer twice.
func TestSpreadProperties(t *testing.T) {
	for _, opt := range []Options{
		{MaxOversubscribe: 2}, {MaxOversubscribe: 1}, {MaxOversubscribe: 0.5},
		{MaxPerNode: 1}, {MaxPerNode: 3}, {MaxOversubscribe: 2, MaxPerNode: 3},
	} {
		for a := 1; a <= 4; a++ {
			for b := 1; b <= 4; b++ {
				for c := 1; c <= 4; c++ {
					checkSpread(t, nodes("a", a, "b", b, "c", c), opt)
				}
			}
		}
	}
}

func checkSpread(t *testing.T, ns []Node, opt Options) {
	t.Helper()
	slots, cores := 0, 0
	for _, nd := range ns {
		slots += opt.slots(nd)
		cores += nd.Cores
	}
	for n := 1; n <= slots+1; n++ {
		p, err := Spread(ns, n, opt)
		if n > slots {
			if !errors.Is(err, ErrTooFewSlots) || !strings.Contains(err.Error(), fmt.Sprintf("%d slots", slots)) {
				t.Fatalf("%v %+v n=%d: err %v, want ErrTooFewSlots naming %d slots", ns, opt, n, err, slots)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v %+v n=%d: %v", ns, opt, n, err)
		}
		if len(p) != n {
			t.Fatalf("%v %+v n=%d: %d ranks placed", ns, opt, n, len(p))
		}
		again, _ := Spread(ns, n, opt)
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("%v %+v n=%d: not deterministic", ns, opt, n)
		}
		counts := p.Counts()
		seen := map[string]bool{}
		for r, host := range p {
			if r > 0 && host != p[r-1] && seen[host] {
				t.Fatalf("%v %+v n=%d: %s not contiguous: %s", ns, opt, n, host, p)
			}
			seen[host] = true
		}
		capped := false
		for _, nd := range ns {
			if counts[nd.Name] > opt.slots(nd) {
				t.Fatalf("%v %+v n=%d: %s has %d ranks for %d slots", ns, opt, n, nd.Name, counts[nd.Name], opt.slots(nd))
			}
			capped = capped || counts[nd.Name] == opt.slots(nd)
		}
		if capped {
			continue
		}
		for _, nd := range ns {
			ideal := float64(n) * float64(nd.Cores) / float64(cores)
			if math.Abs(float64(counts[nd.Name])-ideal) >= 1 {
				t.Fatalf("%v %+v n=%d: %s has %d ranks, ideal %.2f", ns, opt, n, nd.Name, counts[nd.Name], ideal)
			}
		}
	}
}

func TestBlockMovesLostRanksTogether(t *testing.T) {
	prev := Placement{"a", "a", "b", "b", "c", "c", "c"}
	got, err := Block(prev, nodes("a", 2, "b", 2))
	if err != nil {
		t.Fatal(err)
	}
	want := Placement{"a", "a", "b", "b", "a", "a", "a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Block = %s, want %s", got, want)
	}
	spread, _ := Spread(nodes("a", 2, "b", 2), 7, Options{MaxOversubscribe: 2})
	if fmt.Sprint(spread.Counts()) != "map[a:4 b:3]" {
		t.Errorf("rank-by-rank layout after the loss = %v, want 4 and 3", spread.Counts())
	}
}

func TestRankfileAndHostfile(t *testing.T) {
	p := Placement{"n1", "n1", "n1", "n2"}
	got := Rankfile(p, map[string]int{"n1": 2, "n2": 2})
	want := "rank 0=n1 slot=0\nrank 1=n1 slot=1\nrank 2=n1 slot=0\nrank 3=n2 slot=0\n"
	if got != want {
		t.Errorf("Rankfile = %q, want %q", got, want)
	}
	if got, want := Hostfile(p), "n1 slots=3\nn2 slots=1\n"; got != want {
		t.Errorf("Hostfile = %q, want %q", got, want)
	}
}

func TestMachineFile(t *testing.T) {
	for _, c := range []struct {
		p    Placement
		want string
	}{
		{nil, ""},
		{Placement{"n1", "n1", "n1", "n2"}, "n1:3\nn2:1\n"},
		{Placement{"a", "b", "a", "b"}, "a:1\nb:1\na:1\nb:1\n"}, // cyclic: a line per run
		{Placement{"n2", "n2", "n1", "n1", "n4", "n4"}, "n2:2\nn1:2\nn4:2\n"},
	} {
		if got := MachineFile(c.p); got != c.want {
			t.Errorf("MachineFile(%v) = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestCyclic(t *testing.T) {
	nodes := []Node{{Name: "b", Cores: 1}, {Name: "a", Cores: 3}, {Name: "c", Cores: 2}}
	p, err := Cyclic(nodes, 6, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p, " "), "a b c a c a"; got != want {
		t.Errorf("Cyclic = %s, want %s", got, want)
	}
	if _, err := Cyclic(nodes, 7, Options{}); !errors.Is(err, ErrTooFewSlots) {
		t.Errorf("Cyclic of 7 ranks on 6 slots: err = %v, want ErrTooFewSlots", err)
	}
}

func TestPacked(t *testing.T) {
	nodes := []Node{{Name: "b", Cores: 1}, {Name: "a", Cores: 3}, {Name: "c", Cores: 2}}
	p, err := Packed(nodes, 5, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p, " "), "a a a b c"; got != want {
		t.Errorf("Packed = %s, want %s", got, want)
	}
	if p, _ := Packed(nodes, 4, Options{MaxOversubscribe: 2}); strings.Join(p, " ") != "a a a a" {
		t.Errorf("Packed at 2 per core = %v, want a a a a", p)
	}
}
