package links

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"syscall"
	"time"
)

// Result is what a node met when it last opened a TCP connection to a peer's
// API address: the connection made, or how it failed. A refusal, a silence or
// a route refused is a fact about the pair in that direction, as a NAT or a
// firewall makes it, not a link nobody measured.
type Result string

// The results of a connect.
const (
	// Reachable: the connection was made.
	Reachable Result = "reachable"
	// Refused: the peer's machine answered with a reset (nothing listens, or
	// a firewall rejects the connection).
	Refused Result = "refused"
	// TimedOut: no answer to the connection's first packet within the check's
	// time (a firewall or a NAT drops it, or the peer is gone).
	TimedOut Result = "timed-out"
	// NoRoute: the network said the peer cannot be reached (an ICMP host or
	// network unreachable, or no route on this node).
	NoRoute Result = "no-route"
)

// Connects reports whether the connection was made.
func (r Result) Connects() bool { return r == Reachable }

// String is the result in the words of `shoal nodes --links`.
func (r Result) String() string {
	switch r {
	case TimedOut:
		return "timed out"
	case NoRoute:
		return "no route"
	}
	return string(r)
}

// Reach is the last connect a node made to a peer (Link.Reach): its result and
// when it was made.
type Reach struct {
	Result  Result    `json:"result"`
	Checked time.Time `json:"checked"`
}

// Classify turns the error of a connect into its result; ok is false when err
// says nothing of the pair (the check cancelled, or failing on this node, as
// with too many open files), so that no fact is recorded.
func Classify(err error) (r Result, ok bool) {
	var ne net.Error
	switch {
	case err == nil:
		return Reachable, true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return Refused, true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return NoRoute, true
	case errors.Is(err, context.Canceled):
		return "", false
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return TimedOut, true
	}
	return "", false
}

// Fresh reports whether r is a fact still: checked no longer than maxAge
// before now. A node checks its live peers every round, so an older fact is
// of a check that stopped (its node left, or stopped answering) and tells
// nothing of the pair now.
func (r *Reach) Fresh(now time.Time, maxAge time.Duration) bool {
	return r != nil && !r.Checked.IsZero() && now.Sub(r.Checked) <= maxAge
}

// FreshReach returns rows with the facts older than maxAge at now taken out
// ([Reach.Fresh]), and the rows that carried nothing else left out.
func FreshReach(rows []Link, now time.Time, maxAge time.Duration) []Link {
	out := make([]Link, 0, len(rows))
	for _, l := range rows {
		if l.Reach != nil && !l.Reach.Fresh(now, maxAge) {
			l.Reach = nil
		}
		if l.Reach == nil && l.Unmeasured() {
			continue
		}
		out = append(out, l)
	}
	return out
}

// Pair is one direction between two nodes.
type Pair struct{ From, To string }

// Matrix is the reachability of each direction the rows tell: the newest
// fresh fact of each ordered pair (rows may come from several reads of a
// node's row), links to itself left out. An estimated link's Reach is its
// direction's own fact ([Complete]).
func Matrix(rows []Link, now time.Time, maxAge time.Duration) map[Pair]Reach {
	m := map[Pair]Reach{}
	for _, l := range rows {
		if l.From == l.To || !l.Reach.Fresh(now, maxAge) {
			continue
		}
		k := Pair{l.From, l.To}
		if old, ok := m[k]; !ok || l.Reach.Checked.After(old.Checked) {
			m[k] = *l.Reach
		}
	}
	return m
}

// Block is a direction in which a node could not open a connection to a peer,
// with what the peer met the other way, when it checked.
type Block struct {
	From, To string
	Reach    Reach
	Back     *Reach // To's last connect to From; nil when not known
}

// OneWay reports whether the other direction connects: From cannot reach To
// but To reaches From, as when To is behind a NAT or a firewall that lets out
// what it does not let in.
func (b Block) OneWay() bool { return b.Back != nil && b.Back.Result.Connects() }

// Describe is b in the words of `shoal nodes --links`: "n2 -> n3 timed out 12s
// ago; n3 -> n2 reachable (one way only)".
func (b Block) Describe(now time.Time) string {
	s := fmt.Sprintf("%s -> %s %s %s ago", b.From, b.To, b.Reach.Result, now.Sub(b.Reach.Checked).Round(time.Second))
	switch {
	case b.Back == nil:
		return s + fmt.Sprintf("; %s -> %s not checked", b.To, b.From)
	case b.OneWay():
		return s + fmt.Sprintf("; %s -> %s reachable (one way only)", b.To, b.From)
	}
	return s + fmt.Sprintf("; %s -> %s %s too", b.To, b.From, b.Back.Result)
}

// Blocks lists the directions of m that do not connect, by From then To.
func Blocks(m map[Pair]Reach) []Block {
	var out []Block
	for k, r := range m {
		if r.Result.Connects() {
			continue
		}
		b := Block{From: k.From, To: k.To, Reach: r}
		if back, ok := m[Pair{k.To, k.From}]; ok {
			b.Back = &back
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}
