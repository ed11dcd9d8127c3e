// Package links keeps the pure parts of measuring the network between nodes:
// which peers a node probes next, and how the pairs nobody measured are
// estimated from those that were. The agent (internal/agent/links.go) does the
// probing; the coordinator hands the result to the planner (internal/place).
//
// # Probes
//
// Every node measures its links to its peers: the round trip (the kernel's, of
// the probe's TCP connection, which no busy process delays; else the least of
// three small requests') and the bandwidth of a transfer from the peer
// (256 KiB, or 4 MiB when that took under 50 ms). A round probes at most
// [PerRound] peers, those measured longest ago first, so a node joining a
// cluster of n nodes has its row complete after ⌈(n−1)/PerRound⌉ rounds, and a
// round of the whole cluster costs n·min(n−1, PerRound) probes instead of
// n·(n−1). Rounds come at the agent's interval; a node that joins is probed
// soon after by its [Probers] only, so a join costs the cluster PerRound probes.
//
// Load on either node only adds to a round trip and takes from a transfer, so a
// link is the least round trip and the greatest bandwidth of its last [Keep]
// measures within [Window] ([Best]): a probe taken while a job keeps both
// nodes' cores busy does not make the link look slower than it is.
//
// # Estimates
//
// A pair a→b nobody measured is taken from b→a when that was (links are
// assumed symmetric), else through the best relay c that both were measured
// with: round trip rtt(a,c) + rtt(c,b), bandwidth min(bw(a,c), bw(c,b)), the
// relay with the highest bandwidth chosen (the triangle inequality bounds the
// round trip from above; on the clusters Shoal is for, the slow hop, a Wi-Fi or
// a site's uplink, dominates both). Estimated links are marked so.
package links

import (
	"slices"
	"sort"
	"time"

	"shoal/internal/place"
)

// PerRound is how many peers a node probes in one round.
const PerRound = 8

// Pick returns the peers to probe next: at most k, never-measured first, then
// those measured longest ago, ties by name.
func Pick(peers []string, measured map[string]time.Time, k int) []string {
	ps := append([]string(nil), peers...)
	sort.Slice(ps, func(i, j int) bool {
		ti, tj := measured[ps[i]], measured[ps[j]]
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return ps[i] < ps[j]
	})
	if len(ps) > k {
		ps = ps[:k]
	}
	return ps
}

// Complete returns a link for every ordered pair of distinct nodes that can be
// measured or estimated from measured: the measured ones as they are (the
// newest of duplicates), the others estimated as the package doc says, each
// with the newest Reach of its direction; a pair with no measure and no estimate
// but a Reach is given with that alone. A pair whose facts say it connects in
// neither direction ([Neither]) is the overlay's relayed pair: its link is the
// best relay's path ([Relay]), Via naming the relay, through nodes that pair
// connects with, whatever was measured of it before; it has no link when no
// node can relay it. The result is sorted by from, then to.
//
// The pairs are kept in n×n tables indexed by the nodes' places in sorted
// order, not in maps keyed by names: a placement completes every pair of the
// live nodes (16,256 at 128 nodes, each asking its relays' legs), and hashing
// two names a look-up was most of a coordinator's CPU before a launch.
func Complete(nodes []string, measured []Link) []Link {
	names := slices.Clone(nodes)
	slices.Sort(names)
	names = slices.Compact(names)
	n := len(names)
	at := make(map[string]int, n)
	for i, name := range names {
		at[name] = i
	}
	// known[i*n+j] is 1 + the index in measured of the newest measure of
	// names[i]→names[j], 0 for none; reach[i*n+j] its newest reachability.
	known := make([]int32, n*n)
	reach := make([]*Reach, n*n)
	for k, l := range measured {
		i, ok1 := at[l.From]
		j, ok2 := at[l.To]
		if !ok1 || !ok2 || i == j || l.Estimated {
			continue
		}
		c := i*n + j
		if r := reach[c]; l.Reach != nil && (r == nil || l.Reach.Checked.After(r.Checked)) {
			reach[c] = l.Reach
		}
		if l.Unmeasured() {
			continue
		}
		if old := known[c]; old == 0 || l.Measured.After(measured[old-1].Measured) {
			known[c] = int32(k + 1)
		}
	}
	get := func(i, j int) *Link {
		if k := known[i*n+j]; k != 0 {
			return &measured[k-1]
		}
		if k := known[j*n+i]; k != 0 {
			return &measured[k-1]
		}
		return nil
	}
	neither := func(i, j int) bool {
		ab, ba := reach[i*n+j], reach[j*n+i]
		return ab != nil && ba != nil && !ab.Result.Connects() && !ba.Result.Connects()
	}
	// A relay of a and b needs a measured leg with a: only a's measured
	// neighbours are asked, a few each where every node probes a few others,
	// instead of every node for every pair (at 128 nodes, where most pairs are
	// estimated, that was 2 million candidates a placement read).
	near := make([][]int, n)
	for c, k := range known {
		if k != 0 {
			i, j := c/n, c%n
			near[i] = append(near[i], j)
			near[j] = append(near[j], i)
		}
	}
	for i, cs := range near {
		slices.Sort(cs)
		near[i] = slices.Compact(cs)
	}
	var cands []Path
	relay := func(a, b int) (Path, bool) {
		cands = cands[:0]
		for _, c := range near[a] {
			if c == b || neither(a, c) || neither(c, b) {
				continue
			}
			ac, cb := get(a, c), get(c, b)
			if ac != nil && cb != nil {
				cands = append(cands, Path{Via: names[c], RTT: ac.RTT + cb.RTT, Bandwidth: min(ac.Bandwidth, cb.Bandwidth)})
			}
		}
		return choose(names[a], names[b], cands)
	}
	var out []Link
	for a := range n {
		for b := range n {
			if a == b {
				continue
			}
			from, to, r := names[a], names[b], reach[a*n+b]
			if neither(a, b) {
				// A pair cut both ways is what the overlay relays: its link is
				// the relay's path, whatever was measured before the cut.
				if p, ok := relay(a, b); ok {
					out = append(out, Link{From: from, To: to, RTT: p.RTT, Bandwidth: p.Bandwidth, Estimated: true, Via: p.Via, Reach: r})
				} else {
					out = append(out, Link{From: from, To: to, Reach: r})
				}
				continue
			}
			if k := known[a*n+b]; k != 0 {
				l := measured[k-1]
				l.Reach = r
				out = append(out, l)
				continue
			}
			if k := known[b*n+a]; k != 0 {
				l := measured[k-1]
				out = append(out, Link{From: from, To: to, RTT: l.RTT, Bandwidth: l.Bandwidth, Measured: l.Measured, Estimated: true, Reach: r})
				continue
			}
			if p, ok := relay(a, b); ok {
				out = append(out, Link{From: from, To: to, RTT: p.RTT, Bandwidth: p.Bandwidth, Estimated: true, Reach: r})
			} else if r != nil {
				out = append(out, Link{From: from, To: to, Reach: r})
			}
		}
	}
	return out
}

