package overlay

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"strconv"
)

// Prefix is the overlay's network: the shared address space of RFC 6598, which
// LANs and home routers do not give their hosts, so it rarely collides with a
// node's own networks.
var Prefix = netip.MustParsePrefix("100.64.0.0/10")

// DeviceName is the name of every node's overlay device.
const DeviceName = "shoal0"

// hostBits is how many of an address's bits name the node within [Prefix].
const hostBits = 32 - 10

// Candidate is the attempt-th address (from 0) a node of that name tries:
// 22 bits of SHA-256(name, attempt) within [Prefix], never its first or last
// address. The same name gives the same candidates on every node and at every
// start, so a node keeps its address across restarts and moves.
func Candidate(name string, attempt int) netip.Addr {
	for salt := 0; ; salt++ {
		h := sha256.Sum256([]byte(name + "\x00" + strconv.Itoa(attempt) + "\x00" + strconv.Itoa(salt)))
		host := binary.BigEndian.Uint32(h[:4]) & (1<<hostBits - 1)
		if host == 0 || host == 1<<hostBits-1 {
			continue
		}
		base := Prefix.Addr().As4()
		v := binary.BigEndian.Uint32(base[:]) | host
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], v)
		return netip.AddrFrom4(b)
	}
}

// maxAttempts bounds the candidates [Choose] tries; 2^22 addresses make a
// node that needs more than a few of them a sign of a bug, not of bad luck.
const maxAttempts = 64

// Choose is the address a node of that name takes, given the addresses the
// other live nodes announce (taken: address → the node announcing it): its
// first candidate that no node of a smaller name announces. Two nodes that
// chose the same address at once (they joined together) agree without a word:
// the one of the greater name moves on to its next candidate when it sees the
// other's, and the smaller one keeps it. ok is false only if every candidate is
// held, which 2^22 addresses make a sign of a bug.
func Choose(name string, taken map[netip.Addr]string) (addr netip.Addr, ok bool) {
	for i := range maxAttempts {
		c := Candidate(name, i)
		if holder, held := taken[c]; !held || holder == name || holder > name {
			return c, true
		}
	}
	return netip.Addr{}, false
}
