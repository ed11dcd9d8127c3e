package api

import (
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"
)

// MaxConnsPerPeer bounds the connections one IP address may hold open to an
// agent's API at once. A coordinator keeps one long poll per job it runs on the
// node, plus its calls in flight and its kept-alive idle ones (8 at most per
// client); 256 leaves room for a hundred jobs and bounds what one address, by
// mistake or on purpose, can take of the agent's descriptors and goroutines.
const MaxConnsPerPeer = 256

// DefaultMaxConnsPerUser bounds the connections one local user other than
// root and the agent's own may hold open on the agent's socket at once
// ([ServerConfig.MaxConnsPerUser]). A user's commands take one or two each
// (shoal run, following a job), but each of the user's jobs coordinated on
// the node holds one more per other node it runs on, for as long as it runs:
// its launcher's `shoal rsh` for that node's MPI daemon, relayed through this
// socket. 256 is the bound of one IP address on the network port, room for a
// job over 256 nodes; it keeps what one user, whatever processes they start,
// can take of the agent's descriptors to 256, where one process of theirs
// took 1019 when nothing bounded them.
const DefaultMaxConnsPerUser = 256

// peerOf says which peer a connection comes from (the remote IP, the local
// user) and how many connections that peer may hold open at once: 0 for no
// bound.
type peerOf func(net.Conn) (peer string, max int)

// byIP counts connections by remote IP address, each holding at most max.
func byIP(max int) peerOf {
	return func(c net.Conn) (string, int) {
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		return ip, max
	}
}

// byUser counts connections to a unix socket by the user the kernel gives for
// the process at the other end (SO_PEERCRED, read at accept), each holding at
// most max; root and the agent's own user are not bounded, as they may do
// anything else.
func byUser(max int) peerOf {
	return func(c net.Conn) (string, int) {
		cred, err := peerCred(c)
		if err != nil {
			return "a caller without credentials", max
		}
		if (&Caller{UID: int(cred.Uid)}).Privileged() {
			return "", 0
		}
		return "uid " + strconv.Itoa(int(cred.Uid)), max
	}
}

// limitPeers wraps l so that each peer (by peer) holds at most its bound of
// connections: one over it is closed as soon as it is accepted, which its
// client sees as the connection closed or reset, and the agent logs it (at
// most once a minute per peer).
func limitPeers(l net.Listener, peer peerOf, log *slog.Logger) net.Listener {
	return &peerLimit{Listener: l, peer: peer, log: log, open: map[string]int{}, warned: map[string]time.Time{}}
}

type peerLimit struct {
	net.Listener
	peer peerOf
	log  *slog.Logger

	mu     sync.Mutex
	open   map[string]int       // peer → connections open
	warned map[string]time.Time // peer → when a refusal was last logged (while it has connections)
}

func (l *peerLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer, max := l.peer(c)
		if max <= 0 {
			return &peerConn{Conn: c, release: func() {}}, nil
		}
		if l.admit(peer, max) {
			return &peerConn{Conn: c, release: func() { l.release(peer) }}, nil
		}
		c.Close()
	}
}

// admit counts a new connection from peer, or refuses it at the bound max.
func (l *peerLimit) admit(peer string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[peer] < max {
		l.open[peer]++
		return true
	}
	if now := time.Now(); now.Sub(l.warned[peer]) > time.Minute {
		l.warned[peer] = now
		l.log.Warn("refused a connection: too many open from one peer", "from", peer, "open", l.open[peer])
	}
	return false
}

func (l *peerLimit) release(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[peer]--; l.open[peer] <= 0 {
		delete(l.open, peer) // and its refusals: the map holds only peers with connections
		delete(l.warned, peer)
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
