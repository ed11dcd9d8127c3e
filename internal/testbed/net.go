package testbed

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
)

// makeBridge creates the instance's bridge with its address. Bridged frames skip
// iptables (nf_call_* 0): a FORWARD policy of DROP, as Docker sets, must not cut the hosts
// off each other.
func makeBridge(ctx context.Context, n names) error {
	br := n.bridge()
	steps := [][]string{
		{"ip", "link", "add", br, "type", "bridge", "nf_call_iptables", "0", "nf_call_ip6tables", "0", "nf_call_arptables", "0"},
		{"ip", "addr", "add", n.bridgeIP() + "/24", "dev", br},
		{"ip", "link", "set", br, "up"},
	}
	for _, s := range steps {
		if err := n.sh(ctx, s...); err != nil {
			return fmt.Errorf("testbed: make bridge %s: %w", br, err)
		}
	}
	return nil
}

// makeSite creates site s's bridge and its link to the instance's bridge: a veth pair
// with a tbf at rate on each end, so that each direction between the site and the
// others is limited, and traffic inside the site never crosses it.
func makeSite(ctx context.Context, n names, s int, rate string) error {
	tbf, err := tbfArgs(rate)
	if err != nil {
		return err
	}
	br, out, in := n.siteBridge(s), n.siteOut(s), n.siteIn(s)
	steps := [][]string{
		{"ip", "link", "add", br, "type", "bridge", "nf_call_iptables", "0", "nf_call_ip6tables", "0", "nf_call_arptables", "0"},
		{"ip", "link", "set", br, "up"},
		{"ip", "link", "add", out, "type", "veth", "peer", "name", in},
		{"ip", "link", "set", out, "master", br},
		{"ip", "link", "set", in, "master", n.bridge()},
		{"ip", "link", "set", out, "up"},
		{"ip", "link", "set", in, "up"},
		append([]string{"tc", "qdisc", "replace", "dev", out, "root", "tbf"}, tbf...),
		append([]string{"tc", "qdisc", "replace", "dev", in, "root", "tbf"}, tbf...),
	}
	for _, st := range steps {
		if err := n.sh(ctx, st...); err != nil {
			return fmt.Errorf("testbed: make site %d: %w", s, err)
		}
	}
	return nil
}

// makeHostNet creates host k's network namespace, its veth pair (eth0 inside, the bridge
// port outside, named like the namespace, in bridge br), its address and its rate limit.
// With tap, the two ends are instead the TAP devices of the host's delay line
// ([RunLink]), which exist already: the host's end moves into the namespace as eth0.
func makeHostNet(ctx context.Context, n names, k int, br, rate string, tap bool) error {
	ns, link := n.netns(k), n.netns(k)
	pair := [][]string{{"ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns}}
	if tap {
		pair = [][]string{
			{"ip", "link", "set", n.hostTap(k), "netns", ns},
			{"ip", "-n", ns, "link", "set", n.hostTap(k), "name", "eth0"},
		}
	}
	steps := append([][]string{{"ip", "netns", "add", ns}}, pair...)
	steps = append(steps, [][]string{
		{"ip", "link", "set", link, "master", br},
		{"ip", "link", "set", link, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", n.hostIP(k) + "/24", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
	}...)
	if rate != "" {
		tbf, err := tbfArgs(rate)
		if err != nil {
			return err
		}
		steps = append(steps,
			append([]string{"tc", "qdisc", "replace", "dev", link, "root", "tbf"}, tbf...),
			append([]string{"tc", "-n", ns, "qdisc", "replace", "dev", "eth0", "root", "tbf"}, tbf...))
	}
	for _, s := range steps {
		if err := n.sh(ctx, s...); err != nil {
			return fmt.Errorf("testbed: make network of n%d: %w", k, err)
		}
	}
	return nil
}

// tbfArgs is a token bucket at rate, with a bucket of 10 ms of traffic (at least 16 KiB,
// so full-size and GSO packets pass) and up to 100 ms of queue.
func tbfArgs(rate string) ([]string, error) {
	bits, err := parseRate(rate)
	if err != nil {
		return nil, err
	}
	burst := int(math.Max(bits/8/100, 16*1024))
	return []string{"rate", rate, "burst", fmt.Sprint(burst), "latency", "100ms"}, nil
}

// setLink takes host k's bridge port down (the host is cut off: its frames vanish, as
// when a phone leaves the Wi-Fi, and nothing tells its connections) or up again.
func setLink(ctx context.Context, n names, k int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if err := n.sh(ctx, "ip", "link", "set", n.netns(k), state); err != nil {
		return fmt.Errorf("testbed: set link of n%d %s: %w", k, state, err)
	}
	return nil
}

// makeUTS creates host k's UTS namespace, kept by a bind mount at its uts file, with
// hostname nK.
func makeUTS(ctx context.Context, n names, k int) error {
	path := n.utsPath(k)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	if err := n.sh(ctx, "unshare", "--uts="+path, "hostname", n.hostName(k)); err != nil {
		return fmt.Errorf("testbed: make UTS namespace of n%d: %w", k, err)
	}
	return nil
}

// leftoverNet lists the instance's network namespaces and root-namespace links by host
// index, the sites whose bridge or link exists, and whether its bridge exists.
func leftoverNet(ctx context.Context, n names) (netns, links, sites map[int]bool, bridge bool) {
	netns, links, sites = map[int]bool{}, map[int]bool{}, map[int]bool{}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if k := n.hostIndex(e.Name()); k > 0 {
				netns[k] = true
			}
		}
	}
	out, _ := n.shOut(ctx, "ip", "-o", "link", "show")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if name == n.bridge() {
			bridge = true
		} else if k := n.hostIndex(name); k > 0 {
			links[k] = true
		} else if s := n.siteIndex(name); s > 0 {
			sites[s] = true
		}
	}
	return netns, links, sites, bridge
}

func (n names) linkExists(ctx context.Context, name string) bool {
	return n.sh(ctx, "ip", "link", "show", name) == nil
}
