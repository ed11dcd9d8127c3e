package agent

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/fanout"
	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/membership"
)

// DefaultLinkInterval is how often a node measures its links again
// (Config.LinkInterval).
const DefaultLinkInterval = 5 * time.Minute

// Reachability checks (internal/links, "Reachability"): every
// Config.ReachInterval, and with each round, this node opens a new TCP
// connection to at most reachPerCheck live peers' API addresses, those checked
// longest ago first, so that what a node spends stays the same however large
// the cluster (every peer is checked once in ceil(n/reachPerCheck) checks);
// at most reachParallel at once, each given reachConnect to be made (a SYN
// dropped is sent again after 1 s: the second chance is within it). A fact is
// kept while younger than reachMaxAge: a node that stopped checking (gone, or
// its checks stuck) leaves no fact behind it for long; peers checking less
// often than this node keep theirs as long as the default lets them.
const (
	DefaultReachInterval = 30 * time.Second
	reachConnect         = 3 * time.Second
	reachParallel        = 16
	reachPerCheck        = 16
)

// reachMaxAge is how long a fact of reach is kept, on a cluster of peers other
// nodes checked every every: three times as long as it takes to come round.
func reachMaxAge(every time.Duration, peers int) time.Duration {
	checks := max(1, (peers+reachPerCheck-1)/reachPerCheck)
	return 3*time.Duration(checks)*max(every, DefaultReachInterval) + reachConnect
}

// Sizes of a bandwidth probe: the small one first, the large one when the small
// one took less than probeQuick.
const (
	probeSmall = 256 << 10
	probeLarge = 4 << 20
	probeQuick = 50 * time.Millisecond
)

// linkProber measures this node's links to the others (internal/links says
// how) and serves them as the API's link service.
type linkProber struct {
	a     *Agent
	every time.Duration
	reach time.Duration // how often reachability is checked
	kick  chan struct{}
	mu    sync.Mutex
	// joined are the nodes that joined since the last probeJoined and
	// that this node is a prober of.
	joined map[string]bool
	// dial opens and closes a connection to addr (dialTCP; a test's fake).
	dial func(ctx context.Context, addr string) error
	// row is by peer: links.Best of its recent measures, and the last
	// check of its reach.
	row map[string]links.Link
	// recent are each peer's last measures (links.Remember).
	recent map[string][]links.Link
	// peerRows are the other nodes' rows as last read, for GET
	// /v1/links?all=true: a row is read again once older than rowTTL.
	peerRows map[string]peerRow
	// warming is closed when the warm-up under way ends (Warm); nil when
	// none is.
	warming chan struct{}
}

type peerRow struct {
	links   []links.Link
	read    time.Time
	reading bool // a read of the row is under way in the background
}

// Reading other nodes' rows: a row this fresh is not read again (a node
// measures anew every few minutes); an older one is answered as it is and
// read again in the background rowRefreshDelay later, so that a placement
// waits on no node that it has heard from before, and the launch that follows
// it does not share the nodes' connections and this node's CPU with the
// reads; and a node that does not answer within rowWait, or whose row the
// round (fanout.Limit reads at a time) has not read within rowRound, is left
// out, so that a placement never waits long on a node that just died, nor on
// thousands of rows a new leader does not hold.
const (
	rowTTL          = 5 * time.Second
	rowRefreshDelay = 2 * time.Second
	rowWait         = time.Second
	rowRound        = 2 * rowWait
)

var _ api.LinkService = (*linkProber)(nil)

func (a *Agent) startLinks(every, reach time.Duration) *linkProber {
	if every <= 0 {
		every = DefaultLinkInterval
	}
	if reach <= 0 {
		reach = DefaultReachInterval
	}
	p := &linkProber{a: a, every: every, reach: reach, kick: make(chan struct{}, 1), joined: map[string]bool{}, dial: dialTCP, row: map[string]links.Link{}, recent: map[string][]links.Link{}, peerRows: map[string]peerRow{}}
	go p.watch(a.members.Subscribe())
	go p.loop()
	return p
}

