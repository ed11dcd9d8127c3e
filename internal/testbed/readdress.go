package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// ErrNoFreeAddress is returned by [Bed.Readdress] when every address of the testbed's
// subnet is taken.
var ErrNoFreeAddress = errors.New("testbed: no free address in the subnet")

// readdressBase is where the default new address of host nK starts: 10.77.I.(100+K),
// away from the addresses up and add give (10+K) on a testbed of a few hosts.
const readdressBase = 100

// chooseAddr returns the address host k moves to: to when given (an IPv4 address of the
// subnet net24.0/24 that no host and not the bridge holds), else the first free one of
// net24.(100+k), net24.(101+k), …, wrapping round from .254 to .2. taken holds the
// addresses of the testbed's hosts now.
func chooseAddr(net24 string, k int, to string, taken map[string]bool) (string, error) {
	bridge := net24 + ".1"
	if to != "" {
		ip := net.ParseIP(to).To4()
		if ip == nil {
			return "", fmt.Errorf("%w: --to %q: want an IPv4 address", ErrInvalidConfig, to)
		}
		prefix, last := ip.String()[:strings.LastIndexByte(ip.String(), '.')], int(ip[3])
		if prefix != net24 {
			return "", fmt.Errorf("%w: --to %s: not in the testbed's subnet %s.0/24", ErrInvalidConfig, to, net24)
		}
		if last < 2 || last > 254 {
			return "", fmt.Errorf("%w: --to %s: want a host address, %s.2 to %s.254", ErrInvalidConfig, to, net24, net24)
		}
		if ip.String() == bridge || taken[ip.String()] {
			return "", fmt.Errorf("%w: --to %s: the address is taken", ErrInvalidConfig, to)
		}
		return ip.String(), nil
	}
	for i := range 253 {
		last := 2 + (readdressBase+k-2+i)%253
		ip := fmt.Sprintf("%s.%d", net24, last)
		if !taken[ip] {
			return ip, nil
		}
	}
	return "", fmt.Errorf("%w (%s.0/24)", ErrNoFreeAddress, net24)
}

// Readdress gives node a new address on its link, as when a phone moves to another
// Wi-Fi: the old address is removed first (its connections lose their address), then
// the new one is added, to (see chooseAddr for the default). The state file records
// it, so that status, exec, kill and the others still find the host, by its name or by
// its new address. The node's processes are not told: its agent sees the change on
// its interface. It returns the host with its new address.
func (b *Bed) Readdress(ctx context.Context, node, to string) (Host, error) {
	unlock, err := lock(b.n)
	if err != nil {
		return Host{}, err
	}
	defer unlock()
	st, err := loadState(b.n)
	if err != nil {
		return Host{}, err
	}
	h, err := st.host(node)
	if err != nil {
		return Host{}, err
	}
	taken := map[string]bool{}
	for _, o := range st.Hosts {
		taken[o.IP] = true
	}
	ip, err := chooseAddr(b.n.net24(), h.Index, to, taken)
	if err != nil {
		return Host{}, err
	}
	steps := [][]string{
		{"ip", "-n", h.Netns, "addr", "del", h.IP + "/24", "dev", "eth0"},
		{"ip", "-n", h.Netns, "addr", "add", ip + "/24", "dev", "eth0"},
	}
	for _, s := range steps {
		if err := b.n.sh(ctx, s...); err != nil {
			return Host{}, fmt.Errorf("testbed: readdress %s from %s to %s: %w", h.Name, h.IP, ip, err)
		}
	}
	h.IP = ip
	// A host blocked from this one drops its new address's connections now.
	for i := range st.Hosts {
		if o := &st.Hosts[i]; slices.Contains(o.BlockedFrom, h.Name) {
			if err := b.applyBlocks(ctx, st, o); err != nil {
				return Host{}, err
			}
		}
	}
	if err := st.save(b.n); err != nil {
		return Host{}, err
	}
	return *h, nil
}
