package agent

import (
	"context"
	"maps"
	"net/netip"
	"time"

	"shoal/internal/links"
	"shoal/internal/metrics"
	"shoal/internal/overlay"
)

// relayLost is how long a peer whose tunnel broke while in use (its node
// killed, its link cut) counts as unreached, unless a tunnel with it comes up
// again: long enough for membership to declare a dead relay dead, so that the
// route does not move back to it meanwhile.
const relayLost = 30 * time.Second

// The cluster's links a route is chosen from are read again at most every
// routeLinksEvery (the agents' rows are read again every 5 s anyway), in the
// background so that a row that does not come (a peer cut from this node)
// holds up neither the upkeep nor a route's move, each read bounded by
// routeLinksWait.
const (
	routeLinksEvery = 5 * time.Second
	routeLinksWait  = 2 * time.Second
)

// redialRelayed is how often a node dials again a peer it relays to, so that
// a direct tunnel wins again once the pair connects, whatever carries the
// packets (a job's peers are dialled every redialAfter anyway).
const redialRelayed = 10 * time.Second

// next is the node a packet for peer is written to: the relay of its route
// when the pair connects in neither direction (overlay.Route), else peer.
func (o *overlayNet) next(peer string) string {
	if r := o.routes.Load(); r != nil {
		if via := (*r)[peer]; via != "" {
			return via
		}
	}
	return peer
}

// forward writes pkt, which t's peer sent for another member, into this
// node's direct tunnel to that member (dialled if need be), never through a
// relay: a path is one relay long, so there are no chains and no loops. Only
// the peer's own packets are forwarded: a node cannot speak for another.
func (o *overlayNet) forward(t *tunnel, src, dst netip.Addr, pkt []byte) {
	table := o.table.Load()
	if owner, ok := table.Owner(src); !ok || owner != t.peer {
		return
	}
	to, ok := table.Owner(dst)
	if !ok || to == t.peer || to == o.a.cfg.Name {
		return
	}
	o.send(to, pkt) // send copies what it keeps
}

// accepts reports whether a packet from src that t brought is written into
// the device (overlay.Accept): the peer's own, or relayed by the peer, a live
// member's this node has no tunnel with.
func (o *overlayNet) accepts(t *tunnel, src netip.Addr) bool {
	owner, _ := o.table.Load().Owner(src)
	if owner == t.peer { // the peer's own: no need to look at the tunnels
		return overlay.Accept(o.a.cfg.Name, t.peer, owner, false)
	}
	o.mu.Lock()
	p := o.peers[owner]
	direct := p != nil && p.t != nil
	o.mu.Unlock()
	return overlay.Accept(o.a.cfg.Name, t.peer, owner, direct)
}

// unreached are the peers without a tunnel that this node has dialled for
// overlay.RelayAfter in vain, or whose tunnel broke in use within relayLost;
// tunnels are those up. Called with o.mu held.
func (o *overlayNet) unreachedLocked(now time.Time) (tunnels, unreached map[string]bool) {
	tunnels, unreached = map[string]bool{}, map[string]bool{}
	for name, p := range o.peers {
		switch {
		case p.t != nil:
			tunnels[name] = true
		case !p.tryingSince.IsZero() && now.Sub(p.tryingSince) >= overlay.RelayAfter,
			!p.lostAt.IsZero() && now.Sub(p.lostAt) < relayLost:
			unreached[name] = true
		}
	}
	return tunnels, unreached
}

// reroute chooses again the way to each peer (overlay.Routes): at every
// upkeep, reading the cluster's links again in the background when fetch and
// they are older than routeLinksEvery, and at once when a tunnel comes up or
// goes down. With every peer reached directly, nothing is read and every
// packet goes direct.
func (o *overlayNet) reroute(fetch bool) {
	o.routeMu.Lock()
	defer o.routeMu.Unlock()
	now := time.Now()
	old := o.routes.Load()
	o.mu.Lock()
	if fetch && old != nil {
		for peer := range *old {
			if p := o.peers[peer]; p != nil && p.t == nil && now.Sub(p.nextDial) >= redialRelayed-redialAfter {
				o.dialLocked(peer, p, now)
			}
		}
	}
	tunnels, unreached := o.unreachedLocked(now)
	o.mu.Unlock()
	if len(unreached) == 0 && (old == nil || len(*old) == 0) {
		return
	}
	if fetch && time.Since(o.routeLinksAt) >= routeLinksEvery && !o.routeLinksReading {
		o.routeLinksReading = true
		go o.readRouteLinks()
	}
	if o.routeLinks == nil {
		return // without a measure every relay looks alike: wait for the read
	}
	self := o.a.cfg.Name
	members := []string{}
	for _, name := range o.table.Load().Taken() {
		members = append(members, name)
	}
	r := overlay.Routes(overlay.View{Self: self, Members: members, Links: o.routeLinks, Tunnels: tunnels, Unreached: unreached})
	if old != nil && maps.Equal(*old, r) {
		return
	}
	for peer, via := range r {
		if old == nil || (*old)[peer] != via {
			o.a.log.Info("overlay: route", "peer", peer, "via", via)
		}
	}
	if old != nil {
		for peer := range *old {
			if _, ok := r[peer]; !ok {
				o.a.log.Info("overlay: route not relayed any more", "peer", peer)
			}
		}
	}
	o.routes.Store(&r)
}

// readRouteLinks reads the cluster's links for reroute, then reroutes.
func (o *overlayNet) readRouteLinks() {
	ctx, cancel := context.WithTimeout(context.Background(), routeLinksWait)
	l, err := o.a.links.Links(ctx, true)
	cancel()
	o.routeMu.Lock()
	o.routeLinksReading = false
	switch {
	case err == nil:
		o.routeLinks, o.routeLinksAt = l.Links, time.Now()
	case o.routeLinks == nil:
		o.routeLinks = []links.Link{} // route by what this node knows alone
		o.a.log.Warn("overlay: the cluster's links could not be read to choose a relay", "err", err)
	}
	o.routeMu.Unlock()
	o.reroute(false)
}

// markRoutes sets Via on this node's own links whose route goes through a
// relay, as this node sees it now (its own unanswered dials included), for
// `shoal nodes --links`.
func (o *overlayNet) markRoutes(ls []links.Link) []links.Link {
	r := o.routes.Load()
	if r == nil {
		return ls
	}
	for i := range ls {
		if via := (*r)[ls[i].To]; ls[i].From == o.a.cfg.Name && via != "" {
			ls[i].Via = via
		}
	}
	return ls
}

// stats counts the overlay's open tunnels and the peers it reaches through a
// relay, for the metrics.
func (o *overlayNet) stats() metrics.Overlay {
	s := metrics.Overlay{On: true}
	if r := o.routes.Load(); r != nil {
		for _, via := range *r {
			if via != "" {
				s.Relayed++
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.peers {
		if p.t != nil {
			s.Tunnels++
		}
	}
	return s
}
