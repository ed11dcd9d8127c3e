package place

import (
	"errors"
	"reflect"
	"testing"
)

func TestPredict(t *testing.T) {
	ab := Links{{"a", "b"}: {Latency: 1e-3, Bandwidth: 1e6}}
	two := []Node{{Name: "a", Cores: 2, Speed: 1}, {Name: "b", Cores: 2, Speed: 2}}
	shm := func(msgs, bytes float64) float64 {
		return msgs*SharedMemory.Latency + bytes/SharedMemory.Bandwidth
	}
	traffic := []Flow{{0, 2, 1000, 1}, {2, 0, 1000, 1}, {0, 1, 1e6, 10}}
	tests := []struct {
		name string
		in   Input
		p    Placement
		want Cost
	}{
		{"one rank per core, the slower node is the slowest", Input{Nodes: two, Ranks: 3, Work: 1, Traffic: traffic, Links: ab},
			Placement{"a", "a", "b"}, Cost{"a", 1, 0.004 + shm(10, 1e6)}},
		{"ranks beyond the cores share them", Input{Nodes: two, Ranks: 3, Work: 1, Traffic: traffic, Links: ab},
			Placement{"a", "a", "a"}, Cost{"a", 1.5, shm(12, 1.002e6)}},
		{"a link carries both directions and counts on both ends", Input{Nodes: two, Ranks: 3, Work: 0.001, Traffic: traffic, Links: ab},
			Placement{"a", "b", "b"}, Cost{"a", 0.001, 0.004 + 0.01 + 1}},
		{"no link given: the default", Input{Nodes: two, Ranks: 2, Work: 1, Traffic: []Flow{{0, 1, 1e6, 4}}},
			Placement{"a", "b"}, Cost{"a", 1, 4*DefaultLink.Latency + 1e6/DefaultLink.Bandwidth}},
		{"unknown work: 1 s on the fastest node", Input{Nodes: two, Ranks: 2, Traffic: []Flow{{0, 1, 0, 0}}},
			Placement{"a", "b"}, Cost{"a", 2, 0}},
		{"no traffic given: neighbours exchange one message each way", Input{Nodes: two, Ranks: 2, Work: 1},
			Placement{"a", "b"}, Cost{"a", 1, 2*DefaultLink.Latency + 2*NeighbourBytes/DefaultLink.Bandwidth}},
		{"flows of one pair add up, flows to oneself do not count", Input{Nodes: two, Ranks: 2, Work: 1, Links: ab,
			Traffic: []Flow{{0, 1, 1e5, 1}, {0, 1, 1e5, 1}, {1, 1, 1e9, 1e9}}},
			Placement{"a", "b"}, Cost{"a", 1, 0.002 + 0.2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Predict(tt.in, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if got.Node != tt.want.Node || !near(got.Compute, tt.want.Compute) || !near(got.Comm, tt.want.Comm) {
				t.Errorf("Predict(%s) = %+v, want %+v", tt.p, got, tt.want)
			}
		})
	}
}

func TestPredictErrors(t *testing.T) {
	in := Input{Nodes: nodes("a", 2, "b", 2), Ranks: 2, Work: 1}
	tests := []struct {
		name string
		in   Input
		p    Placement
		err  error
	}{
		{"no nodes", Input{Ranks: 2}, Placement{"a", "a"}, ErrNoNodes},
		{"no ranks", Input{Nodes: in.Nodes}, nil, ErrBadRankCount},
		{"rank out of range", Input{Nodes: in.Nodes, Ranks: 2, Traffic: []Flow{{0, 2, 1, 1}}}, Placement{"a", "a"}, ErrBadTraffic},
		{"negative bytes", Input{Nodes: in.Nodes, Ranks: 2, Traffic: []Flow{{0, 1, -1, 1}}}, Placement{"a", "a"}, ErrBadTraffic},
		{"node twice", Input{Nodes: nodes("a", 2, "a", 2), Ranks: 2}, Placement{"a", "a"}, ErrDuplicateNode},
		{"unknown node", in, Placement{"a", "c"}, nil},
		{"too few ranks placed", in, Placement{"a"}, nil},
	}
	for _, tt := range tests {
		_, err := Predict(tt.in, tt.p)
		if err == nil || (tt.err != nil && !errors.Is(err, tt.err)) {
			t.Errorf("%s: Predict err = %v, want %v", tt.name, err, tt.err)
		}
	}
}

func TestLinksBetween(t *testing.T) {
	l := Links{{"a", "b"}: {Latency: 1e-3, Bandwidth: 1e6}, {"c", "b"}: {Bandwidth: 5e6}, {"a", "a"}: {Bandwidth: 1e9}}
	tests := []struct {
		a, b string
		want Link
	}{
		{"a", "b", Link{1e-3, 1e6}},
		{"b", "a", Link{1e-3, 1e6}},
		{"b", "c", Link{DefaultLink.Latency, 5e6}},
		{"a", "c", DefaultLink},
		{"c", "c", SharedMemory},
		{"a", "a", Link{SharedMemory.Latency, 1e9}},
	}
	for _, tt := range tests {
		if got := l.Between(tt.a, tt.b); got != tt.want {
			t.Errorf("Between(%s, %s) = %+v, want %+v", tt.a, tt.b, got, tt.want)
		}
	}
	if got := Links(nil).Between("a", "b"); got != DefaultLink {
		t.Errorf("nil Links: Between = %+v, want %+v", got, DefaultLink)
	}
}

func TestNeighbourTraffic(t *testing.T) {
	b := float64(NeighbourBytes)
	tests := []struct {
		ranks int
		want  []Flow
	}{
		{1, nil},
		{2, []Flow{{0, 1, b, 1}, {1, 0, b, 1}}},
		{3, []Flow{{0, 1, b, 1}, {1, 0, b, 1}, {1, 2, b, 1}, {2, 1, b, 1}, {2, 0, b, 1}, {0, 2, b, 1}}},
	}
	for _, tt := range tests {
		if got := NeighbourTraffic(tt.ranks); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("NeighbourTraffic(%d) = %v, want %v", tt.ranks, got, tt.want)
		}
	}
}

func near(x, y float64) bool { return abs(x-y) <= 1e-9*max(abs(x), abs(y), 1e-12) }
