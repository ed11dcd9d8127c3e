package membership

import (
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"shoal/internal/liblog"
)

// DefaultPort is the gossip port used when a join address has none.
const DefaultPort = 7946

// Membership is this node's view of the cluster. Its methods are safe for
// concurrent use.
type Membership struct {
	cfg    Config
	log    *slog.Logger
	ml     *memberlist.Memberlist
	table  *table
	events broker

	announceMu sync.Mutex // held through an announcement's gossip
	announced  time.Time  // when the last announcement ended (under announceMu)
	changes    atomic.Int64
	metaMu     sync.Mutex
	meta       Meta
	encoded    atomic.Pointer[[]byte] // what NodeMeta returns

	leaving atomic.Bool
	// held holds the deaths reported by other nodes that this node waits to
	// see refuted (see hold), by node, each with its sequence number; leavers
	// the nodes that told this one they are leaving (see tellLeaving).
	heldMu  sync.Mutex
	held    map[string]uint64
	heldSeq uint64
	leavers map[string]struct{}
	// conflict is the gossip address of another live node that has this
	// node's name, as memberlist reported it while joining; nil: none.
	conflict atomic.Pointer[string]
	// rechecking holds the suspect nodes being pinged (see recheck).
	rechecking sync.Map
	stopOnce   sync.Once
	stop       chan struct{}
	done       chan struct{}
}

// New starts gossiping on cfg's bind address as a cluster of one. meta is what
// this node announces; call [Membership.Join] to join others. log receives
// membership events and memberlist's own messages (nil discards them).
func New(cfg Config, meta Meta, logger *slog.Logger) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Membership{
		cfg:     cfg,
		log:     logger,
		table:   newTable(),
		held:    map[string]uint64{},
		leavers: map[string]struct{}{},
		meta:    meta,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	enc, err := meta.Encode()
	if err != nil {
		return nil, err
	}
	m.encoded.Store(&enc)
	mc, err := MemberlistConfig(cfg)
	if err != nil {
		return nil, err
	}
	sink := &logSink{log: logger, onSuspect: m.suspect, limit: liblog.NewLimiter(liblog.DefaultEvery, nil)}
	mc.Logger = log.New(sink, "", 0)
	d := &delegate{m}
	mc.Delegate, mc.Events, mc.Ping, mc.Conflict, mc.Alive = d, d, d, d, d

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("membership: gossip on %s: %w",
			net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.BindPort)), err)
	}
	m.ml = ml
	go m.housekeep()
	return m, nil
}

// MemberlistConfig returns the memberlist configuration [New] starts from for
// cfg, before it adds its delegates and its log sink: memberlist's LAN preset
// with cfg's addresses and timings, and gossip encrypted and authenticated under
// cfg.Secret's key. With an empty Secret, which New refuses, gossip is left
// unencrypted: for a simulation over memberlist's in-memory transport, which
// sets Transport itself. It does not validate cfg.
func MemberlistConfig(cfg Config) (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr, mc.BindPort = cfg.BindAddr, cfg.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = cfg.AdvertiseAddr, cfg.AdvertisePort
	if mc.AdvertiseAddr == "" && cfg.BindAddr == "0.0.0.0" {
		mc.AdvertiseAddr = defaultIPv4()
	}
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = cfg.BindPort
	}
	// No memberlist label: encryption already keeps other clusters out, and a
	// labelled node logs an error for every bare TCP connect (health probes).
	if len(cfg.Secret) > 0 {
		keys, err := keyring(cfg.Secret)
		if err != nil {
			return nil, err
		}
		mc.Keyring = keys
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.ProbeInterval, mc.ProbeTimeout = cfg.ProbeInterval, cfg.ProbeTimeout
	mc.IndirectChecks = cfg.IndirectChecks
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = cfg.SuspicionMult, cfg.SuspicionMaxTimeoutMult
	mc.RetransmitMult = cfg.RetransmitMult
	mc.GossipInterval, mc.GossipNodes = cfg.GossipInterval, cfg.GossipNodes
	mc.GossipToTheDeadTime = cfg.GossipToTheDeadTime
	mc.PushPullInterval = cfg.PushPullInterval
	mc.TCPTimeout = cfg.TCPTimeout
	mc.AwarenessMaxMultiplier = cfg.AwarenessMaxMultiplier
	mc.DeadNodeReclaimTime = cfg.DeadNodeReclaimTime
	return mc, nil
}