// watch probes a node soon after it joins when this node is one of its
// probers (links.Probers): a join costs the cluster links.PerRound probes,
// not one by every node. The joiner measures its own row in its first round.
func (p *linkProber) watch(sub *membership.Subscription) {
	self := p.a.cfg.Name
	for ev := range sub.C {
		if ev.Type != membership.EventJoin || ev.Node.Name == self {
			continue
		}
		live := []string{self}
		for name := range p.livePeers() {
			live = append(live, name)
		}
		if !slices.Contains(links.Probers(ev.Node.Name, live, links.PerRound), self) {
			continue
		}
		p.mu.Lock()
		p.joined[ev.Node.Name] = true
		p.mu.Unlock()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

func (p *linkProber) loop() {
	t := time.NewTimer(2 * time.Second) // the first round, once the node has joined
	defer t.Stop()
	r := time.NewTicker(p.reach)
	defer r.Stop()
	for {
		select {
		case <-p.a.done:
			return
		case <-r.C:
			p.checkReach(p.livePeers())
			continue
		case <-t.C:
		case <-p.kick:
			time.Sleep(time.Second) // the joiner's API comes up; more may join
			p.probeJoined()
			continue
		}
		p.round()
		t.Reset(p.every)
	}
}

// probeJoined checks the reach of, and probes, the nodes that joined lately
// and that this node is a prober of.
func (p *linkProber) probeJoined() {
	p.mu.Lock()
	joined := p.joined
	p.joined = map[string]bool{}
	p.mu.Unlock()
	addrs := map[string]string{}
	for name, addr := range p.livePeers() {
		if joined[name] {
			addrs[name] = addr
		}
	}
	p.checkReach(addrs)
	p.probe(slices.Sorted(maps.Keys(addrs)), addrs)
}

// livePeers returns the API address of every live peer, by name.
func (p *linkProber) livePeers() map[string]string {
	addrs := map[string]string{}
	for _, n := range p.a.members.Nodes() {
		if n.Name != p.a.cfg.Name && n.State == membership.StateAlive && n.Meta.API != "" {
			addrs[n.Name] = n.Meta.API
		}
	}
	return addrs
}

// checkReach opens a new connection to each of the reachPerCheck peers of
// addrs (by name) checked longest ago and records in the row what it met
// (links.Classify): a connection the API client keeps open would hide a
// firewall that now drops new ones.
func (p *linkProber) checkReach(addrs map[string]string) {
	names := make([]string, 0, len(addrs))
	for name := range addrs {
		names = append(names, name)
	}
	p.mu.Lock()
	dial := p.dial
	checked := map[string]time.Time{}
	for name, l := range p.row {
		if l.Reach != nil {
			checked[name] = l.Reach.Checked
		}
	}
	p.mu.Unlock()
	sem := make(chan struct{}, reachParallel)
	var wg sync.WaitGroup
	for _, name := range links.Pick(names, checked, reachPerCheck) {
		addr := addrs[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), reachConnect)
			defer cancel()
			start := time.Now()
			err := dial(ctx, addr)
			res, ok := links.Classify(err)
			if !ok {
				p.a.log.Debug("reach check failed", "peer", name, "err", err)
				return
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			l := p.row[name]
			l.From, l.To = p.a.cfg.Name, name
			l.Reach = &links.Reach{Result: res, Checked: start}
			p.row[name] = l
		}()
	}
	wg.Wait()
}

// round probes the peers measured longest ago.
func (p *linkProber) round() {
	addrs := p.livePeers()
	p.checkReach(addrs)
	var peers []string
	for name := range addrs {
		peers = append(peers, name)
	}
	p.mu.Lock()
	measured := map[string]time.Time{}
	for name, l := range p.row {
		if !l.Unmeasured() {
			measured[name] = l.Measured
		}
	}
	p.mu.Unlock()
	p.probe(links.Pick(peers, measured, links.PerRound), addrs)
}

// probe measures the links to peers, one at a time (two probes at once would
// share this node's link and measure half of it each), and keeps them.
func (p *linkProber) probe(peers []string, addrs map[string]string) {
	for _, name := range peers {
		l, err := p.measure(name, addrs[name])
		if err != nil {
			p.a.log.Debug("link probe failed", "peer", name, "err", err)
			continue
		}
		p.mu.Lock()
		p.recent[name] = links.Remember(p.recent[name], l, time.Now())
		b := links.Best(p.recent[name])
		b.Reach = p.row[name].Reach
		p.row[name] = b
		p.mu.Unlock()
	}
}

// measure times small requests and a transfer from the peer at addr.
func (p *linkProber) measure(name, addr string) (links.Link, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := p.a.peers.Get(addr)
	var rtt time.Duration
	for i := 0; i < 4; i++ { // the first may pay for a handshake
		start := time.Now()
		if _, err := c.Health(ctx); err != nil {
			return links.Link{}, err
		}
		if d := time.Since(start); i > 0 && (rtt == 0 || d < rtt) {
			rtt = d
		}
	}
	size := int64(probeSmall)
	took, krtt, err := c.ProbeLink(ctx, size)
	if err == nil && took < probeQuick {
		size = probeLarge
		took, krtt, err = c.ProbeLink(ctx, size)
	}
	if err != nil {
		return links.Link{}, err
	}
	transfer := max(took-rtt, time.Microsecond)
	if krtt > 0 && krtt < rtt {
		rtt = krtt // the link's own, without either server's scheduling
	}
	return links.Link{From: p.a.cfg.Name, To: name, RTT: job.Duration(rtt), Bandwidth: float64(size) / transfer.Seconds(), Measured: time.Now()}, nil
}

// bandwidthFrom returns the bandwidth, bytes/s, of the link from the node whose
// API is at addr to this one, as this node last measured it; 0 when it has not
// (a relay's estimate is not used: a shard's transfer goes direct). It is the
// checkpoint store's LinkRate: the direction a fetched shard travels.
func (p *linkProber) bandwidthFrom(addr string) float64 {
	for _, n := range p.a.members.Nodes() {
		if n.Meta.API == addr && n.Name != p.a.cfg.Name {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.row[n.Name].Bandwidth
		}
	}
	return 0
}

// readRow reads the row of the node name, whose API is at addr, and keeps it;
// a row that cannot be read is kept as it was, to be read again next time.
func (p *linkProber) readRow(ctx context.Context, name, addr string) ([]links.Link, error) {
	l, err := p.a.peers.Get(addr).Links(ctx, false)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if r, ok := p.peerRows[name]; ok {
			r.reading = false
			p.peerRows[name] = r
		}
		return nil, err
	}
	var row []links.Link
	for _, x := range l.Links {
		if x.From == name && !x.Estimated {
			row = append(row, x)
		}
	}
	p.peerRows[name] = peerRow{links: row, read: time.Now()}
	return row, nil
}

