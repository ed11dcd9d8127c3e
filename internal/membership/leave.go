package membership

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

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
