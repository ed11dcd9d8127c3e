package testbed

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// blockTable is the nftables table in a host's network namespace that holds its
// blocks; nothing else of the testbed uses nftables.
const blockTable = "shoal_testbed"

// blockRules is the nftables script that makes a host's blocks what from
// says: a TCP segment from one of the addresses with SYN and without ACK (a
// connection's opening) is dropped as it comes in, so the peer's connect times
// out, as behind a NAT or a firewall that drops; the host's own connections to
// the peer (whose answers carry ACK) and those already made pass. From the
// addresses of cut, every TCP segment is answered with a reset: a pair
// blocked both ways has no connection at all, as two sites behind NATs have
// none, so those made before the block (an API client's kept-alive one, a
// tunnel) end as soon as either side sends, instead of hanging as a silently
// dropped one would for the minutes TCP retransmits; resets themselves pass,
// so that each side's socket hears the other's rule. The table is
// made, removed and made again in one transaction, so that the script is the
// whole truth whatever was there before; with no address it is only removed.
func blockRules(from, cut []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\n", blockTable, blockTable)
	if len(from) == 0 && len(cut) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "table inet %s {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n", blockTable)
	if len(from) > 0 {
		fmt.Fprintf(&b, "\t\tip saddr { %s } tcp flags & (syn | ack) == syn drop\n", strings.Join(from, ", "))
	}
	if len(cut) > 0 {
		fmt.Fprintf(&b, "\t\tip saddr { %s } tcp flags & rst == 0 reject with tcp reset\n", strings.Join(cut, ", "))
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// Block drops the new TCP connections from peer to node (`shoal testbed block NODE
// --from PEER`): peer's connects to node time out, while node's connects to peer and
// the connections made before pass, as when node is behind a NAT or a firewall that
// lets out what it does not let in. UDP (membership's gossip) passes. Once node is
// blocked from peer and peer from node (`--both-ways`), each side's TCP from the other
// is answered with a reset instead: their connects are refused, and the connections
// made before end ([blockRules]). On a testbed with sites, node and peer may each be a
// site, s1, s2, …: every host of peer is blocked from every host of node, as a site
// behind a NAT or a firewall is from another. It needs nft (Debian's nftables,
// scripts/deps.sh).
func (b *Bed) Block(ctx context.Context, node, peer string) error {
	return b.setBlock(ctx, node, peer, true)
}

// Unblock lets peer's new connections to node through again after [Bed.Block].
func (b *Bed) Unblock(ctx context.Context, node, peer string) error {
	return b.setBlock(ctx, node, peer, false)
}

func (b *Bed) setBlock(ctx context.Context, node, peer string, block bool) error {
	unlock, err := lock(b.n)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := loadState(b.n)
	if err != nil {
		return err
	}
	changed, err := st.setBlocks(node, peer, block)
	if err != nil {
		return err
	}
	for _, h := range changed {
		if err := b.applyBlocks(ctx, st, h); err != nil {
			return err
		}
	}
	return st.save(b.n)
}

// setBlocks records in each host of node (a host, or a site sK) which of peer's
// hosts it is blocked from, or no longer, and returns the hosts whose rules
// change: those of both groups, since a pair's rules on each side depend on
// whether it is blocked both ways.
func (s *state) setBlocks(node, peer string, block bool) ([]*Host, error) {
	hs, err := s.group(node)
	if err != nil {
		return nil, err
	}
	ps, err := s.group(peer)
	if err != nil {
		return nil, err
	}
	if len(hs) == 1 && len(ps) == 1 && hs[0] == ps[0] {
		return nil, fmt.Errorf("testbed: %s cannot be blocked from itself", hs[0].Name)
	}
	var changed []*Host
	for _, h := range hs {
		for _, p := range ps {
			if p == h {
				continue
			}
			i := slices.Index(h.BlockedFrom, p.Name)
			switch {
			case block && i < 0:
				h.BlockedFrom = append(h.BlockedFrom, p.Name)
				slices.Sort(h.BlockedFrom)
			case !block && i >= 0:
				h.BlockedFrom = slices.Delete(h.BlockedFrom, i, i+1)
			}
		}
	}
	for _, x := range append(slices.Clone(hs), ps...) {
		if !slices.Contains(changed, x) {
			changed = append(changed, x)
		}
	}
	return changed, nil
}

// group returns the hosts name stands for: the host it names, or on a
// testbed with sites, every host of site sK.
func (s *state) group(name string) ([]*Host, error) {
	if k, ok := strings.CutPrefix(name, "s"); ok && s.Sites > 0 {
		if i, err := strconv.Atoi(k); err == nil {
			if i < 1 || i > s.Sites {
				return nil, fmt.Errorf("%w: site %q (the testbed has s1 to s%d)", ErrUnknownNode, name, s.Sites)
			}
			var hs []*Host
			for j := range s.Hosts {
				if s.Hosts[j].Site == i {
					hs = append(hs, &s.Hosts[j])
				}
			}
			return hs, nil
		}
	}
	h, err := s.host(name)
	if err != nil {
		return nil, err
	}
	return []*Host{h}, nil
}

// applyBlocks makes host h's blocks those its BlockedFrom names, at the peers'
// present addresses.
func (b *Bed) applyBlocks(ctx context.Context, st *state, h *Host) error {
	var ips, cut []string
	for _, name := range h.BlockedFrom {
		p, err := st.host(name)
		if err != nil {
			return err
		}
		if slices.Contains(p.BlockedFrom, h.Name) {
			cut = append(cut, p.IP)
		} else {
			ips = append(ips, p.IP)
		}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("testbed: blocking connections needs nft (apt-get install nftables, or scripts/deps.sh): %w", err)
	}
	// The rules go to nft on its standard input: no file that a job in the
	// host could have replaced.
	if _, err := b.n.shIn(ctx, blockRules(ips, cut), "ip", "netns", "exec", h.Netns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("testbed: blocks of %s from %v: %w", h.Name, h.BlockedFrom, err)
	}
	return nil
}
