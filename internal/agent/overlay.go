package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/links"
	"shoal/internal/membership"
	"shoal/internal/overlay"
)

// The overlay's timing.
const (
	// tunnelIdle is how long a tunnel that carries nothing, to a node no job
	// running here needs, stays open.
	tunnelIdle = time.Minute
	// queueFor is how long packets for a node wait for its tunnel to come up:
	// long enough for a dial, short enough that TCP inside retransmits the rest.
	queueFor = 3 * time.Second
	// queueLen bounds the packets waiting for one node's tunnel.
	queueLen = 128
	// redialAfter is how long after a failed dial to a node this one tries again.
	redialAfter = 2 * time.Second
	// tunnelDial bounds a dial, TLS handshake and switch included.
	tunnelDial = 5 * time.Second
	// sendQueue is how many packets wait for a tunnel's writer.
	sendQueue = 512
	// overlayTick is how often the overlay reads membership again, dials the
	// tunnels the node's jobs need and closes idle ones.
	overlayTick = time.Second
	// overlayJobGrace is how long after a grant a job of the overlay counts as
	// running on this node even if its record does not say so yet.
	overlayJobGrace = 2 * time.Minute
)

// overlayNet is the node's end of the overlay (docs/overlay.md): the device
// shoal0, and a tunnel to each node it carries packets to, one TLS connection
// to the peer's API switched to frames of IP packets both ways, dialled by
// whichever side could. Its methods are safe for concurrent use.
type overlayNet struct {
	a    *Agent
	dev  *overlay.Device
	auto bool // the address follows overlay.Choose (else it was given)

	addr  atomic.Pointer[netip.Addr]
	table atomic.Pointer[overlay.Table]
	// routes are the peers reached through a relay, by peer ("" for none
	// can be): overlay.Route, chosen again by reroute.
	routes atomic.Pointer[map[string]string]

	routeMu           sync.Mutex   // one reroute at a time; guards the three below
	routeLinks        []links.Link // the cluster's links reroute read last
	routeLinksAt      time.Time    // when
	routeLinksReading bool         // a read is under way

	refreshMu sync.Mutex // one refresh at a time: it may move the address

	mu    sync.Mutex
	peers map[string]*overlayPeer
	jobs  map[string]time.Time // jobs of the overlay granted here → when
	quit  chan struct{}
	done  sync.WaitGroup
}

// overlayPeer is this node's state of the way to one other node.
type overlayPeer struct {
	t        *tunnel
	queue    [][]byte
	queuedAt time.Time // of the oldest queued packet
	dialing  bool
	nextDial time.Time
	// tryingSince is when this node first dialled the peer since their
	// last tunnel; lostAt when a tunnel in use with it broke (see reroute).
	tryingSince, lostAt time.Time
}

// tunnel is one connection to a peer carrying frames both ways.
type tunnel struct {
	peer, dialer string
	conn         io.ReadWriteCloser
	last         atomic.Int64 // UnixNano of the last packet either way
	closing      sync.Once
	closed       chan struct{}

	// The way out: a packet is written by the goroutine that has it when no
	// other write is under way and none waits (put), else queued in send, as
	// a frame, for the tunnel's writer. pending counts the packets queued and
	// not yet written, so that a packet never overtakes one queued before it.
	wmu     sync.Mutex // held while writing to w
	w       *bufio.Writer
	frame   []byte // the frame being written, under wmu
	send    chan *[]byte
	pending atomic.Int32
}

func newTunnel(peer, dialer string, conn io.ReadWriteCloser) *tunnel {
	t := &tunnel{peer: peer, dialer: dialer, conn: conn, closed: make(chan struct{}),
		w: bufio.NewWriterSize(conn, 64<<10), send: make(chan *[]byte, sendQueue)}
	t.touch()
	return t
}

// frames holds buffers of one frame of the largest packet for reuse: a
// packet queued for a tunnel's writer is framed into one, and the writer
// gives it back once written, so that bulk traffic neither allocates 64 KB
// a packet for the collector to scan and free nor copies the packet again
// to frame it. On the testbed, a gigabyte sent cost the sending agent 57,000
// page faults and a tenth of its CPU in the collector with a new buffer a
// packet; 300 page faults with these.
var frames = sync.Pool{New: func() any {
	b := make([]byte, 0, overlay.FrameHeader+overlay.MTU)
	return &b
}}