// AdvertiseIP returns the IP address a node started with cfg announces as its
// gossip address, as [New] chooses it: Config.AdvertiseAddr, else BindAddr
// unless that is 0.0.0.0, else the first private (then global) IPv4 address of
// an interface that is up. It returns "" when there is none: memberlist then
// picks one itself, known only once started ([Membership.Addr]).
//
// It lets a caller put addresses derived from it into the metadata given to
// New, rather than announce them with [Membership.SetMeta] before joining:
// changing the metadata while alone replaces the first announcement still
// queued, which memberlist v0.7.0 mishandles (hashicorp/memberlist#263: after
// a queued broadcast is replaced and the queue is left empty, a later broadcast
// of the same size can silently take the new one's place, so this node's
// announcements stop reaching the others).
func AdvertiseIP(cfg Config) string {
	switch {
	case cfg.AdvertiseAddr != "":
		return cfg.AdvertiseAddr
	case cfg.BindAddr != "0.0.0.0":
		return cfg.BindAddr
	}
	return defaultIPv4()
}

// Name returns this node's name.
func (m *Membership) Name() string { return m.cfg.Name }

// Addr returns the gossip address other nodes use to reach this one, host:port.
func (m *Membership) Addr() string {
	n := m.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Config returns the configuration the membership was started with.
func (m *Membership) Config() Config { return m.cfg }

// Nodes returns every node seen, sorted by name: alive and suspect ones, and dead
// and departed ones until Config.ForgetAfter has passed.
func (m *Membership) Nodes() []Node { return m.table.list() }

// Node returns one node by name.
func (m *Membership) Node(name string) (Node, bool) { return m.table.get(name) }

// Meta returns the metadata this node announces.
func (m *Membership) Meta() Meta {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return m.meta
}

// SetMeta changes what this node announces and waits, up to timeout, until the
// change has been gossiped. Give New the metadata known at the start instead
// of setting it before [Membership.Join] (see [AdvertiseIP]).
func (m *Membership) SetMeta(meta Meta, timeout time.Duration) error {
	return m.announce(func(old *Meta) { *old = meta }, timeout)
}

// UpdateMeta applies f to what this node announces and waits, up to timeout,
// until the change has been gossiped. Changes are applied in turn, each to the
// result of the one before, so concurrent callers changing different fields
// lose nothing; each is gossiped a little after the one before has been (a few
// gossip intervals), so frequent changes should be coalesced by the caller.
// Once the node is leaving it does nothing: an alive message then would undo
// the departure.
func (m *Membership) UpdateMeta(f func(*Meta), timeout time.Duration) error {
	if m.leaving.Load() {
		return nil
	}
	return m.announce(f, timeout)
}

// announce applies f to the metadata and gossips the result. announceMu spans
// the gossip: memberlist reads the metadata before it numbers the alive message,
// so two announcements at once could send the older metadata with the newer
// number, which the others would keep.
//
// An announcement starts no sooner than announceGap after the previous one was
// gossiped, so that the other nodes have passed the previous one on by then:
// a node that queues a node's alive message while the same node's previous one
// is its only queued broadcast can lose the new one to memberlist v0.7.0's
// queue bug (see AdvertiseIP). Callers who wait for each announcement (a
// timeout longer than the gossip takes) never meet it on this node.
func (m *Membership) announce(f func(*Meta), timeout time.Duration) error {
	m.announceMu.Lock()
	defer m.announceMu.Unlock()
	gap := time.Duration(m.cfg.RetransmitMult) * m.cfg.GossipInterval
	if wait := time.Until(m.announced.Add(gap)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-m.stop:
			return ErrShutdown
		}
	}
	defer func() { m.announced = time.Now() }()
	m.changes.Add(1)
	m.metaMu.Lock()
	meta := m.meta
	f(&meta)
	enc, err := meta.Encode()
	if err != nil {
		m.metaMu.Unlock()
		return err
	}
	m.meta = meta
	m.encoded.Store(&enc)
	m.metaMu.Unlock()
	m.table.update(m.cfg.Name, func(n *Node) { n.Meta = meta })
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("membership: announce metadata: %w", err)
	}
	return nil
}

