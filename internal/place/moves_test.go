package place

import "testing"

func TestDescribeMoves(t *testing.T) {
	live := map[string]Node{"a": {Name: "a"}, "b": {Name: "b"}}
	cases := []struct {
		prev, next Placement
		want       string
	}{
		{nil, Placement{"a", "b"}, ""},
		{Placement{"a", "b", "c", "c", "c"}, Placement{"a", "a", "a", "a", "b"}, "2 of c's ranks → a, 1 → b; 1 other rank moved"},
		{Placement{"a", "c", "d"}, Placement{"a", "b", "b"}, "1 of c's ranks → b; 1 of d's ranks → b"},
		{Placement{"a", "b", "c"}, Placement{"a", "a", "b"}, "1 of c's ranks → b; 1 other rank moved"},
		{Placement{"a", "b", "c", "c"}, Placement{"b", "a", "a", "b"}, "1 of c's ranks → a, 1 → b; 2 other ranks moved"},
		{Placement{"a", "b"}, Placement{"b", "a"}, ""}, // nothing lost: nothing said
	}
	for _, c := range cases {
		if got := DescribeMoves(c.prev, c.next, live); got != c.want {
			t.Errorf("DescribeMoves(%v, %v) = %q, want %q", c.prev, c.next, got, c.want)
		}
	}
}

func TestTightest(t *testing.T) {
	nodes := []Node{{Name: "a", Cores: 2}, {Name: "b", Cores: 4}, {Name: "c", Cores: 0}}
	for _, c := range []struct {
		p    Placement
		want float64
	}{
		{nil, 0},
		{Placement{"a", "b"}, 0.5},
		{Placement{"a", "a", "a", "b", "b"}, 1.5},
		{Placement{"b", "b", "b", "b", "b", "b"}, 1.5},
		{Placement{"c", "b"}, 0.25}, // a node of no cores is skipped, not divided by
	} {
		if got := Tightest(c.p, nodes); got != c.want {
			t.Errorf("Tightest(%v) = %g, want %g", c.p, got, c.want)
		}
	}
}
