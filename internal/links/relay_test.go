package links

import (
	"fmt"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/place"
)

func TestPathBetter(t *testing.T) {
	for _, tt := range []struct {
		p, q Path
		want bool
	}{
		{Path{"c", 9, 100}, Path{"d", 1, 50}, true},   // the wider bottleneck first
		{Path{"c", 2, 100}, Path{"d", 1, 100}, false}, // then the shorter round trip
		{Path{"c", 1, 100}, Path{"d", 1, 100}, true},  // then the name
		{Path{"d", 1, 100}, Path{"c", 1, 100}, false},
	} {
		if got := tt.p.Better(tt.q); got != tt.want {
			t.Errorf("%+v.Better(%+v) = %v, want %v", tt.p, tt.q, got, tt.want)
		}
	}
}

func TestNeither(t *testing.T) {
	now := time.Unix(5000, 0)
	m := map[Pair]Reach{
		{"a", "b"}: {TimedOut, now}, {"b", "a"}: {Refused, now}, // cut both ways
		{"a", "c"}: {TimedOut, now}, {"c", "a"}: {Reachable, now}, // one way
		{"b", "c"}: {NoRoute, now}, // the other way not checked
	}
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"a", "b", true}, {"b", "a", true},
		{"a", "c", false}, {"c", "a", false},
		{"b", "c", false},
		{"a", "d", false},
	} {
		if got := Neither(m, tt.a, tt.b); got != tt.want {
			t.Errorf("Neither(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// A pair measured before it was cut both ways (n2, n3) is, for the planner,
// the path through its best relay: n4, whose links are wider than n1's
// (n1's 10 Mbit/s), with the bottleneck bandwidth and the round trips added;
// a relay the pair connects with in neither direction is no candidate.
func TestCompleteRelaysCutPair(t *testing.T) {
	now := time.Unix(5000, 0)
	withReach := func(l Link, r Result) Link {
		l.Reach = &Reach{Result: r, Checked: now}
		return l
	}
	rows := []Link{
		withReach(link("n2", "n3", 0.1, 5000, false), TimedOut), // measured before the cut
		reachLink("n3", "n2", TimedOut, now),
		link("n1", "n2", 0.2, 10, false), link("n1", "n3", 0.2, 10, false),
		link("n4", "n2", 0.3, 900, false), link("n3", "n4", 0.4, 800, false),
		link("n5", "n2", 0.1, 9000, false), link("n5", "n3", 0.1, 9000, false),
		reachLink("n5", "n3", Refused, now), reachLink("n3", "n5", TimedOut, now), // n5 cannot reach n3
	}
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	got := map[Pair]Link{}
	for _, l := range Complete(nodes, rows) {
		got[Pair{l.From, l.To}] = l
	}
	for _, p := range []Pair{{"n2", "n3"}, {"n3", "n2"}} {
		l := got[p]
		want := link(p.From, p.To, 0.7, 800, true)
		if l.Via != "n4" || l.RTT != want.RTT || l.Bandwidth != want.Bandwidth || !l.Estimated || l.Reach == nil || l.Reach.Result != TimedOut {
			t.Errorf("%s->%s = %+v, want through n4: 0.7 ms, 800 Mbit/s, estimated, its own timed-out Reach", p.From, p.To, l)
		}
	}
	if l := got[Pair{"n1", "n2"}]; l.Via != "" {
		t.Errorf("n1->n2 = %+v: a pair that connects is not relayed", l)
	}
	pl := ForPlanner(Complete(nodes, rows))
	if l, ok := pl[place.NodePair{A: "n2", B: "n3"}]; !ok || l.Bandwidth != 800e6/8 {
		t.Errorf("the planner's n2-n3 = %+v (%v), want the path's bottleneck 800 Mbit/s", l, ok)
	}
	// With no node to relay through, the cut pair has its facts and no measure.
	got = map[Pair]Link{}
	for _, l := range Complete([]string{"n2", "n3"}, rows) {
		got[Pair{l.From, l.To}] = l
	}
	if l := got[Pair{"n2", "n3"}]; !l.Unmeasured() || l.Reach == nil || l.Via != "" {
		t.Errorf("n2->n3 with no relay = %+v, want its Reach alone", l)
	}
}

// Pairs cut apart spread over equally good relays, each pair's two directions
// through the same one; a relay well below the best (half its bandwidth, or
// twice its round trip) carries none, and the only candidate is always chosen.
func TestRelaySpreads(t *testing.T) {
	legs := map[string]Link{ // every relay's legs to every node
		"r1":   {RTT: job.Duration(time.Millisecond), Bandwidth: 1000},
		"r2":   {RTT: job.Duration(time.Millisecond), Bandwidth: 950},
		"r3":   {RTT: job.Duration(1100 * time.Microsecond), Bandwidth: 1000},
		"slow": {RTT: job.Duration(time.Millisecond), Bandwidth: 500},
		"far":  {RTT: job.Duration(3 * time.Millisecond), Bandwidth: 1000},
	}
	relays := []string{"r1", "r2", "r3", "slow", "far"}
	measure := func(x, y string) (Link, bool) {
		if l, ok := legs[x]; ok {
			return l, true
		}
		return legs[y], true
	}
	all := func(x, y string) bool { return true }
	count := map[string]int{}
	for i := 0; i < 60; i++ {
		a, b := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		nodes := append([]string{a, b}, relays...)
		p, ok := Relay(a, b, nodes, all, measure)
		back, ok2 := Relay(b, a, nodes, all, measure)
		if !ok || !ok2 || p.Via != back.Via {
			t.Fatalf("%s->%s through %q, %s->%s through %q: want one relay both ways", a, b, p.Via, b, a, back.Via)
		}
		count[p.Via]++
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		if count[r] < 60/3/2 {
			t.Errorf("relay %s carries %d of 60 pairs, want about a third (%v)", r, count[r], count)
		}
	}
	if count["slow"]+count["far"] != 0 {
		t.Errorf("relays well below the best carry pairs: %v", count)
	}
	only := func(x, y string) bool { return x == "slow" || y == "slow" }
	if p, ok := Relay("a1", "b1", append([]string{"a1", "b1"}, relays...), only, measure); !ok || p.Via != "slow" {
		t.Errorf("the only usable relay: got %+v, %v; want slow", p, ok)
	}
}

// BenchmarkComplete128: what a placement's links cost at 128 nodes, each
// having measured 8 others (links.PerRound), most pairs estimated.
func BenchmarkComplete128(b *testing.B) {
	var nodes []string
	for i := 1; i <= 128; i++ {
		nodes = append(nodes, fmt.Sprintf("n%d", i))
	}
	var rows []Link
	for i, a := range nodes {
		for k := 1; k <= 8; k++ {
			rows = append(rows, link(a, nodes[(i+k*13)%len(nodes)], 0.1+float64(k)/10, float64(100*k), false))
		}
	}
	b.ResetTimer()
	for b.Loop() {
		Complete(nodes, rows)
	}
}