// MetaChanges returns how many times this node's metadata has been changed since
// New ([Membership.SetMeta], [Membership.UpdateMeta]).
func (m *Membership) MetaChanges() int64 { return m.changes.Load() }

// Subscribe returns a new subscription to membership events. See [Subscription]
// for the delivery guarantees.
func (m *Membership) Subscribe() *Subscription { return m.events.subscribe() }

// Join contacts the given nodes (host:port, port defaulting to [DefaultPort])
// and merges their view of the cluster into this one. It succeeds if any of them
// answered. It fails with [ErrJoinUnreachable] when none accepted a connection,
// with [ErrJoinRefused] when one accepted but the exchange failed, which with
// encrypted gossip means the cluster secrets differ, and with a [NameTakenError]
// when a node alive in the cluster already has this node's name (a node that left
// or was declared dead may come back under its name).
func (m *Membership) Join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	full := make([]string, len(addrs))
	for i, a := range addrs {
		full[i] = withPort(a)
	}
	n, err := m.ml.Join(full)
	// An exchange that timed out is a node too busy to answer in time (a
	// loaded host; a join among a hundred others), not a refusal: try again.
	for try := 1; n == 0 && timedOut(err) && try < joinTries; try++ {
		m.log.Info("join timed out; trying again", "via", full, "err", err)
		n, err = m.ml.Join(full)
	}
	if c := m.conflict.Load(); n > 0 && c != nil {
		return &NameTakenError{Name: m.cfg.Name, Addr: *c}
	}
	if n > 0 {
		m.log.Info("joined cluster", "via", full, "nodes", m.ml.NumMembers())
		return nil
	}
	// Find out why. Probing only now keeps successful joins from leaving a
	// stray connection in the other nodes' logs.
	var first error
	for _, a := range full {
		conn, derr := net.DialTimeout("tcp", a, m.cfg.TCPTimeout)
		if derr == nil {
			conn.Close()
			m.log.Debug("join failed", "addr", a, "err", err)
			if timedOut(err) {
				return &JoinError{Addr: a, Err: ErrJoinUnreachable, Cause: fmt.Errorf("no answer in %v, %d times", m.cfg.TCPTimeout, joinTries)}
			}
			return &JoinError{Addr: a, Err: ErrJoinRefused, Cause: err}
		}
		if first == nil {
			first = &JoinError{Addr: a, Err: ErrJoinUnreachable, Cause: unwrapNet(derr)}
		}
	}
	return first
}

// joinTries is how many times Join asks when the exchange times out.
const joinTries = 3

// timedOut reports whether a join failed by a timeout of its exchange. memberlist
// wraps the network's error with %v, so only its words are left.
func timedOut(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "i/o timeout") || strings.Contains(err.Error(), "deadline exceeded"))
}

// NameTakenError is the refusal of a join under a name that a node alive in the
// cluster already has; it unwraps to [ErrNameTaken].
type NameTakenError struct {
	Name string
	Addr string // the other node's gossip address
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("node name %s is already in the cluster (at %s)", e.Name, e.Addr)
}

func (e *NameTakenError) Unwrap() error { return ErrNameTaken }

// JoinError says why joining through Addr failed; it unwraps to
// [ErrJoinRefused] or [ErrJoinUnreachable].
type JoinError struct {
	Addr  string
	Err   error // the sentinel
	Cause error // what the network or memberlist said
}

func (e *JoinError) Error() string {
	if e.Err == ErrJoinRefused {
		return "join refused by " + e.Addr + ": wrong cluster secret?"
	}
	return fmt.Sprintf("cannot reach %s to join: %v", e.Addr, e.Cause)
}

