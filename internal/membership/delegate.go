package membership

import (
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

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