// newFrame is pkt's frame in a buffer of frames, or nil for what is not a
// packet the overlay carries.
func newFrame(pkt []byte) *[]byte {
	f := frames.Get().(*[]byte)
	var err error
	if *f, err = overlay.AppendFrame((*f)[:0], pkt); err != nil {
		frames.Put(f)
		return nil
	}
	return f
}

// directMax is the largest packet put writes itself: a small message, which
// latency bounds, or an acknowledgement. Larger ones go to the writer.
const directMax = 2048

// put writes pkt into the tunnel at once if it is small (directMax), its
// writer is idle and nothing waits, which saves the packet a hand-off to the
// writer's goroutine (a wake-up, on another thread when the runtime has one
// idle, each way); else it queues pkt's frame for the writer (see [frames]).
// It reports false when the queue is full. A write into a connection whose
// send buffer is full waits for room and holds up the caller (the device's
// reader, so every peer's packets): for at most directMax bytes' room, the
// time a slow link takes to send them (16 ms at 1 Mbit/s), where a packet of
// the device's MTU would hold every peer up for as long as that link takes
// to send 64 KB.
func (t *tunnel) put(pkt []byte) bool {
	if len(pkt) <= directMax && t.pending.Load() == 0 && t.wmu.TryLock() {
		if t.pending.Load() == 0 {
			err := t.writeLocked(pkt)
			if err == nil {
				err = t.w.Flush()
			}
			t.wmu.Unlock()
			if err != nil {
				t.close()
			}
			t.touch()
			return true
		}
		t.wmu.Unlock()
	}
	f := newFrame(pkt)
	if f == nil {
		return true // not a packet the overlay carries: dropped
	}
	t.pending.Add(1)
	select {
	case t.send <- f:
		return true
	default:
		t.pending.Add(-1)
		frames.Put(f)
		return false
	}
}

// writeLocked writes pkt's frame to t.w; wmu is held.
func (t *tunnel) writeLocked(pkt []byte) error {
	var err error
	if t.frame, err = overlay.AppendFrame(t.frame[:0], pkt); err != nil {
		return nil // not a packet the overlay carries: dropped
	}
	_, err = t.w.Write(t.frame)
	return err
}

