package overlay

import "net/netip"

// Member is a node of the cluster as the overlay sees it: its name and the
// overlay address it announces.
type Member struct {
	Name string
	Addr netip.Addr
}

// Table maps an overlay address to the node that owns it. Build it with
// [NewTable]; it is immutable, so safe for concurrent use.
type Table struct {
	byAddr map[netip.Addr]string
}

// NewTable is the table of members: where two announce the same address (for
// the moment one of them takes to move, see [Choose]), the one of the smaller
// name owns it. Members without a valid address in [Prefix] are left out.
func NewTable(members []Member) *Table {
	t := &Table{byAddr: make(map[netip.Addr]string, len(members))}
	for _, m := range members {
		if !m.Addr.IsValid() || !Prefix.Contains(m.Addr) {
			continue
		}
		if cur, ok := t.byAddr[m.Addr]; !ok || m.Name < cur {
			t.byAddr[m.Addr] = m.Name
		}
	}
	return t
}

// Owner is the node that owns addr.
func (t *Table) Owner(addr netip.Addr) (string, bool) {
	name, ok := t.byAddr[addr]
	return name, ok
}

// Addr is the address node owns, if it owns one.
func (t *Table) Addr(node string) (netip.Addr, bool) {
	for a, n := range t.byAddr {
		if n == node {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Taken is the table as [Choose] reads it.
func (t *Table) Taken() map[netip.Addr]string { return t.byAddr }

// Destination and Source are an IP packet's addresses; ok is false for a
// packet too short for its header or of no IP version overlays carry (4).
func Destination(pkt []byte) (netip.Addr, bool) { return addrAt(pkt, 16) }

// Source: see [Destination].
func Source(pkt []byte) (netip.Addr, bool) { return addrAt(pkt, 12) }

func addrAt(pkt []byte, off int) (netip.Addr, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(pkt[off : off+4])), true
}
