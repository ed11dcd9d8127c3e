package links

import (
	"reflect"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/place"
)

func TestPick(t *testing.T) {
	t0 := time.Unix(1000, 0)
	measured := map[string]time.Time{"a": t0.Add(2 * time.Second), "b": t0, "d": t0.Add(time.Second)}
	for _, tt := range []struct {
		k    int
		want []string
	}{
		{2, []string{"c", "e"}},           // never measured first, by name
		{4, []string{"c", "e", "b", "d"}}, // then the longest ago
		{9, []string{"c", "e", "b", "d", "a"}},
	} {
		if got := Pick([]string{"e", "d", "c", "b", "a"}, measured, tt.k); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Pick(k=%d) = %v, want %v", tt.k, got, tt.want)
		}
	}
}

func link(from, to string, rttMs, mbit float64, estimated bool) Link {
	return Link{From: from, To: to, RTT: job.Duration(time.Duration(rttMs * float64(time.Millisecond))), Bandwidth: mbit * 1e6 / 8, Estimated: estimated}
}

func TestComplete(t *testing.T) {
	measured := []Link{
		link("a", "b", 1, 1000, false),
		link("b", "c", 4, 10, false),
		link("a", "d", 2, 100, false),
		link("d", "c", 3, 50, false),
		link("x", "x", 1, 1, false), // to itself: ignored
		link("a", "c", 9, 9, true),  // an estimate given as input: ignored
	}
	got := Complete([]string{"a", "b", "c", "d"}, measured)
	want := []Link{
		link("a", "b", 1, 1000, false),
		link("a", "c", 5, 50, true), // through d (bottleneck 50) beats through b (10)
		link("a", "d", 2, 100, false),
		link("b", "a", 1, 1000, true), // the reverse direction
		link("b", "c", 4, 10, false),
		link("b", "d", 3, 100, true), // through a
		link("c", "a", 5, 50, true),
		link("c", "b", 4, 10, true),
		link("c", "d", 3, 50, true),
		link("d", "a", 2, 100, true),
		link("d", "b", 3, 100, true),
		link("d", "c", 3, 50, false),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Complete =\n%+v\nwant\n%+v", got, want)
	}
	// A node nobody reaches gets no link.
	if got := Complete([]string{"a", "b", "z"}, measured[:1]); len(got) != 2 {
		t.Errorf("Complete with an unreached node = %+v, want a→b and b→a only", got)
	}
}

