package membership

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

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
