package links

import (
	"time"

	"shoal/internal/job"
)

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
// bandwidth, then the shorter round trip, then the smaller name (a total
// order: [Relay] then spreads pairs over the relays near the best). Bandwidth comes
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

// Relays as good as the best: a bottleneck bandwidth at least nearBandwidth
// of the best's and a round trip at most nearRTT of the best's plus
// nearRTTSlack. Two probes of the same link differ by about as much.
const (
	nearBandwidth = 0.8
	nearRTT       = 1.25
	nearRTTSlack  = job.Duration(500 * time.Microsecond)
)

// Relay is the path from a to b through one node of nodes (neither a nor b)
// for which usable(a, c) and usable(c, b) hold, the legs' measures given by
// measure (ok false: the node is not a candidate); ok is false when there is
// none. Among the relays as good as the best ([Path.Better], within
// nearBandwidth and nearRTT), the pair's rendezvous hash chooses, the same for
// a to b and b to a: pairs cut apart spread over equally good relays, each
// relay carrying a share of their traffic and holding tunnels to a share of
// their nodes, where the single best by a few per cent of a probe would carry
// them all. Every node given the same links chooses the same relay. A path
// is one relay long: a relay writes into its direct tunnel only, so there are
// no chains and no loops.
func Relay(a, b string, nodes []string, usable func(x, y string) bool, measure func(x, y string) (Link, bool)) (Path, bool) {
	var cands []Path
	for _, c := range nodes {
		if c == a || c == b || !usable(a, c) || !usable(c, b) {
			continue
		}
		ac, ok1 := measure(a, c)
		cb, ok2 := measure(c, b)
		if ok1 && ok2 {
			cands = append(cands, Path{Via: c, RTT: ac.RTT + cb.RTT, Bandwidth: min(ac.Bandwidth, cb.Bandwidth)})
		}
	}
	return choose(a, b, cands)
}

// choose is [Relay]'s choice among the paths from a to b through cands: the
// pair's rendezvous hash among those as good as the best.
func choose(a, b string, cands []Path) (chosen Path, ok bool) {
	if len(cands) == 0 {
		return Path{}, false
	}
	best := cands[0]
	for _, p := range cands[1:] {
		if p.Better(best) {
			best = p
		}
	}
	pair := a + "\x00" + b
	if b < a {
		pair = b + "\x00" + a
	}
	var top uint64
	for _, p := range cands {
		if p.Bandwidth < nearBandwidth*best.Bandwidth || float64(p.RTT) > nearRTT*float64(best.RTT)+float64(nearRTTSlack) {
			continue
		}
		if w := weight(pair, p.Via); !ok || w > top || w == top && p.Via < chosen.Via {
			chosen, top, ok = p, w, true
		}
	}
	return chosen, ok
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