// Warm reads, in the background, the row of every live node this node holds
// none of, so that a placement soon after finds them here. A new leader holds
// no row, and at 128 nodes reading them all took 0.3 to 0.9 s of the takeover
// of a lost leader's jobs, before the placement could start; warmed from the
// moment the node leads, the reads overlap the takeover's reads of what the
// nodes hold. One warm-up at a time, bounded like a placement's round; a
// Links(all) called meanwhile waits for it rather than reading the same rows
// again.
func (p *linkProber) Warm() {
	p.mu.Lock()
	if p.warming != nil {
		p.mu.Unlock()
		return
	}
	done := make(chan struct{})
	p.warming = done
	var unread []membership.Node
	for _, n := range p.a.members.Nodes() {
		if _, ok := p.peerRows[n.Name]; !ok && p.hasRow(n) {
			unread = append(unread, n)
		}
	}
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			p.warming = nil
			p.mu.Unlock()
			close(done)
		}()
		p.readRows(context.Background(), unread, nil)
	}()
}

// warmRow reads the row of the node name, whose API is at addr, unless this
// node holds it, for a placement soon after: a new leader's takeover reads
// it right after its fence's revoke there, over the connection the revoke
// opened (a row read at the same time as another request to the node would
// open a connection of its own).
func (p *linkProber) warmRow(ctx context.Context, name, addr string) {
	p.mu.Lock()
	_, held := p.peerRows[name]
	p.mu.Unlock()
	if held || name == p.a.cfg.Name || addr == "" {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, rowWait)
	defer cancel()
	p.readRow(cctx, name, addr)
}

