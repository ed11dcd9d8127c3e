package membership

import (
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"
)

// MinSecretLen is the shortest cluster secret accepted, in bytes.
const MinSecretLen = 16

// Config says who this node is, where it gossips and how quickly the failure
// detector decides. Start from a preset ([DefaultLANConfig], [DefaultWiFiConfig],
// [DefaultLocalConfig]) and change what differs. The timing fields map one to one
// onto hashicorp/memberlist's fields of the same name.
//
// How long a silent node takes to be declared dead: memberlist probes one node per
// ProbeInterval, so a node is first probed at most about 2×(N−1)×ProbeInterval after
// it went silent (N live nodes). When a probe, its IndirectChecks indirect probes
// and a TCP fallback all fail within ProbeInterval, the node becomes suspect.
// It is declared dead after the suspicion timeout, which lies between
//
//	min = SuspicionMult × max(1, log10(N)) × ProbeInterval
//	max = SuspicionMaxTimeoutMult × min
//
// starting at max and shrinking towards min as other nodes independently confirm
// the suspicion (min directly when N ≤ 2 or SuspicionMult ≤ 2).
// [Config.SuspicionTimeout] computes both.
type Config struct {
	// Name identifies the node in the cluster and must be unique in it: 1 to 63
	// bytes of [A-Za-z0-9._-]. Presets use the host name.
	Name string

	// BindAddr and BindPort are where gossip listens (UDP and TCP, same port).
	// BindAddr must be an IP address; 0.0.0.0 listens on every interface.
	// BindPort 0 picks a free port (tests); the port chosen is in [Membership.Addr].
	BindAddr string
	BindPort int

	// AdvertiseAddr and AdvertisePort are what the other nodes use to reach this
	// one, when that differs from the bind address (NAT, port forwarding). Empty
	// and 0: the bind address; when bound to 0.0.0.0, the first private IPv4
	// address of an interface that is up, else its first global IPv4 address.
	AdvertiseAddr string
	AdvertisePort int

	// Secret is the cluster secret. Gossip is encrypted and authenticated with
	// AES-256-GCM under DeriveGossipKey(Secret); a node with another secret can
	// neither join nor read anything. At least MinSecretLen bytes.
	Secret []byte

	// ProbeInterval is the time between two failure-detector probes of this node
	// (one random other node per probe). Shorter detects failures sooner and costs
	// more packets.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for its ack before asking
	// IndirectChecks other nodes to probe. Set it above the network's worst
	// normal round-trip time; at most ProbeInterval.
	ProbeTimeout time.Duration
	// IndirectChecks is how many other nodes probe a node on this node's behalf
	// when the direct probe failed. More tolerates more lossy paths.
	IndirectChecks int
	// SuspicionMult scales the suspicion timeout (formula above). Larger gives a
	// slow or briefly unreachable node more time to refute before being declared dead.
	SuspicionMult int
	// SuspicionMaxTimeoutMult is the ratio of the longest to the shortest
	// suspicion timeout (formula above): the timeout used while no other node
	// confirms the suspicion. At least 1.
	SuspicionMaxTimeoutMult int
	// RetransmitMult: each gossip message is retransmitted
	// RetransmitMult × ceil(log10(N+1)) times.
	RetransmitMult int
	// GossipInterval is the time between gossip rounds; each round sends queued
	// messages to GossipNodes random nodes.
	GossipInterval time.Duration
	GossipNodes    int
	// GossipToTheDeadTime is how long dead nodes keep receiving gossip, so that a
	// node wrongly declared dead learns it and refutes.
	GossipToTheDeadTime time.Duration
	// PushPullInterval is the time between full state exchanges (TCP) with one
	// random node; they repair anything gossip lost. 0 disables them.
	PushPullInterval time.Duration
	// TCPTimeout bounds TCP exchanges: joins, push/pull, TCP fallback probes.
	TCPTimeout time.Duration
	// AwarenessMaxMultiplier caps how far this node slows its own probing when it
	// sees signs that it is itself the slow one (missed acks, refutations): probe
	// interval and timeout are multiplied by at most this value. At least 1.
	AwarenessMaxMultiplier int
	// DeadNodeReclaimTime is how long after a node died or left its name may be
	// taken by a node at another address (a phone that got a new DHCP lease).
	// 0: never; the name then stays bound to the old address until memberlist
	// forgets the dead node.
	DeadNodeReclaimTime time.Duration

	// ReconnectInterval is how often this node tries to join again each node it holds
	// dead (not departed ones). Once both sides of a cut link have declared each other
	// dead, memberlist never probes them again; without these attempts a phone that
	// was off the Wi-Fi for 20 s would never rejoin. 0 disables reconnecting.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long after its death a node is still tried.
	ReconnectTimeout time.Duration

	// ForgetAfter is how long dead and departed nodes stay in the node table
	// ([Membership.Nodes]) for display. 0 keeps them until they come back.
	ForgetAfter time.Duration
	// DeadConfirm is how long this node waits, when another node reports the
	// death of one this node has not doubted, for the reported node to refute
	// it before recording it. A node healing from a cut gossips the deaths it
	// declared alone; their subjects refute them a gossip round or two later.
	// A node that answers a ping when the wait ends is asked for its state and
	// given one more DeadConfirm. 0 records every death at once.
	DeadConfirm time.Duration
	// LeaveTimeout bounds [Membership.Leave]: spreading this node's "leaving"
	// flag, then its leave message.
	LeaveTimeout time.Duration
}

