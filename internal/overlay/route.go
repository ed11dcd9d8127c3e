package overlay

import (
	"math"
	"time"

	"shoal/internal/links"
)

// RelayAfter is how long a node's dials to a peer go unanswered, with no
// tunnel from the peer either, before the node takes the pair for one that
// connects in neither direction and relays it. Both nodes of a job's pair
// dial when a run is granted, so a peer that could reach this node has its
// tunnel up by then: the job does not wait for the next round of reach
// checks (every 30 s).
const RelayAfter = 3 * time.Second

// View is what a node knows when it chooses the way to its peers.
type View struct {
	Self string
	// Members are the live members with an overlay address, Self among them.
	Members []string
	// Links are the cluster's links as [links.Complete] gives them: the
	// measures, and each direction's fact of reach.
	Links []links.Link
	// Tunnels are the peers this node has a tunnel up with.
	Tunnels map[string]bool
	// Unreached are the peers this node's dials have not reached for
	// RelayAfter, no tunnel from them since (or whose tunnel was just lost):
	// this node's own, newer word that the pair does not connect.
	Unreached map[string]bool
}

// Route is the node a packet from v.Self to node to is written to: to itself
// when a tunnel with it is up or can be (either direction connects, as far as
// anyone knows), else the best relay ([links.Relay]) among the members that
// have or can get a tunnel with both, those known to reach to (a direction of
// the pair whose last check connected, or, never checked, that a probe
// measured) before those nobody has checked yet; ok is false when there is none. A relay that
// cannot reach to drops what it is given, and nothing tells this node so: on
// a cluster just up, with its reach not yet checked, a relay chosen on hope
// would swallow the pair's packets until the next round of checks. A direct
// tunnel that comes up later wins again.
func Route(v View, to string) (next string, ok bool) {
	if v.Tunnels[to] {
		return to, true
	}
	facts := links.Matrix(v.Links, time.Time{}, math.MaxInt64)
	usable := func(x, y string) bool {
		if x == v.Self {
			return v.Tunnels[y] || !v.Unreached[y] && !links.Neither(facts, x, y)
		}
		return !links.Neither(facts, x, y)
	}
	if usable(v.Self, to) {
		return to, true
	}
	measured := make(map[links.Pair]links.Link, len(v.Links))
	probed := map[links.Pair]bool{} // measured by a probe, not estimated
	for _, l := range v.Links {
		if !l.Unmeasured() && l.Via == "" {
			measured[links.Pair{From: l.From, To: l.To}] = l
			if !l.Estimated {
				probed[links.Pair{From: l.From, To: l.To}] = true
			}
		}
	}
	known := func(x, y string) bool {
		if !usable(x, y) {
			return false
		}
		if x == v.Self {
			return true // this node dials it, and learns
		}
		// A direction connects if its last check says so, or, unchecked,
		// a probe measured it; a check that failed since the probe wins.
		for _, p := range []links.Pair{{From: x, To: y}, {From: y, To: x}} {
			if r, ok := facts[p]; ok && r.Result.Connects() || !ok && probed[p] {
				return true
			}
		}
		return false
	}
	// A leg nobody measured still carries packets: it ranks last.
	measure := func(x, y string) (links.Link, bool) {
		if l, ok := measured[links.Pair{From: x, To: y}]; ok {
			return l, true
		}
		return measured[links.Pair{From: y, To: x}], true
	}
	if p, ok := links.Relay(v.Self, to, v.Members, known, measure); ok {
		return p.Via, true
	}
	p, ok := links.Relay(v.Self, to, v.Members, usable, measure)
	return p.Via, ok
}

// Routes is [Route] for every other member: the next node of each peer that
// is not reached directly ("" when none can be).
func Routes(v View) map[string]string {
	out := map[string]string{}
	for _, m := range v.Members {
		if m == v.Self {
			continue
		}
		if next, ok := Route(v, m); !ok {
			out[m] = ""
		} else if next != m {
			out[m] = next
		}
	}
	return out
}

// Accept reports whether node self writes into its device a packet whose
// source address owner owns ("" for no member), brought by its tunnel from
// peer: the peer's own packets, or, relayed by the peer, those of another
// member self has no tunnel with. A member with a tunnel to self sends its
// packets through it, so a packet in its name from another tunnel is a node
// speaking for it, and is dropped. (One that self has no tunnel with can
// still be spoken for by any relay: docs/security.md.)
func Accept(self, peer, owner string, tunnelWithOwner bool) bool {
	switch {
	case owner == "" || owner == self:
		return false
	case owner == peer:
		return true
	}
	return !tunnelWithOwner
}
