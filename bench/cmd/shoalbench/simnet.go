package main

// The simulated network of shoalbench scalesim: memberlist's in-memory
// transport (memberlist.MockNetwork) with a wrapper per node that counts what
// the node sends and lets a node be killed. A killed node's packets and
// connections go nowhere, as a host that lost its power: its memberlist is shut
// down and whatever was already on its way to it is drained.
//
// Packets go through a queue per node instead of the mock's unbuffered
// channel: memberlist answers a ping from the goroutine that reads packets, so
// two nodes pinging each other at once would each wait for the other to read,
// for ever. A full queue drops the packet, as a full socket buffer does.

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// simNet holds every node's transport. Nodes are added before any starts:
// memberlist.MockNetwork's maps are not safe for concurrent use.
type simNet struct {
	mock   memberlist.MockNetwork
	byName map[string]*simTransport
	byAddr map[string]*simTransport
}

func newSimNet() *simNet {
	return &simNet{byName: map[string]*simTransport{}, byAddr: map[string]*simTransport{}}
}

// add returns a new node's transport.
func (n *simNet) add(name string) *simTransport {
	inner := n.mock.NewTransport(name)
	ip, port, _ := inner.FinalAdvertiseAddr("", 0)
	t := &simTransport{inner: inner, net: n, addr: net.JoinHostPort(ip.String(), fmt.Sprint(port)),
		from:    &net.UDPAddr{IP: ip, Port: port},
		packets: make(chan *memberlist.Packet, simQueue)}
	n.byName[name], n.byAddr[t.addr] = t, t
	return t
}

// simCounts is what one node sent: packets (memberlist's UDP: probes, acks,
// gossip) and stream bytes both ways on the connections it opened (TCP:
// push-pull state exchanges, joins, fallback probes).
type simCounts struct {
	packets, packetBytes, streams, streamBytes atomic.Int64
}

func (c *simCounts) snapshot() [4]int64 {
	return [4]int64{c.packets.Load(), c.packetBytes.Load(), c.streams.Load(), c.streamBytes.Load()}
}

// simQueue is how many packets a node's queue holds.
const simQueue = 1024

// simTransport is one node's memberlist transport.
type simTransport struct {
	inner   *memberlist.MockTransport
	net     *simNet
	addr    string
	from    net.Addr // the address its packets come from
	packets chan *memberlist.Packet
	dead    atomic.Bool
	counts  simCounts
	dropped atomic.Int64 // packets lost to a full queue
}

var _ memberlist.NodeAwareTransport = (*simTransport)(nil)

var errSimDead = errors.New("simulated node is dead")

// kill makes the node unreachable and deaf; call it before shutting its
// memberlist down, and drain after.
func (t *simTransport) kill() { t.dead.Store(true) }

// drain takes whatever a sender that looked before the kill still hands the
// dead node, so that no sender blocks on the unbuffered in-memory channels.
func (t *simTransport) drain(stop <-chan struct{}) {
	for {
		select {
		case <-t.packets:
		case c := <-t.inner.StreamCh():
			c.Close()
		case <-stop:
			return
		}
	}
}

func (t *simTransport) peer(a memberlist.Address) *simTransport {
	if a.Name != "" {
		return t.net.byName[a.Name]
	}
	return t.net.byAddr[a.Addr]
}

func (t *simTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *simTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *simTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.dead.Load() {
		return time.Now(), nil
	}
	t.counts.packets.Add(1)
	t.counts.packetBytes.Add(int64(len(b)))
	now := time.Now()
	p := t.peer(a)
	if p == nil || p.dead.Load() {
		return now, nil // lost on the way, as UDP to a dead host
	}
	select {
	case p.packets <- &memberlist.Packet{Buf: b, From: t.from, Timestamp: now}:
	default:
		p.dropped.Add(1)
	}
	return now, nil
}

func (t *simTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *simTransport) IngestPacket(conn net.Conn, addr net.Addr, now time.Time, shouldClose bool) error {
	return errors.New("simulated transport: no packets over streams")
}

func (t *simTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *simTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if p := t.peer(a); t.dead.Load() || p == nil || p.dead.Load() {
		return nil, errSimDead
	}
	c, err := t.inner.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	t.counts.streams.Add(1)
	return &countedConn{Conn: c, n: &t.counts.streamBytes}, nil
}

func (t *simTransport) StreamCh() <-chan net.Conn { return t.inner.StreamCh() }

func (t *simTransport) IngestStream(conn net.Conn) error { return t.inner.IngestStream(conn) }

func (t *simTransport) Shutdown() error { return t.inner.Shutdown() }

// countedConn counts the bytes of a connection both ways.
type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	c.n.Add(int64(k))
	return k, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	c.n.Add(int64(k))
	return k, err
}