func (e *JoinError) Unwrap() error { return e.Err }

// Leave announces that this node is leaving, so that the others record it as
// [StateLeft], and waits up to Config.LeaveTimeout for the announcement to
// spread. The node keeps answering until [Membership.Shutdown].
func (m *Membership) Leave() error {
	if !m.leaving.CompareAndSwap(false, true) {
		return nil
	}
	deadline := time.Now().Add(m.cfg.LeaveTimeout)
	// The flag goes out first, in an alive message: memberlist's leave message
	// cannot carry it, and the others read it when the leave arrives.
	if err := m.AnnounceLeaving(); err != nil {
		m.log.Warn("leave: flag not confirmed gossiped", "err", err)
	}
	m.tellLeaving(time.Now().Add(time.Until(deadline) / 2))
	if err := m.ml.Leave(time.Until(deadline)); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	m.log.Info("left cluster")
	return nil
}

// leaveNotice is the first byte of the message a leaving node sends each
// member directly (see tellLeaving); its name follows.
const leaveNotice = 'L'

// tellLeaving sends each live member a notice that this node is leaving, over
// a TCP connection of its own, and waits until all are sent or until deadline.
//
// The flag that says so goes out by gossip too, but gossip does not carry it
// to every node: memberlist drops a node's queued alive message, and with it
// the flag, when the same node's leave message is queued after it (both are
// news of one node), on the nodes that pass gossip on as on this one. A node
// that had not received the flag by then records the leave as a failure
// (bench/chaos counted such false declarations). The notice reaches every
// node this one can connect to.
func (m *Membership) tellLeaving(deadline time.Time) {
	msg := append([]byte{leaveNotice}, m.cfg.Name...)
	var wg sync.WaitGroup
	for _, n := range m.table.list() {
		if n.Local || !n.State.Member() {
			continue
		}
		to, err := memberlistNode(n)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.ml.SendReliable(to, msg); err != nil {
				m.log.Debug("leave notice not sent", "node", n.Name, "err", err)
			}
		}()
	}
	sent := make(chan struct{})
	go func() { wg.Wait(); close(sent) }()
	select {
	case <-sent:
	case <-time.After(time.Until(deadline)):
		m.log.Warn("leave: notices not all sent in time; the nodes not told may record a failure")
	}
}

// memberlistNode returns the address memberlist needs to reach n.
func memberlistNode(n Node) (*memberlist.Node, error) {
	host, port, err := net.SplitHostPort(n.Addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, err
	}
	return &memberlist.Node{Name: n.Name, Addr: net.ParseIP(host), Port: uint16(p)}, nil
}

// noteLeaving records that name said it is leaving.
func (m *Membership) noteLeaving(name string) {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	m.leavers[name] = struct{}{}
}

// forgetLeaving forgets that name said it is leaving.
func (m *Membership) forgetLeaving(name string) {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	delete(m.leavers, name)
}

// saidLeaving reports whether name said it is leaving since it last joined.
func (m *Membership) saidLeaving(name string) bool {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	_, ok := m.leavers[name]
	return ok
}

// AnnounceLeaving gossips that this node is about to leave (Meta.Leaving),
// waiting up to half of Config.LeaveTimeout for it to spread, and stays a
// member. A node that hands its work over before it leaves says so first, so
// that nothing new is placed on it meanwhile. [Membership.Leave] does it too.
func (m *Membership) AnnounceLeaving() error {
	m.metaMu.Lock()
	done := m.meta.Leaving
	m.metaMu.Unlock()
	if done {
		return nil
	}
	return m.announce(func(meta *Meta) { meta.Leaving = true }, m.cfg.LeaveTimeout/2)
}

// Shutdown stops gossiping at once, without telling anyone: the other nodes will
// declare this one dead unless [Membership.Leave] ran first. Subscriptions
// receive what is queued and are then closed.
func (m *Membership) Shutdown() error {
	var err error
	m.stopOnce.Do(func() {
		close(m.stop)
		<-m.done
		err = m.ml.Shutdown()
		m.events.close()
	})
	return err
}

