package agent

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"shoal/internal/node"
)

// MovedFile is the file in the data dir where an agent whose host moved to another
// address leaves its old gossip address for the agent that takes its place (see
// [Agent.Moved]): that one rejoins the cluster under the node's name, waiting for the
// others to let the name go from the old address.
const MovedFile = "moved"

// RoamInterval is how often the agent checks that its bind address is still its host's.
const RoamInterval = time.Second

// rejoinFor bounds how long a moved node tries to have the others take its new
// address: past it the node stays up, joined to whoever took it, and says so.
const rejoinFor = 5 * time.Minute

// Moved says where a host moved whose agent is bound to bound, given the addresses
// the bound interface has now: nowhere while bound is still among them, or while the
// interface has no other address of bound's family that others could reach (the host
// between two networks); else the first such address.
func Moved(bound net.IP, now []net.IP) (net.IP, bool) {
	if slices.ContainsFunc(now, bound.Equal) {
		return nil, false
	}
	for _, ip := range now {
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || (ip.To4() == nil) != (bound.To4() == nil) {
			continue
		}
		return ip, true
	}
	return nil, false
}

// Rejoined says whether every view asked (each the node list of another live node)
// lists the node name alive at addr, its gossip address now.
func Rejoined(name, addr string, views [][]node.Node) bool {
	if len(views) == 0 {
		return false
	}
	for _, v := range views {
		if !slices.ContainsFunc(v, func(n node.Node) bool { return n.Name == name && n.Addr == addr && n.State == "alive" }) {
			return false
		}
	}
	return true
}

// Moved yields the bind address (IP:PORT) the agent is to take once it has noticed that
// the host's address is gone and another took its place: on the same interface when
// the agent is bound to one address, on any when it is bound to every interface (then
// the bind address stays; the address it announces is the one that moved). The agent
// then leaves its old gossip address in [MovedFile] and does nothing more about it: its
// sockets are bound to an address the host no longer has, or announce one, so whoever
// runs it stops it (without leaving) and starts it again at the bind address yielded,
// with the same name and data dir (the shoal agent command executes itself again).
func (a *Agent) Moved() <-chan string { return a.moved }

// LivePeers returns the gossip addresses of the other nodes alive or suspect now.
func (a *Agent) LivePeers() []string {
	var out []string
	for _, n := range a.members.Nodes() {
		if !n.Local && n.State.Member() {
			out = append(out, n.Addr)
		}
	}
	return out
}

// watched is what an agent bound to bind (IP:PORT) and announcing gossip address
// advertised watches: the address whose loss is a move (its bind IP, or the announced
// one when bound to every interface), whether it may move to another interface (only
// when bound to every interface: a specific bind names an address of one interface),
// and the bind address the agent takes after a move to ip. ok is false when there is
// nothing to follow (loopback).
func watched(bind, advertised string) (addr net.IP, anyIface bool, rebind func(ip net.IP) string, ok bool) {
	host, port, _ := net.SplitHostPort(bind)
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, false, nil, false
	}
	if ip.IsUnspecified() {
		ah, _, _ := net.SplitHostPort(advertised)
		a := net.ParseIP(ah)
		if a == nil || a.IsLoopback() || a.IsUnspecified() {
			return nil, false, nil, false
		}
		return a, true, func(net.IP) string { return bind }, true
	}
	if ip.IsLoopback() {
		return nil, false, nil, false
	}
	return ip, false, func(n net.IP) string { return net.JoinHostPort(n.String(), port) }, true
}

