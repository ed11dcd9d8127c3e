package api

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// MaxConnsPerPeer bounds the connections one IP address may hold open to an
// agent's API at once. A coordinator keeps one long poll per job it runs on the
// node, plus its calls in flight and its kept-alive idle ones (8 at most per
// client); 256 leaves room for a hundred jobs and bounds what one address, by
// mistake or on purpose, can take of the agent's descriptors and goroutines.
const MaxConnsPerPeer = 256

// limitPeers wraps l so that each remote IP holds at most max connections: one
// over the bound is closed as soon as it is accepted, which its client sees as
// the connection reset, and the agent logs it (at most once a minute per IP).
func limitPeers(l net.Listener, max int, log *slog.Logger) net.Listener {
	return &peerLimit{Listener: l, max: max, log: log, open: map[string]int{}, warned: map[string]time.Time{}}
}

type peerLimit struct {
	net.Listener
	max int
	log *slog.Logger

	mu     sync.Mutex
	open   map[string]int       // remote IP → connections open
	warned map[string]time.Time // remote IP → when a refusal was last logged (while it has connections)
}

func (l *peerLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		if l.admit(ip) {
			return &peerConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		c.Close()
	}
}

// admit counts a new connection from ip, or refuses it at the bound.
func (l *peerLimit) admit(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] < l.max {
		l.open[ip]++
		return true
	}
	if now := time.Now(); now.Sub(l.warned[ip]) > time.Minute {
		l.warned[ip] = now
		l.log.Warn("refused a connection: too many open from one address", "from", ip, "open", l.open[ip])
	}
	return false
}

func (l *peerLimit) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip) // and its refusals: the map holds only addresses with connections
		delete(l.warned, ip)
	}
}

// peerConn gives its slot back when closed, once, however often Close is called
// (by the HTTP server, or by a launch that took the connection over). It
// gathers the writes of a large answer (see gatherSize).
type peerConn struct {
	net.Conn
	once    sync.Once
	release func()
	gathers
}

func (c *peerConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