// housekeep forgets long-dead nodes.
func (m *Membership) housekeep() {
	defer close(m.done)
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	var reconnect <-chan time.Time
	if m.cfg.ReconnectInterval > 0 {
		r := time.NewTicker(m.cfg.ReconnectInterval)
		defer r.Stop()
		reconnect = r.C
	}
	var trying sync.Map // node name → a join attempt is under way
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			if m.cfg.ForgetAfter > 0 {
				m.table.forget(now.Add(-m.cfg.ForgetAfter))
			}
		case now := <-reconnect:
			for _, n := range m.table.list() {
				if n.State != StateDead || n.Local || now.Sub(n.Since) > m.cfg.ReconnectTimeout {
					continue
				}
				if _, busy := trying.LoadOrStore(n.Name, true); busy {
					continue
				}
				go func(n Node) {
					defer trying.Delete(n.Name)
					if _, err := m.ml.Join([]string{n.Addr}); err == nil {
						m.log.Info("reconnected to a node held dead", "node", n.Name, "addr", n.Addr)
					}
				}(n)
			}
		}
	}
}

func (m *Membership) publish(t EventType, n Node) {
	switch {
	case t == EventUpdate || n.Local:
		m.log.Debug("node "+t.String(), "node", n.Name, "addr", n.Addr)
	default:
		m.log.Info("node "+t.String(), "node", n.Name, "addr", n.Addr)
	}
	m.events.publish(Event{Type: t, Node: n, Time: time.Now()})
}

// suspect is called when this node's probe of name failed.
func (m *Membership) suspect(name string) {
	now := time.Now()
	before, after, ok := m.table.update(name, func(n *Node) {
		if n.State == StateAlive {
			n.State, n.Since = StateSuspect, now
		}
	})
	if ok && before.State == StateAlive {
		m.publish(EventSuspect, after)
	}
}

// recheckTries is how many pings recheck sends a suspect node at most.
const recheckTries = 5

// recheck pings n, a node this node holds suspect of which an alive message
// came, and sets it alive again if it answers. memberlist sets a suspect node
// alive when it refutes, but tells no delegate unless its metadata changed, and
// this node's own next direct probe of it (NotifyPingComplete) comes round only
// after every other node's: up to n probe intervals, minutes on a large
// cluster. An alive message may also be old news (a retransmission, another
// node's state at a push-pull), so it is only the cue: the answer decides, as
// for a probe, up to recheckTries pings a probe interval apart. One recheck a
// node at a time.
func (m *Membership) recheck(n Node) {
	if _, busy := m.rechecking.LoadOrStore(n.Name, true); busy {
		return
	}
	go func() {
		defer m.rechecking.Delete(n.Name)
		// A node short of CPU may miss one ping's timeout: ask again each probe
		// interval while it stays suspect here, a few times; memberlist declares
		// it dead meanwhile if it is.
		for try := 0; !m.answers(n); try++ {
			if try == recheckTries-1 {
				return
			}
			select {
			case <-m.stop:
				return
			case <-time.After(m.cfg.ProbeInterval):
			}
			if cur, ok := m.table.get(n.Name); !ok || cur.State != StateSuspect {
				return
			}
		}
		now := time.Now()
		before, after, ok := m.table.update(n.Name, func(t *Node) {
			if t.State == StateSuspect {
				t.State, t.Since = StateAlive, now
			}
		})
		if ok && before.State == StateSuspect && after.State == StateAlive {
			m.log.Debug("a suspect node answers again", "node", n.Name)
			m.publish(EventAlive, after)
		}
	}()
}

// delegate receives memberlist's callbacks. memberlist holds its node lock while
// calling the event methods, so they must never call back into memberlist.
type delegate struct{ m *Membership }

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.PingDelegate     = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
	_ memberlist.AliveDelegate    = (*delegate)(nil)
)

