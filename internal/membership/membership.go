package membership

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strconv"
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
	// No compression: memberlist compresses every packet it sends, probes and
	// acks too, with a new LZW writer each (a 64 KiB table allocated and
	// cleared), and a gossip packet's size is bounded before it is compressed,
	// so compressing saves bytes on the wire and carries no more news. On 128
	// testbed hosts in a launch, the compression and the collection of its
	// garbage were a fifth of the agents' CPU. A node still reads a compressed
	// packet from one that sends them.
	mc.EnableCompression = false
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

// NodesAt returns the nodes whose agent's API address is api, alive or not
// (more than one when a node that is gone had the address), sorted by name.
func (m *Membership) NodesAt(api string) []Node { return m.table.at(api) }

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
			alive := m.aliveInMemberlist()
			for _, n := range m.table.list() {
				if n.State != StateDead || n.Local || now.Sub(n.Since) > m.cfg.ReconnectTimeout {
					continue
				}
				if a, ok := alive[n.Name]; ok {
					m.revive(a)
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

// aliveInMemberlist are the nodes memberlist holds alive, by name.
func (m *Membership) aliveInMemberlist() map[string]Node {
	alive := map[string]Node{}
	d := &delegate{m: m}
	for _, mn := range m.ml.Members() {
		if mn.State == memberlist.StateAlive {
			alive[mn.Name] = d.node(mn)
		}
	}
	return alive
}

// revive records name alive again, a node this one holds dead while memberlist
// holds it alive: memberlist told of its death and never of its return (at
// 128 testbed hosts under load, a node stayed dead in one node's table for
// minutes while every state exchange with it said alive, which is no news to
// memberlist and so no callback). A death still held is left to settle.
func (m *Membership) revive(n Node) {
	name := n.Name
	m.heldMu.Lock()
	_, held := m.held[name]
	m.heldMu.Unlock()
	if held {
		return
	}
	now := time.Now()
	before, after, ok := m.table.update(name, func(t *Node) {
		if t.State == StateDead {
			t.State, t.Since, t.Meta, t.Addr = StateAlive, now, n.Meta, n.Addr
		}
	})
	if ok && before.State == StateDead && after.State == StateAlive {
		m.log.Warn("a node held dead is alive in memberlist's view; recorded alive again", "node", name)
		m.publish(EventJoin, after)
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