func (t *tunnel) close() {
	t.closing.Do(func() {
		close(t.closed)
		t.conn.Close()
	})
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// parseOverlay reads Config.Overlay: "" (none), "auto" (chosen from the name,
// overlay.Choose) or an address of overlay.Prefix.
func parseOverlay(s string) (addr netip.Addr, auto bool, err error) {
	switch s {
	case "":
		return netip.Addr{}, false, nil
	case "auto":
		return netip.Addr{}, true, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || !overlay.Prefix.Contains(a) {
		return netip.Addr{}, false, fmt.Errorf("%w: overlay %q: want auto or an IPv4 address in %v", ErrConfig, s, overlay.Prefix)
	}
	return a, false, nil
}

// openOverlay creates the device with the address the node starts with: the
// given one, or its name's first candidate, which it keeps unless a node of a
// smaller name holds it (see [overlayNet.readdress]).
func (a *Agent) openOverlay() (*overlayNet, error) {
	addr, auto, err := parseOverlay(a.cfg.Overlay)
	if err != nil || (!auto && !addr.IsValid()) {
		return nil, err
	}
	if auto {
		addr = overlay.Candidate(a.cfg.Name, 0)
	}
	dev, err := overlay.OpenDevice(overlay.DeviceName, addr, overlay.Prefix)
	if err != nil {
		return nil, err
	}
	o := &overlayNet{a: a, dev: dev, auto: auto, peers: map[string]*overlayPeer{}, jobs: map[string]time.Time{}, quit: make(chan struct{})}
	o.addr.Store(&addr)
	o.table.Store(overlay.NewTable(nil))
	return o, nil
}

// Addr is the node's overlay address.
func (o *overlayNet) Addr() netip.Addr { return *o.addr.Load() }

// start runs the device's reader and the upkeep, once membership is up.
func (o *overlayNet) start() {
	o.refresh()
	o.done.Add(2)
	go o.readDevice()
	go o.upkeep()
	o.a.log.Info("overlay up", "device", o.dev.Name(), "addr", o.Addr())
}

// stop closes the device and every tunnel.
func (o *overlayNet) stop() {
	close(o.quit)
	o.dev.Close()
	o.mu.Lock()
	for _, p := range o.peers {
		if p.t != nil {
			p.t.close()
		}
	}
	o.mu.Unlock()
	o.done.Wait()
}

// refresh rebuilds the table of the live members' addresses and moves this
// node's own if a node of a smaller name announces it.
func (o *overlayNet) refresh() {
	o.refreshMu.Lock()
	defer o.refreshMu.Unlock()
	self := o.a.cfg.Name
	var members []overlay.Member
	for _, n := range o.a.members.Nodes() {
		if n.Local || !n.State.Member() || n.Meta.Overlay == "" {
			continue
		}
		if addr, err := netip.ParseAddr(n.Meta.Overlay); err == nil {
			members = append(members, overlay.Member{Name: n.Name, Addr: addr})
		}
	}
	others := overlay.NewTable(members)
	if o.auto {
		if want, ok := overlay.Choose(self, others.Taken()); ok && want != o.Addr() {
			o.readdress(want)
		}
	}
	o.table.Store(overlay.NewTable(append(members, overlay.Member{Name: self, Addr: o.Addr()})))
}

// readdress gives the device addr and announces it: two nodes chose the same
// address and this one, of the greater name, moves (overlay.Choose).
func (o *overlayNet) readdress(addr netip.Addr) {
	old := o.Addr()
	if err := o.dev.SetAddr(addr, overlay.Prefix); err != nil {
		o.a.log.Error("overlay: cannot move to a free address", "from", old, "to", addr, "err", err)
		return
	}
	o.addr.Store(&addr)
	err := o.a.members.UpdateMeta(func(m *membership.Meta) { m.Overlay = addr.String() }, time.Second)
	o.a.log.Warn("overlay: another node holds this node's address; moved", "from", old, "to", addr, "err", err)
}

// readDevice carries each packet the kernel routes to the device towards the
// node owning its destination.
func (o *overlayNet) readDevice() {
	defer o.done.Done()
	buf := make([]byte, overlay.MTU)
	for {
		n, err := o.dev.Read(buf)
		if err != nil {
			select {
			case <-o.quit:
			default:
				o.a.log.Error("overlay: device read failed; the overlay stops", "err", err)
			}
			return
		}
		dst, ok := overlay.Destination(buf[:n])
		if !ok {
			continue // not IPv4: nothing of the overlay's
		}
		peer, ok := o.table.Load().Owner(dst)
		if !ok || peer == o.a.cfg.Name {
			continue // no node has it: the sender's TCP times out, as on any network
		}
		o.send(o.next(peer), buf[:n])
	}
}

// send hands pkt to peer's tunnel (see [tunnel.put]; a tunnel that is behind
// drops it, as a full link queue would), or queues a copy of it briefly and
// dials one. pkt is not kept.
func (o *overlayNet) send(peer string, pkt []byte) {
	o.mu.Lock()
	p := o.peer(peer)
	if t := p.t; t != nil {
		o.mu.Unlock()
		t.put(pkt)
		return
	}
	defer o.mu.Unlock()
	now := time.Now()
	if len(p.queue) == 0 {
		p.queuedAt = now
	}
	if len(p.queue) < queueLen {
		p.queue = append(p.queue, append([]byte(nil), pkt...))
	}
	o.dialLocked(peer, p, now)
}

func (o *overlayNet) peer(name string) *overlayPeer {
	p := o.peers[name]
	if p == nil {
		p = &overlayPeer{}
		o.peers[name] = p
	}
	return p
}

// dialLocked starts a dial to peer unless one is under way or failed lately.
func (o *overlayNet) dialLocked(peer string, p *overlayPeer, now time.Time) {
	if p.dialing || now.Before(p.nextDial) {
		return
	}
	p.dialing = true
	if p.tryingSince.IsZero() {
		p.tryingSince = now
	}
	o.done.Add(1)
	go o.dial(peer)
}

// dial opens a tunnel to peer through its API. Failing is normal: a peer
// this node cannot reach gets its tunnel when it dials this one.
func (o *overlayNet) dial(peer string) {
	defer o.done.Done()
	conn, err := o.open(peer)
	o.mu.Lock()
	p := o.peer(peer)
	p.dialing = false
	if err != nil {
		p.nextDial = time.Now().Add(redialAfter)
		o.mu.Unlock()
		o.a.log.Debug("overlay: no tunnel dialled", "peer", peer, "err", err)
		return
	}
	o.mu.Unlock()
	select {
	case <-o.quit: // stopped while dialling
		conn.Close()
		return
	default:
	}
	o.carry(peer, o.a.cfg.Name, conn)
}

func (o *overlayNet) open(peer string) (io.ReadWriteCloser, error) {
	n, ok := o.a.members.Node(peer)
	if !ok || !n.State.Member() || n.Meta.API == "" {
		return nil, fmt.Errorf("%w: node %s is not a live member", errkind.NotFound, peer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tunnelDial)
	defer cancel()
	return o.a.peers.Get(n.Meta.API).Tunnel(ctx, api.TunnelRequest{Node: o.a.cfg.Name, Overlay: o.Addr().String()})
}

// Tunnel implements [api.TunnelService]: the dialling node must be a live
// member of the cluster that owns the overlay address it gives.
func (o *overlayNet) Tunnel(_ context.Context, req api.TunnelRequest) (func(io.ReadWriteCloser), error) {
	addr, err := netip.ParseAddr(req.Overlay)
	if err != nil {
		return nil, fmt.Errorf("%w: overlay %q: want an address", errkind.BadRequest, req.Overlay)
	}
	if req.Node == o.a.cfg.Name {
		return nil, fmt.Errorf("%w: a tunnel from node %s to itself", errkind.BadRequest, req.Node)
	}
	o.refresh() // a node that has just joined or moved
	if owner, ok := o.table.Load().Owner(addr); !ok || owner != req.Node {
		return nil, fmt.Errorf("%w: node %s with overlay address %v is not a live member of the overlay as node %s sees it", errkind.Forbidden, req.Node, addr, o.a.cfg.Name)
	}
	return func(conn io.ReadWriteCloser) { o.carry(req.Node, req.Node, conn) }, nil
}

// carry makes conn, dialled by dialer, the tunnel to peer (unless a tunnel
// the pair keeps over it is up: overlay.Keep), writes the packets queued for
// peer into it, and carries it until it ends.
func (o *overlayNet) carry(peer, dialer string, conn io.ReadWriteCloser) {
	t := newTunnel(peer, dialer, conn)
	self := o.a.cfg.Name
	o.mu.Lock()
	p := o.peer(peer)
	old := p.t
	if old != nil && overlay.Keep(self, peer, old.dialer) && !overlay.Keep(self, peer, dialer) {
		o.mu.Unlock()
		conn.Close()
		return
	}
	p.t = t
	p.tryingSince, p.lostAt = time.Time{}, time.Time{}
	for _, pkt := range p.queue {
		if time.Since(p.queuedAt) >= queueFor {
			break
		}
		if f := newFrame(pkt); f != nil {
			t.pending.Add(1)
			t.send <- f
		}
	}
	p.queue = nil
	o.mu.Unlock()
	if old != nil {
		old.close()
	}
	select {
	case <-o.quit: // stop closed the tunnels before this one was in place
		t.close()
	default:
	}
	o.a.log.Info("overlay: tunnel up", "peer", peer, "dialled_by", dialer)
	go o.reroute(false) // a direct tunnel wins again
	go o.write(t)
	err := o.read(t)
	o.mu.Lock()
	if p.t == t {
		p.t = nil
		if time.Since(time.Unix(0, t.last.Load())) < tunnelIdle {
			p.lostAt = time.Now() // broke in use, not closed idle
		}
	}
	o.mu.Unlock()
	t.close()
	o.reroute(false) // a relay lost: the next-best one at once
	o.a.log.Info("overlay: tunnel down", "peer", peer, "err", err)
}

// write sends the packets queued for t, several to a TLS record when they
// come together.
func (o *overlayNet) write(t *tunnel) {
	for {
		var f *[]byte
		select {
		case f = <-t.send:
		case <-t.closed:
			return
		}
		t.wmu.Lock()
		_, err := t.w.Write(*f)
		frames.Put(f)
		t.pending.Add(-1)
	more:
		for err == nil {
			select {
			case f = <-t.send:
				_, err = t.w.Write(*f)
				frames.Put(f)
				t.pending.Add(-1)
			default:
				break more
			}
		}
		if err == nil {
			err = t.w.Flush()
		}
		t.wmu.Unlock()
		if err != nil {
			t.close()
			return
		}
		t.touch()
	}
}

// read writes the packets t brings into the device: those to this node's
// overlay address from a live member's (the peer's own, or another's the peer
// relayed), nothing else; and forwards those from the peer to another member
// (the peer's relay is this node).
func (o *overlayNet) read(t *tunnel) error {
	// Straight from the connection: TLS holds what it decrypted of a record
	// until it is read, so a buffer here would copy every byte once more.
	buf := make([]byte, overlay.MTU)
	for {
		pkt, err := overlay.ReadFrame(t.conn, buf)
		if err != nil {
			return err
		}
		t.touch()
		src, ok1 := overlay.Source(pkt)
		dst, ok2 := overlay.Destination(pkt)
		if !ok1 || !ok2 {
			continue
		}
		if dst != o.Addr() {
			o.forward(t, src, dst, pkt)
			continue
		}
		if !o.accepts(t, src) {
			continue
		}
		if _, err := o.dev.Write(pkt); err != nil {
			o.a.log.Debug("overlay: device write", "err", err)
		}
	}
}

// jobGranted is called when a run of job is granted on this node: if the job
// runs over the overlay, the node dials tunnels to the job's other nodes now,
// and keeps them while the job runs, so that a pair that connects one way
// only has its tunnel from the side that can before MPI sends a packet.
func (o *overlayNet) jobGranted(job string) {
	if o.a.store == nil {
		return
	}
	info, _, err := o.a.store.Job(job)
	if err != nil || !info.Spec.OnOverlay() {
		return
	}
	o.mu.Lock()
	o.jobs[job] = time.Now()
	o.mu.Unlock()
	o.keepUp()
}

// upkeep reads membership again, keeps the tunnels the node's jobs need and
// closes idle ones.
func (o *overlayNet) upkeep() {
	defer o.done.Done()
	tick := time.NewTicker(overlayTick)
	defer tick.Stop()
	for {
		select {
		case <-o.quit:
			return
		case <-tick.C:
		}
		o.refresh()
		o.keepUp()
		o.reroute(true)
	}
}

// keepUp dials the tunnels the node's running jobs of the overlay need,
// closes those idle for tunnelIdle that none needs and those to nodes
// membership holds dead or gone, and drops packets queued too long. A tunnel
// to a host that vanished without a reset (its power, its link) would
// otherwise stay open for as long as TCP retransmits into it, minutes; closed
// when membership declares the node dead, a few seconds after, it is dialled
// again when the node is back.
func (o *overlayNet) keepUp() {
	needed := o.neededPeers()
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for name := range needed {
		p := o.peer(name)
		if p.t == nil {
			o.dialLocked(name, p, now)
		}
	}
	for name, p := range o.peers {
		if len(p.queue) > 0 && now.Sub(p.queuedAt) > queueFor {
			p.queue = nil
		}
		t := p.t
		if t == nil {
			continue
		}
		if n, ok := o.a.members.Node(name); !ok || n.State == membership.StateDead || n.State == membership.StateLeft {
			o.a.log.Info("overlay: closing the tunnel to a node membership holds gone", "peer", name)
			t.close()
		} else if !needed[name] && now.Sub(time.Unix(0, t.last.Load())) > tunnelIdle {
			t.close()
		}
	}
}

// neededPeers are the nodes this node's running jobs of the overlay are
// placed on (every node of the overlay until a job's placement is known).
func (o *overlayNet) neededPeers() map[string]bool {
	o.mu.Lock()
	jobs := make(map[string]time.Time, len(o.jobs))
	for j, at := range o.jobs {
		jobs[j] = at
	}
	o.mu.Unlock()
	self := o.a.cfg.Name
	needed := map[string]bool{}
	table := o.table.Load()
	for id, granted := range jobs {
		info, _, err := o.a.store.Job(id)
		recent := time.Since(granted) < overlayJobGrace
		if (err != nil || !info.Ended.IsZero()) && !recent {
			o.mu.Lock()
			delete(o.jobs, id)
			o.mu.Unlock()
			continue
		}
		if len(info.Placement) > 0 {
			if _, here := info.Placement[self]; !here {
				continue
			}
			for name := range info.Placement {
				if _, ok := table.Addr(name); ok && name != self {
					needed[name] = true
				}
			}
			continue
		}
		for addr, name := range table.Taken() {
			if name != self && addr.IsValid() {
				needed[name] = true
			}
		}
	}
	return needed
}

// CheckOverlay reports whether s can be Config.Overlay.
func CheckOverlay(s string) error {
	_, _, err := parseOverlay(s)
	return err
}