// NotifyAlive is memberlist telling of an alive message about peer, before it
// decides whether the message is news. It never refuses one.
func (d *delegate) NotifyAlive(peer *memberlist.Node) error {
	if n, ok := d.m.table.get(peer.Name); ok && n.State == StateSuspect && !n.Local {
		d.m.recheck(n)
	}
	return nil
}

// NotifyConflict is memberlist telling that a node alive in the cluster has the
// name of a node it knows at another address; it keeps the one it knew. When that
// name is this node's own, this node is the duplicate (or the one the duplicate
// imitates): [Membership.Join] reports it.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	addr := net.JoinHostPort(other.Addr.String(), strconv.Itoa(int(other.Port)))
	if existing.Name == d.m.cfg.Name {
		d.m.conflict.CompareAndSwap(nil, &addr)
	}
	d.m.log.Warn("two nodes claim one name; the one known first keeps it", "name", other.Name, "other", addr)
}

func (d *delegate) NodeMeta(limit int) []byte {
	b := *d.m.encoded.Load()
	if len(b) > limit { // cannot happen: Encode enforces MaxMetaSize
		return nil
	}
	return b
}

// NotifyMsg receives the messages nodes send this one directly: a leaving
// node's notice (see tellLeaving). It must not block.
func (d *delegate) NotifyMsg(b []byte) {
	if len(b) > 1 && b[0] == leaveNotice && ValidName(string(b[1:])) {
		d.m.log.Debug("node says it is leaving", "node", string(b[1:]))
		d.m.noteLeaving(string(b[1:]))
	}
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) node(n *memberlist.Node) Node {
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		d.m.log.Warn("ignoring node metadata", "node", n.Name, "err", err)
	}
	return Node{
		Name:  n.Name,
		Addr:  net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))),
		Meta:  meta,
		Local: n.Name == d.m.cfg.Name,
	}
}

func (d *delegate) NotifyJoin(mn *memberlist.Node) {
	n := d.node(mn)
	d.m.forgetLeaving(n.Name) // a new life
	if d.m.release(n.Name) {
		// It refuted a death another node reported before this one recorded
		// it: to this node it never went away.
		d.m.log.Debug("a death reported by another node was refuted", "node", n.Name)
		d.m.table.update(n.Name, func(t *Node) { t.Meta, t.Addr = n.Meta, n.Addr })
		return
	}
	n.State, n.Since = StateAlive, time.Now()
	d.m.table.set(n)
	d.m.publish(EventJoin, n)
}

func (d *delegate) NotifyLeave(mn *memberlist.Node) {
	n := d.node(mn)
	left := n.Meta.Leaving || (n.Local && d.m.leaving.Load()) || d.m.saidLeaving(n.Name)
	if !left && !n.Local && d.m.cfg.DeadConfirm > 0 {
		if cur, ok := d.m.table.get(n.Name); ok && cur.State == StateAlive {
			d.m.hold(n)
			return
		}
	}
	d.m.gone(n, left)
}

// gone records that n left (left) or was declared dead, and says so.
func (m *Membership) gone(n Node, left bool) {
	now := time.Now()
	_, after, ok := m.table.update(n.Name, func(t *Node) {
		t.Meta, t.Since = n.Meta, now
		t.State = StateDead
		if left {
			t.State = StateLeft
		}
	})
	if !ok {
		return
	}
	if left {
		m.publish(EventLeave, after)
	} else {
		m.publish(EventFailed, after)
	}
}

// hold puts off recording the death of n, a node this one has not doubted:
// the verdict is another node's. A node that heals from a cut gossips the
// deaths it declared while alone, and the nodes it declared dead refute them a
// gossip round or two later. Recorded at once, each would be a false failure
// on every node it reached (a fence considered, a failure in the record, a
// voter replaced). Config.DeadConfirm later, unless the node refuted it
// meanwhile (see release), the death is recorded, unless the node answers
// (see settle).
func (m *Membership) hold(n Node) {
	m.heldMu.Lock()
	m.heldSeq++
	seq := m.heldSeq
	m.held[n.Name] = seq
	m.heldMu.Unlock()
	time.AfterFunc(m.cfg.DeadConfirm, func() { m.settle(n, seq, true) })
}