func TestForPlanner(t *testing.T) {
	got := ForPlanner([]Link{link("a", "b", 2, 800, false), link("b", "a", 4, 400, false), link("c", "a", 0.05, 40, true)})
	want := place.Links{
		{A: "a", B: "b"}: {Latency: 0.001, Bandwidth: 100e6}, // the faster direction, half the shorter round trip
		{A: "a", B: "c"}: {Latency: 0.000025, Bandwidth: 5e6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ForPlanner = %+v, want %+v", got, want)
	}
}

// A node that has just joined reads one way many times slower than the other
// while its agent and the job's relaunched ranks start (measured on the
// testbed: n1→n4 209 Mbit/s, n4→n1 1730 Mbit/s, n1↔n2 6413 Mbit/s, n2↔n4
// 2146 Mbit/s, equal hosts on one bridge); the planner must see the three
// links alike, or it moves ranks between the two old nodes for the difference.
func TestForPlannerJoinedNode(t *testing.T) {
	got := ForPlanner([]Link{
		link("n1", "n2", 0.18, 6413, false), link("n2", "n1", 0.17, 5095, false),
		link("n1", "n4", 0.20, 209, false), link("n4", "n1", 0.17, 1730, false),
		link("n2", "n4", 0.27, 2146, false), link("n4", "n2", 0.12, 1791, false),
	})
	a, b := got[place.NodePair{A: "n1", B: "n4"}], got[place.NodePair{A: "n2", B: "n4"}]
	if a != b || a != got[place.NodePair{A: "n1", B: "n2"}] {
		t.Errorf("equal links differ for the planner: %+v", got)
	}
}

// The kernel's round trips of a joined node's links, and its bandwidth probed
// while a relaunch started on it, beside the old nodes' (measured on the
// testbed, equal veth links): the planner must see them alike.
func TestForPlannerJoinedNodeLoaded(t *testing.T) {
	got := ForPlanner([]Link{
		link("n1", "n2", 0.02, 4099, false), link("n2", "n1", 0.02, 5551, false),
		link("n1", "n4", 0.01, 613, false),
		link("n2", "n4", 0.03, 4246, false),
	})
	a, b, c := got[place.NodePair{A: "n1", B: "n4"}], got[place.NodePair{A: "n2", B: "n4"}], got[place.NodePair{A: "n1", B: "n2"}]
	if a != b || a != c {
		t.Errorf("equal links differ for the planner: n1-n4 %+v, n2-n4 %+v, n1-n2 %+v", a, b, c)
	}
}

// Equal links read apart on a loaded machine; the planner must see them equal,
// and still tell a slow uplink from them.
func TestForPlannerEvensOutNoise(t *testing.T) {
	got := ForPlanner([]Link{
		link("a", "b", 1.0, 5000, false),
		link("a", "c", 1.4, 3500, false),
		link("b", "c", 0.8, 4200, false),
		link("a", "d", 20, 2.5, false),
	})
	ab, ac, bc, ad := got[place.NodePair{A: "a", B: "b"}], got[place.NodePair{A: "a", B: "c"}], got[place.NodePair{A: "b", B: "c"}], got[place.NodePair{A: "a", B: "d"}]
	if ab != ac || ac != bc {
		t.Errorf("links measured within 10× of each other differ for the planner: a-b %+v, a-c %+v, b-c %+v", ab, ac, bc)
	}
	if ab.Bandwidth != 4200e6/8 || ab.Latency != 0.0005 {
		t.Errorf("the equal links are %+v, want their medians (4200 Mbit/s, 0.5 ms)", ab)
	}
	if ad.Bandwidth >= ab.Bandwidth/100 || ad.Latency <= ab.Latency*10 {
		t.Errorf("the slow link a-d %+v is not kept apart from %+v", ad, ab)
	}
}

func TestEvenOut(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want map[float64]float64
	}{
		{nil, map[float64]float64{}},
		{[]float64{3}, map[float64]float64{3: 3}},
		{[]float64{1, 1.5, 2, 2.1, 4}, map[float64]float64{1: 1.5, 1.5: 1.5, 2: 1.5, 2.1: 2.1, 4: 2.1}},
		{[]float64{10, 1, 100}, map[float64]float64{1: 1, 10: 10, 100: 100}},
	} {
		if got := evenOut(c.in, 2); !reflect.DeepEqual(got, c.want) {
			t.Errorf("evenOut(%v, 2) = %v, want %v", c.in, got, c.want)
		}
	}
}

// A probe taken under load reads slower than the link is; the recent best
// stands until it is older than Window or Keep newer measures replaced it.
func TestRememberBest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(min int, rttMs, mbit float64) Link {
		l := link("a", "b", rttMs, mbit, false)
		l.Measured = t0.Add(time.Duration(min) * time.Minute)
		return l
	}
	var h []Link
	h = Remember(h, at(0, 0.1, 5000), t0)
	h = Remember(h, at(5, 0.6, 900), t0.Add(5*time.Minute)) // under load
	b := Best(h)
	if time.Duration(b.RTT) != 100*time.Microsecond || b.Bandwidth != 5000e6/8 || !b.Measured.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("Best after a loaded probe = %+v, want the idle one's 0.1 ms and 5000 Mbit/s, as of minute 5", b)
	}
	for m := 10; m <= 25; m += 5 {
		h = Remember(h, at(m, 0.5, 1000), t0.Add(time.Duration(m)*time.Minute))
	}
	if len(h) != Keep {
		t.Fatalf("kept %d measures, want %d", len(h), Keep)
	}
	if b := Best(h); time.Duration(b.RTT) != 500*time.Microsecond || b.Bandwidth != 1000e6/8 {
		t.Errorf("Best of the last %d = %+v, want 0.5 ms and 1000 Mbit/s: the link did slow down", Keep, b)
	}
	h = Remember(h[:1], at(60, 2, 100), t0.Add(60*time.Minute))
	if len(h) != 1 || time.Duration(Best(h).RTT) != 2*time.Millisecond {
		t.Errorf("after %s, measures %+v: want only the newest", Window, h)
	}
}