// alike is how far apart two measures of links may be and still be taken for
// the same: probes of equal links read up to 9 times apart when one was taken
// while a job kept the machine busy (a node joined during a relaunch read
// 613 Mbit/s beside 5551 over equal veth links on the testbed), and the links
// the planner must tell apart (a LAN from a site's uplink or Wi-Fi) differ
// tenfold or more.
const alike = 10.0

// ForPlanner turns links into the planner's: one-way latency is half the round
// trip; a pair measured both ways takes the faster direction's bandwidth and
// the shorter round trip, since load only slows a probe and the two directions
// are the same wire (a node just joined reads 30 times slower one way than the
// other while its agent and the job's ranks start). Measures within a factor of alike of each other are
// then made equal (see evenOut), so that the planner moves no rank for the
// noise between equal links.
func ForPlanner(links []Link) place.Links {
	out := forPlanner(links)
	lat := make([]float64, 0, len(out))
	bw := make([]float64, 0, len(out))
	for _, l := range out {
		lat = append(lat, l.Latency)
		bw = append(bw, l.Bandwidth)
	}
	latOf, bwOf := evenOut(lat, alike), evenOut(bw, alike)
	for k, l := range out {
		out[k] = place.Link{Latency: latOf[l.Latency], Bandwidth: bwOf[l.Bandwidth]}
	}
	return out
}

// evenOut groups values, from the smallest up, into runs whose largest is at
// most factor times their smallest, and maps each value to its run's median
// (the lower middle one of an even run).
func evenOut(values []float64, factor float64) map[float64]float64 {
	vs := slices.Clone(values)
	slices.Sort(vs)
	out := make(map[float64]float64, len(vs))
	for i := 0; i < len(vs); {
		j := i
		for j < len(vs) && vs[j] <= vs[i]*factor {
			j++
		}
		mid := vs[i+(j-i-1)/2]
		for _, v := range vs[i:j] {
			out[v] = mid
		}
		i = j
	}
	return out
}

func forPlanner(links []Link) place.Links {
	out := place.Links{}
	for _, l := range links {
		if l.Unmeasured() {
			continue
		}
		k := place.NodePair{A: l.From, B: l.To}
		if l.To < l.From {
			k = place.NodePair{A: l.To, B: l.From}
		}
		pl := place.Link{Latency: time.Duration(l.RTT).Seconds() / 2, Bandwidth: l.Bandwidth}
		if old, ok := out[k]; ok {
			pl.Latency = min(pl.Latency, old.Latency)
			pl.Bandwidth = max(pl.Bandwidth, old.Bandwidth)
		}
		out[k] = pl
	}
	return out
}

// A link's recent measures: at most Keep, none older than Window.
const (
	Keep   = 4
	Window = 30 * time.Minute
)

// Remember adds measure l to h, a link's recent measures (oldest first), and
// drops those beyond Keep or older than Window at now.
func Remember(h []Link, l Link, now time.Time) []Link {
	h = append(h, l)
	if len(h) > Keep {
		h = h[len(h)-Keep:]
	}
	for len(h) > 1 && now.Sub(h[0].Measured) > Window {
		h = h[1:]
	}
	return slices.Clone(h)
}

// Best is the link that recent measures h (oldest first, not empty) describe:
// the least round trip and the greatest bandwidth among them, as of the newest.
func Best(h []Link) Link {
	b := h[len(h)-1]
	for _, l := range h {
		b.RTT = min(b.RTT, l.RTT)
		b.Bandwidth = max(b.Bandwidth, l.Bandwidth)
	}
	return b
}