// settle ends the hold seq on the death of n, which no refutation released.
//
// A node that answers a ping is not dead: the report was stale and the node's
// refutation did not reach this one (gossip does not reach every node: see
// tellLeaving), or the node is leaving and not yet gone. On the first expiry
// this node then exchanges state with it, which brings this node the
// refutation or shows the node the report so that it refutes, and holds the
// death for one more Config.DeadConfirm. A death still held then is recorded,
// as a departure if the node said it was leaving.
func (m *Membership) settle(n Node, seq uint64, first bool) {
	select {
	case <-m.stop:
		return
	default:
	}
	if !m.holding(n.Name, seq) {
		return
	}
	if first && !m.saidLeaving(n.Name) && m.answers(n) {
		m.log.Info("a node reported dead answers: asking it how it is", "node", n.Name, "addr", n.Addr)
		if _, err := m.ml.Join([]string{n.Addr}); err != nil {
			m.log.Debug("state exchange with a node reported dead", "node", n.Name, "err", err)
		}
		time.AfterFunc(m.cfg.DeadConfirm, func() { m.settle(n, seq, false) })
		return
	}
	if m.endHold(n.Name, seq) {
		m.gone(n, m.saidLeaving(n.Name))
	}
}

// holding reports whether the hold seq on the death of name is still on.
func (m *Membership) holding(name string, seq uint64) bool {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	cur, ok := m.held[name]
	return ok && cur == seq
}

// endHold ends the hold seq on the death of name, and reports whether it was
// still on.
func (m *Membership) endHold(name string, seq uint64) bool {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	cur, ok := m.held[name]
	if ok && cur == seq {
		delete(m.held, name)
	}
	return ok && cur == seq
}

// answers pings n once and reports whether it acknowledged within
// Config.ProbeTimeout.
func (m *Membership) answers(n Node) bool {
	addr, err := net.ResolveUDPAddr("udp", n.Addr)
	if err != nil {
		return false
	}
	_, err = m.ml.Ping(n.Name, addr)
	return err == nil
}

// release ends the hold on the death of name, and reports whether there was one.
func (m *Membership) release(name string) bool {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	_, ok := m.held[name]
	delete(m.held, name)
	return ok
}

func (d *delegate) NotifyUpdate(mn *memberlist.Node) {
	n := d.node(mn)
	d.m.release(n.Name)
	now := time.Now()
	_, after, ok := d.m.table.update(n.Name, func(t *Node) {
		t.Meta, t.Addr = n.Meta, n.Addr
		if t.State != StateAlive { // a newer alive message: it refuted
			t.State, t.Since = StateAlive, now
		}
	})
	if ok {
		d.m.publish(EventUpdate, after)
	}
}

func (d *delegate) AckPayload() []byte { return nil }

func (d *delegate) NotifyPingComplete(mn *memberlist.Node, rtt time.Duration, _ []byte) {
	now := time.Now()
	before, after, ok := d.m.table.update(mn.Name, func(t *Node) {
		t.RTT = rtt
		if t.State == StateSuspect {
			t.State, t.Since = StateAlive, now
		}
	})
	if ok && before.State == StateSuspect && after.State == StateAlive {
		d.m.publish(EventAlive, after)
	}
}

// defaultIPv4 returns the address to announce when bound to 0.0.0.0: the first
// private IPv4 address of an interface that is up, else its first global IPv4
// address, else "" (memberlist's choice, which may be an IPv6 address even
// though the node listens on IPv4 only).
func defaultIPv4() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	var global string
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.To4() == nil || !ipn.IP.IsGlobalUnicast() {
				continue
			}
			if ipn.IP.IsPrivate() {
				return ipn.IP.String()
			}
			if global == "" {
				global = ipn.IP.String()
			}
		}
	}
	return global
}

// withPort adds DefaultPort to an address that has no port.
func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(DefaultPort))
}

// unwrapNet shortens "dial tcp 1.2.3.4:5: connect: connection refused" to its
// innermost cause.
func unwrapNet(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