// DefaultLANConfig is for wired or good Wi-Fi networks of up to a few hundred
// nodes: a silent node is suspect within about 2 s and dead about 3 s later
// (3 nodes, min suspicion timeout), 12 s if no other node confirms.
func DefaultLANConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Name:                    host,
		BindAddr:                "0.0.0.0",
		BindPort:                7946,
		ProbeInterval:           time.Second,
		ProbeTimeout:            500 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 4,
		RetransmitMult:          4,
		GossipInterval:          200 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDeadTime:     30 * time.Second,
		PushPullInterval:        30 * time.Second,
		TCPTimeout:              10 * time.Second,
		AwarenessMaxMultiplier:  8,
		DeadNodeReclaimTime:     5 * time.Second,
		ReconnectInterval:       2 * time.Second,
		ReconnectTimeout:        time.Hour,
		ForgetAfter:             time.Hour,
		LeaveTimeout:            5 * time.Second,
		DeadConfirm:             2 * time.Second,
	}
}

// DefaultWiFiConfig is for lossy, slow networks (phones and tablets on Wi-Fi, radio
// power saving, RTTs of hundreds of ms): probes wait longer, more nodes probe
// indirectly, and suspicion lasts longer, so a node that misses one probe, or
// sleeps its radio for a few seconds, is not declared dead. A silent node is dead
// after about 12 s (min suspicion timeout) to 72 s.
func DefaultWiFiConfig() Config {
	c := DefaultLANConfig()
	c.ProbeInterval = 2 * time.Second
	c.ProbeTimeout = 1500 * time.Millisecond
	c.IndirectChecks = 5
	c.SuspicionMult = 6
	c.SuspicionMaxTimeoutMult = 6
	c.RetransmitMult = 6
	c.GossipInterval = 300 * time.Millisecond
	c.GossipNodes = 4
	c.GossipToTheDeadTime = 60 * time.Second
	c.TCPTimeout = 20 * time.Second
	c.DeadNodeReclaimTime = 10 * time.Second
	c.LeaveTimeout = 10 * time.Second
	c.DeadConfirm = 4 * time.Second
	return c
}

// DefaultLocalConfig is for several agents on one machine (loopback, tests): a
// killed node is dead within about a second.
func DefaultLocalConfig() Config {
	c := DefaultLANConfig()
	c.BindAddr = "127.0.0.1"
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.IndirectChecks = 1
	c.SuspicionMult = 2
	c.SuspicionMaxTimeoutMult = 2
	c.RetransmitMult = 3
	c.GossipInterval = 50 * time.Millisecond
	c.GossipToTheDeadTime = 5 * time.Second
	c.PushPullInterval = 5 * time.Second
	c.TCPTimeout = 2 * time.Second
	c.AwarenessMaxMultiplier = 4
	c.DeadNodeReclaimTime = time.Second
	c.LeaveTimeout = 2 * time.Second
	c.DeadConfirm = 500 * time.Millisecond
	return c
}

