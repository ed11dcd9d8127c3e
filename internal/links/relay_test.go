package links

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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

// Complete keeps its pairs in tables indexed by node, for speed; this is the
// same definition read straight off the rows, a scan per look-up, checked
// against it on random clusters: duplicate and estimated rows, rows of nodes
// not asked about, unmeasured rows that carry only a reach, pairs cut one way
// and both.
func TestCompleteByDefinition(t *testing.T) {
	results := []Result{Reachable, Refused, TimedOut, NoRoute}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 200 {
		var all []string
		for i := range 2 + rng.IntN(10) {
			all = append(all, fmt.Sprintf("n%d", i))
		}
		var rows []Link
		for range rng.IntN(60) {
			l := Link{From: all[rng.IntN(len(all))], To: all[rng.IntN(len(all))],
				Measured: time.Unix(int64(rng.IntN(5)), 0), Estimated: rng.IntN(8) == 0}
			if rng.IntN(4) > 0 {
				l.RTT = job.Duration(1+rng.IntN(4)) * job.Duration(time.Millisecond)
				l.Bandwidth = float64(1+rng.IntN(4)) * 1e8
			}
			if rng.IntN(2) == 0 {
				l.Reach = &Reach{Result: results[rng.IntN(len(results))], Checked: time.Unix(int64(rng.IntN(5)), 0)}
			}
			rows = append(rows, l)
		}
		nodes := all[:len(all)-rng.IntN(2)] // the last node, sometimes, only in rows
		got := Complete(slices.Concat(nodes, nodes[:1]), rows)
		if want := completeByDefinition(nodes, rows); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: Complete(%v, %+v) =\n%+v\nby definition\n%+v", round, nodes, rows, got, want)
		}
	}
}

func completeByDefinition(nodes []string, rows []Link) []Link {
	newest := func(a, b string) (m *Link, r *Reach) {
		for i, l := range rows {
			if l.From != a || l.To != b || l.Estimated {
				continue
			}
			if l.Reach != nil && (r == nil || l.Reach.Checked.After(r.Checked)) {
				r = l.Reach
			}
			if !l.Unmeasured() && (m == nil || l.Measured.After(m.Measured)) {
				m = &rows[i]
			}
		}
		return m, r
	}
	facts := map[Pair]Reach{}
	for _, a := range nodes {
		for _, b := range nodes {
			if _, r := newest(a, b); r != nil {
				facts[Pair{a, b}] = *r
			}
		}
	}
	measure := func(x, y string) (Link, bool) {
		if m, _ := newest(x, y); m != nil {
			return *m, true
		}
		if m, _ := newest(y, x); m != nil {
			return *m, true
		}
		return Link{}, false
	}
	usable := func(x, y string) bool { return !Neither(facts, x, y) }
	sorted := slices.Sorted(slices.Values(nodes))
	var out []Link
	for _, a := range sorted {
		for _, b := range sorted {
			if a == b {
				continue
			}
			m, r := newest(a, b)
			back, _ := newest(b, a)
			p, relayed := Relay(a, b, sorted, usable, measure)
			switch {
			case Neither(facts, a, b) && relayed:
				out = append(out, Link{From: a, To: b, RTT: p.RTT, Bandwidth: p.Bandwidth, Estimated: true, Via: p.Via, Reach: r})
			case Neither(facts, a, b):
				out = append(out, Link{From: a, To: b, Reach: r})
			case m != nil:
				l := *m
				l.Reach = r
				out = append(out, l)
			case back != nil:
				out = append(out, Link{From: a, To: b, RTT: back.RTT, Bandwidth: back.Bandwidth, Measured: back.Measured, Estimated: true, Reach: r})
			case relayed:
				out = append(out, Link{From: a, To: b, RTT: p.RTT, Bandwidth: p.Bandwidth, Estimated: true, Reach: r})
			case r != nil:
				out = append(out, Link{From: a, To: b, Reach: r})
			}
		}
	}
	return out
}