// hasRow reports whether n is another live node with an API to read its row
// from.
func (p *linkProber) hasRow(n membership.Node) bool {
	return n.Name != p.a.cfg.Name && n.State == membership.StateAlive && n.Meta.API != ""
}

// readRows reads the rows of nodes, fanout.Limit at a time, each within
// rowWait and all within rowRound of ctx, however many waves that takes: a
// row not read by then is left, as one whose node did not answer. got, when
// set, is given each answer, from the reading goroutines.
func (p *linkProber) readRows(ctx context.Context, nodes []membership.Node, got func(name string, row []links.Link, err error)) {
	round, cancel := context.WithTimeout(ctx, rowRound)
	defer cancel()
	fanout.Each(len(nodes), fanout.Limit, func(i int) {
		cctx, cancel := context.WithTimeout(round, rowWait)
		defer cancel()
		row, err := p.readRow(cctx, nodes[i].Name, nodes[i].Meta.API)
		if got != nil {
			got(nodes[i].Name, row, err)
		}
	})
}

// Links answers GET /v1/links: this node's row, or with all, every live
// node's rows and the estimates of the pairs none measured.
func (p *linkProber) Links(ctx context.Context, all bool) (links.List, error) {
	p.mu.Lock()
	warming := p.warming
	p.mu.Unlock()
	if all && warming != nil {
		select {
		case <-warming:
		case <-ctx.Done():
		}
	}
	p.mu.Lock()
	own := make([]links.Link, 0, len(p.row))
	for _, l := range p.row {
		own = append(own, l)
	}
	p.mu.Unlock()
	own = links.FreshReach(own, time.Now(), reachMaxAge(p.reach, len(own)))
	if !all {
		sort.Slice(own, func(i, j int) bool { return own[i].To < own[j].To })
		return links.List{Links: own}, nil
	}
	var (
		mu      sync.Mutex
		rows    = own
		names   = []string{p.a.cfg.Name}
		skipped = map[string]string{}
	)
	now := time.Now()
	var toRead, toRefresh []membership.Node
	for _, n := range p.a.members.Nodes() {
		if !p.hasRow(n) {
			continue
		}
		names = append(names, n.Name)
		p.mu.Lock()
		cached, ok := p.peerRows[n.Name]
		stale := ok && now.Sub(cached.read) >= rowTTL && !cached.reading
		if stale {
			cached.reading = true
			p.peerRows[n.Name] = cached
		}
		p.mu.Unlock()
		switch {
		case !ok:
			toRead = append(toRead, n)
		case stale:
			toRefresh = append(toRefresh, n)
			fallthrough
		default:
			rows = append(rows, cached.links...)
		}
	}
	// The rows read, like the stale ones read again later, fanout.Limit at a
	// time: a new leader holds no row, and reads every node's.
	if len(toRefresh) > 0 {
		time.AfterFunc(rowRefreshDelay, func() {
			fanout.Each(len(toRefresh), fanout.Limit, func(i int) {
				ctx, cancel := context.WithTimeout(context.Background(), rowWait)
				defer cancel()
				p.readRow(ctx, toRefresh[i].Name, toRefresh[i].Meta.API)
			})
		})
	}
	// A row the round does not read is skipped, as one whose node did not
	// answer.
	p.readRows(ctx, toRead, func(name string, row []links.Link, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			skipped[name] = err.Error()
			return
		}
		rows = append(rows, row...)
	})
	out := links.List{Links: links.Complete(names, links.FreshReach(rows, time.Now(), reachMaxAge(p.reach, len(names)-1)))}
	if p.a.overlay != nil {
		out.Links = p.a.overlay.markRoutes(out.Links)
	}
	if len(skipped) > 0 {
		out.Skipped = skipped
	}
	return out, nil
}