// Profile returns the preset named lan, wifi or local.
func Profile(name string) (Config, error) {
	switch name {
	case "lan":
		return DefaultLANConfig(), nil
	case "wifi":
		return DefaultWiFiConfig(), nil
	case "local":
		return DefaultLocalConfig(), nil
	}
	return Config{}, fmt.Errorf("%w: unknown profile %q (want lan, wifi or local)", ErrInvalidConfig, name)
}

// SuspicionTimeout returns the shortest and longest time a suspect node is given
// to refute before it is declared dead, in a cluster of n live nodes.
func (c Config) SuspicionTimeout(n int) (shortest, longest time.Duration) {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	shortest = time.Duration(float64(c.SuspicionMult) * scale * float64(c.ProbeInterval))
	return shortest, time.Duration(c.SuspicionMaxTimeoutMult) * shortest
}

// Validate reports every field that has an unusable value, naming the field and
// the value, in one error ("; " between fields) that wraps [ErrInvalidConfig],
// or [ErrSecretTooShort] when the secret is the only problem.
func (c Config) Validate() error {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	if !ValidName(c.Name) {
		bad("Name %q: want 1 to 63 bytes of letters, digits, '.', '_' or '-'", c.Name)
	}
	if net.ParseIP(c.BindAddr) == nil {
		bad("BindAddr %q: want an IP address", c.BindAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		bad("BindPort %d: want 0 to 65535", c.BindPort)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		bad("AdvertiseAddr %q: want an IP address or empty", c.AdvertiseAddr)
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		bad("AdvertisePort %d: want 0 to 65535", c.AdvertisePort)
	}
	shortSecret := len(c.Secret) < MinSecretLen
	if shortSecret {
		bad("Secret has %d bytes, want at least %d", len(c.Secret), MinSecretLen)
	}
	if c.ProbeInterval <= 0 {
		bad("ProbeInterval %v: want > 0", c.ProbeInterval)
	}
	if c.ProbeTimeout <= 0 || c.ProbeTimeout > c.ProbeInterval {
		bad("ProbeTimeout %v: want > 0 and at most ProbeInterval (%v)", c.ProbeTimeout, c.ProbeInterval)
	}
	positive := []struct {
		name string
		v    int
		min  int
	}{
		{"IndirectChecks", c.IndirectChecks, 0},
		{"SuspicionMult", c.SuspicionMult, 1},
		{"SuspicionMaxTimeoutMult", c.SuspicionMaxTimeoutMult, 1},
		{"RetransmitMult", c.RetransmitMult, 1},
		{"GossipNodes", c.GossipNodes, 1},
		{"AwarenessMaxMultiplier", c.AwarenessMaxMultiplier, 1},
	}
	for _, p := range positive {
		if p.v < p.min {
			bad("%s %d: want at least %d", p.name, p.v, p.min)
		}
	}
	if c.GossipInterval <= 0 {
		bad("GossipInterval %v: want > 0", c.GossipInterval)
	}
	if c.TCPTimeout <= 0 {
		bad("TCPTimeout %v: want > 0", c.TCPTimeout)
	}
	if c.LeaveTimeout <= 0 {
		bad("LeaveTimeout %v: want > 0", c.LeaveTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"GossipToTheDeadTime", c.GossipToTheDeadTime},
		{"PushPullInterval", c.PushPullInterval},
		{"DeadNodeReclaimTime", c.DeadNodeReclaimTime},
		{"ForgetAfter", c.ForgetAfter},
		{"ReconnectInterval", c.ReconnectInterval},
		{"ReconnectTimeout", c.ReconnectTimeout},
		{"DeadConfirm", c.DeadConfirm},
	} {
		if d.v < 0 {
			bad("%s %v: want ≥ 0", d.name, d.v)
		}
	}
	switch {
	case len(problems) == 1 && shortSecret:
		return fmt.Errorf("%w: %s", ErrSecretTooShort, problems[0])
	case len(problems) > 0:
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(problems, "; "))
	}
	return nil
}

// ValidName reports whether s can name a node: 1 to 63 bytes of [A-Za-z0-9._-].
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}
