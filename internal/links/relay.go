package links

import "shoal/internal/job"

// Path is the way between two nodes through a relay, as the overlay carries a
// pair that connects in neither direction (docs/overlay.md, "Which path a
// packet takes"): its bottleneck bandwidth min(bw(a,c), bw(c,b)) and its
// round trips added.
type Path struct {
	Via       string
	RTT       job.Duration
	Bandwidth float64 // bytes per second
}

// Better reports whether p is the better relay than q: the higher bottleneck
// bandwidth, then the shorter round trip, then the smaller name, so that
// every node given the same links chooses the same relay. Bandwidth comes
// first as links.Complete has always estimated: a relay carries the whole
// pair's traffic, and on the clusters Shoal is for the slow hop (a Wi-Fi, a
// site's uplink) is both the narrow and the long one.
func (p Path) Better(q Path) bool {
	if p.Bandwidth != q.Bandwidth {
		return p.Bandwidth > q.Bandwidth
	}
	if p.RTT != q.RTT {
		return p.RTT < q.RTT
	}
	return p.Via < q.Via
}

// Relay is the best path from a to b through one node of nodes (neither a
// nor b) for which usable(a, c) and usable(c, b) hold, the legs' measures
// given by measure (ok false: the node is not a candidate); ok is false when
// there is none. A path is one relay long: a relay writes into its direct
// tunnel only, so there are no chains and no loops.
func Relay(a, b string, nodes []string, usable func(x, y string) bool, measure func(x, y string) (Link, bool)) (best Path, ok bool) {
	for _, c := range nodes {
		if c == a || c == b || !usable(a, c) || !usable(c, b) {
			continue
		}
		ac, ok1 := measure(a, c)
		cb, ok2 := measure(c, b)
		if !ok1 || !ok2 {
			continue
		}
		p := Path{Via: c, RTT: ac.RTT + cb.RTT, Bandwidth: min(ac.Bandwidth, cb.Bandwidth)}
		if !ok || p.Better(best) {
			best, ok = p, true
		}
	}
	return best, ok
}

// Neither reports whether the facts of m say that a and b connect in neither
// direction: each of them last met a refusal, a silence or no route opening
// a connection to the other. A direction not checked yet may connect, so the
// pair is not said to be cut until both were.
func Neither(m map[Pair]Reach, a, b string) bool {
	ab, ok1 := m[Pair{a, b}]
	ba, ok2 := m[Pair{b, a}]
	return ok1 && ok2 && !ab.Result.Connects() && !ba.Result.Connects()
}