// watchAddress follows the address the agent is reached at: see [Agent.Moved].
func (a *Agent) watchAddress(every time.Duration) {
	addr, anyIface, rebind, ok := watched(a.cfg.Bind, a.members.Addr())
	if !ok {
		return
	}
	iface := interfaceOf(addr)
	if iface == "" {
		a.log.Warn("no interface holds the node's address: a move to another address goes unnoticed", "address", addr.String())
		return
	}
	ips := func() []net.IP { return interfaceIPs(iface) }
	if anyIface {
		ips = allIPs
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-a.quit:
				return
			case <-t.C:
			}
			ip, ok := Moved(addr, ips())
			if !ok {
				continue
			}
			a.log.Warn("this host's address is gone: the agent starts again at its new one, under its name", "interface", iface, "old", addr.String(), "new", ip.String())
			if err := writeFileAtomic(filepath.Join(a.cfg.DataDir, MovedFile), []byte(a.members.Addr()+"\n"), 0o600); err != nil {
				a.log.Error("cannot record the move", "err", err)
			}
			a.moved <- rebind(ip)
			return
		}
	}()
}

// allIPs lists the addresses of the interfaces that are up, loopback aside.
func allIPs() []net.IP {
	ifs, _ := net.Interfaces()
	var out []net.IP
	for _, i := range ifs {
		if i.Flags&net.FlagUp != 0 && i.Flags&net.FlagLoopback == 0 {
			out = append(out, interfaceIPs(i.Name)...)
		}
	}
	return out
}

// interfaceOf is the name of the interface that holds ip, "" if none does.
func interfaceOf(ip net.IP) string {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if slices.ContainsFunc(interfaceIPs(i.Name), ip.Equal) {
			return i.Name
		}
	}
	return ""
}

func interfaceIPs(name string) []net.IP {
	i, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, _ := i.Addrs()
	var out []net.IP
	for _, ad := range addrs {
		if n, ok := ad.(*net.IPNet); ok {
			out = append(out, n.IP)
		}
	}
	return out
}

// takeMoved reads and removes [MovedFile]: the node's old gossip address when the
// agent before this one left because the host moved, else "".
func takeMoved(dataDir string) (string, error) {
	path := filepath.Join(dataDir, MovedFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if err := os.Remove(path); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// join joins the nodes at addrs, as a node that moved when the agent before this one
// left [MovedFile].
func (a *Agent) join(addrs []string) error {
	old, err := takeMoved(a.cfg.DataDir)
	if err != nil {
		return err
	}
	if old != "" && len(addrs) > 0 {
		return a.rejoinMoved(addrs, old)
	}
	return a.members.Join(addrs)
}

// rejoinMoved joins the cluster as a node that moved from old: a join refused because
// the others still hold the name at old is not an error, and joins are tried again
// every ReconnectInterval until every live node lists this one alive at its new
// address, for at most rejoinFor.
func (a *Agent) rejoinMoved(join []string, old string) error {
	taken, err := a.members.Rejoin(join)
	if err != nil {
		return err
	}
	a.log.Info("rejoining at a new address", "old", old, "new", a.members.Addr(), "name_held_at_old", taken)
	go func() {
		every := a.members.Config().ReconnectInterval
		if every <= 0 {
			every = 2 * time.Second
		}
		start := time.Now()
		for {
			select {
			case <-a.quit:
				return
			case <-time.After(every):
			}
			if a.rejoinedEverywhere() {
				a.log.Info("the cluster knows this node at its new address", "new", a.members.Addr(), "after", time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Since(start) > rejoinFor {
				a.log.Error("some nodes still hold this node at its old address; giving up rejoining", "old", old, "after", rejoinFor)
				return
			}
			if _, err := a.members.Rejoin(join); err != nil {
				a.log.Debug("rejoin", "err", err)
			}
		}
	}()
	return nil
}

// rejoinedEverywhere asks each other live node for its node list: see [Rejoined].
func (a *Agent) rejoinedEverywhere() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var views [][]node.Node
	for _, n := range a.members.Nodes() {
		if n.Local || !n.State.Member() || n.Meta.API == "" {
			continue
		}
		v, err := a.peers.Get(n.Meta.API).Nodes(ctx)
		if err != nil {
			return false
		}
		views = append(views, v)
	}
	return Rejoined(a.cfg.Name, a.members.Addr(), views)
}
