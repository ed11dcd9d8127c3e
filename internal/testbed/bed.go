package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Bed is a handle on a testbed instance that is up. All its state is in the state file,
// so any number of Beds (in any processes) may refer to one testbed; methods that change
// it hold a file lock. A Bed is safe for concurrent use.
type Bed struct {
	n    names
	logf func(format string, args ...any)
}

// Open returns a handle on testbed instance inst, which an earlier [Up] (perhaps in another
// process) brought up, or an error wrapping [ErrNotUp].
func Open(inst int, logf func(format string, args ...any)) (*Bed, error) {
	if inst < 0 || inst > MaxInstance {
		return nil, fmt.Errorf("%w: Instance = %d: want 0 to %d", ErrInvalidConfig, inst, MaxInstance)
	}
	b := &Bed{n: names{inst}, logf: orDiscard(logf)}
	if _, err := loadState(b.n); err != nil {
		return nil, err
	}
	return b, nil
}

func orDiscard(logf func(string, ...any)) func(string, ...any) {
	if logf == nil {
		return func(string, ...any) {}
	}
	return logf
}

// IsRoot reports whether the caller may build a testbed.
func IsRoot() bool { return os.Geteuid() == 0 }

// Up brings up the testbed of cfg: it first removes whatever the same instance left behind
// ([Clean]), then makes the bridge, the hosts and, if cfg.AgentBinary is set, their agents.
// With agents it returns once every agent is up and has seen every host alive; an agent
// that exits or does not publish its address within 15 s, or agents that get no closer
// to seeing each other alive for 45 s, fail it with [ErrAgentNotReady]. When it fails,
// it removes what it made.
func Up(ctx context.Context, cfg Config) (*Bed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !IsRoot() {
		return nil, ErrNotRoot
	}
	b := &Bed{n: names{cfg.Instance}, logf: orDiscard(cfg.Logf)}
	unlock, err := lock(b.n)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := clean(ctx, b.n); err != nil {
		return nil, fmt.Errorf("testbed: remove the previous testbed: %w", err)
	}
	st, err := b.up(ctx, cfg)
	if err != nil {
		if cerr := clean(context.WithoutCancel(ctx), b.n); cerr != nil {
			err = errors.Join(err, fmt.Errorf("testbed: clean up after the failure: %w", cerr))
		}
		return nil, err
	}
	return b, st.save(b.n)
}

func (b *Bed) up(ctx context.Context, cfg Config) (*state, error) {
	n := b.n
	if err := n.makeDir(); err != nil {
		return nil, err
	}
	if err := n.mountDir(); err != nil {
		b.logf("warning: the hosts' files stay on the file system of %s: %v", n.dir(), err)
	}
	if err := n.keepMachineNetns(); err != nil {
		return nil, err
	}
	st := &state{
		Version: stateVersion, Instance: n.inst,
		Bridge: n.bridge(), BridgeIP: n.bridgeIP(), Subnet: n.subnet(),
		Secret:  n.secretFile(),
		Cgroups: detectCgroups(n),
		Sites:   cfg.sites(), SiteRate: strings.ToLower(cfg.SiteRate),
		LinkBinary: cfg.LinkBinary,
	}
	if st.LinkBinary == "" {
		st.LinkBinary = cfg.AgentBinary
	}
	if cfg.S3 {
		if err := writeS3Env(n, cfg.S3Server); err != nil {
			return nil, err
		}
		st.S3Env, st.S3Hosts = n.s3EnvFile(), cfg.S3Hosts
	}
	if cfg.AgentBinary != "" {
		help, err := probeAgent(ctx, cfg.AgentBinary)
		if err != nil {
			b.logf("warning: hosts run no agent: %v", err)
		} else {
			st.AgentBinary, st.AgentHelp, st.AgentArgs = cfg.AgentBinary, help, cfg.AgentArgs
		}
	}
	if err := setupArm64(ctx, st, cfg); err != nil {
		return nil, err
	}
	if err := st.save(n); err != nil {
		return nil, err
	}
	if err := b.raiseNeighLimits(cfg.Nodes); err != nil {
		return nil, err
	}
	if err := makeBridge(ctx, n); err != nil {
		return nil, err
	}
	for s := 1; s <= st.Sites; s++ {
		if err := makeSite(ctx, n, s, st.SiteRate); err != nil {
			return nil, err
		}
	}
	quotaWarned := false
	for i := 0; i < cfg.Nodes; i++ {
		h, err := b.makeHost(ctx, st, i+1, cfg.Host(i))
		if err != nil {
			return nil, err
		}
		if h.CPUQuotaOff && !quotaWarned {
			b.logf("warning: no cgroup cpu controller (v2 or v1): hosts run without CPU quota")
			quotaWarned = true
		}
		st.Hosts = append(st.Hosts, *h)
		if err := st.save(n); err != nil {
			return nil, err
		}
	}
	if cfg.Slurm {
		if err := b.startSlurm(ctx, st); err != nil {
			return nil, err
		}
	}
	if st.AgentBinary != "" {
		if err := b.startAgents(ctx, st); err != nil {
			return nil, err
		}
		if err := st.save(n); err != nil {
			return nil, err
		}
		if err := b.waitCluster(ctx, st, nil); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// agentWave is how many agents join at once. The first agent creates the
// cluster; then the others start agentWave at a time, each joining one of the
// agents already up (in turn), the next wave once this one's have joined. With
// every agent of 128 hosts joining the first one at once, the first one's
// memberlist had 127 state exchanges to answer on a loaded machine, and joins
// timed out; machines of a real cluster do not all boot in one second either.
const agentWave = 16

// startAgents starts every host's agent and waits until each has joined.
func (b *Bed) startAgents(ctx context.Context, st *state) error {
	if err := b.startAgent(ctx, st, &st.Hosts[0], ""); err != nil {
		return err
	}
	// The others need the first agent's secret and someone to join.
	if err := b.waitAgent(ctx, &st.Hosts[0]); err != nil {
		return err
	}
	for first := 1; first < len(st.Hosts); first += agentWave {
		wave := st.Hosts[first:min(first+agentWave, len(st.Hosts))]
		for i := range wave {
			seed := st.Hosts[i%first]
			if err := b.startAgent(ctx, st, &wave[i], net.JoinHostPort(seed.IP, strconv.Itoa(AgentPort))); err != nil {
				return err
			}
		}
		for i := range wave {
			if err := b.waitAgent(ctx, &wave[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeHost builds host nK: directories, UTS namespace, network, cgroups.
func (b *Bed) makeHost(ctx context.Context, st *state, k int, hc HostConfig) (*Host, error) {
	n := b.n
	hc = hc.withDefaults()
	dir := n.hostDir(k)
	h := &Host{
		Name: n.hostName(k), Index: k, IP: n.hostIP(k),
		Netns: n.netns(k), Link: n.netns(k), UTS: n.utsPath(k),
		Dir: dir, TmpDir: dir + "/tmp", DataDir: dir + "/data", AgentLog: dir + "/agent.log",
		Cores: hc.Cores, CPUQuota: hc.CPUQuota, Rate: hc.Rate, Site: hc.Site, Profile: hc.Profile,
	}
	for _, d := range []string{h.Dir, h.DataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := makeTmpDir(h.TmpDir); err != nil {
		return nil, err
	}
	if err := makeUTS(ctx, n, k); err != nil {
		return nil, err
	}
	br := n.bridge()
	if hc.Site > 0 {
		br = n.siteBridge(hc.Site)
	}
	tap := false
	if p, ok, _ := lookupProfile(hc.Profile); ok && p.delays() {
		pid, err := n.startLink(ctx, st.LinkBinary, k, p)
		if err != nil {
			return nil, err
		}
		h.LinkPID, tap = pid, true
	}
	if err := makeHostNet(ctx, n, k, br, hc.Rate, tap); err != nil {
		return nil, err
	}
	if p, ok, _ := lookupProfile(hc.Profile); ok && p.ProcessLimit > 0 {
		pid, err := n.startKiller(st.LinkBinary, k, p.ProcessLimit)
		if err != nil {
			return nil, err
		}
		h.KillerPID = pid
	}
	if hc.Arch == ArchArm64 {
		if err := CheckArm64(st.Arm64Root); err != nil {
			return nil, err
		}
		h.Arch, h.MountNS, h.Root = ArchArm64, n.mntnsPath(k), dir+"/root"
		share := ""
		if st.Arm64Agent != "" {
			share = arm64Share(st.Arm64Agent)
		}
		if err := makeArm64Root(ctx, n, h, st.Arm64Root, share); err != nil {
			return nil, err
		}
	}
	dirs, applied, err := st.Cgroups.makeHostCgroups(n, h.Name, hc.CPUQuota)
	h.Cgroups = dirs
	if err != nil {
		return nil, err
	}
	h.CPUQuotaOff = hc.CPUQuota > 0 && !applied
	return h, nil
}

// Down removes the testbed: see [Clean].
func (b *Bed) Down(ctx context.Context) error {
	unlock, err := lock(b.n)
	if err != nil {
		return err
	}
	defer unlock()
	return clean(ctx, b.n)
}

// Hosts returns the hosts as recorded in the state file, in order.
func (b *Bed) Hosts() ([]Host, error) {
	st, err := loadState(b.n)
	if err != nil {
		return nil, err
	}
	return st.Hosts, nil
}

// Host returns one host by name (n2), address or namespace name.
func (b *Bed) Host(node string) (Host, error) {
	st, err := loadState(b.n)
	if err != nil {
		return Host{}, err
	}
	h, err := st.host(node)
	if err != nil {
		return Host{}, err
	}
	return *h, nil
}

// Instance is the testbed's instance number.
func (b *Bed) Instance() int { return b.n.inst }

// Dir is the testbed's directory (state file, secret, one directory per host).
func (b *Bed) Dir() string { return b.n.dir() }

// Subnet is the testbed's network, 10.77.I.0/24.
func (b *Bed) Subnet() string { return b.n.subnet() }

// Sites returns the number of sites (0 without sites) and the rate of each site's link.
func (b *Bed) Sites() (int, string, error) {
	st, err := loadState(b.n)
	if err != nil {
		return 0, "", err
	}
	return st.Sites, st.SiteRate, nil
}

// Kill sends SIGKILL to every process of node (its agent, its MPI daemons and ranks,
// whatever runs in it) and returns how many it killed. The host itself stays: its
// network still answers, so peers see connections reset, as when a machine's processes
// die.
func (b *Bed) Kill(ctx context.Context, node string) (int, error) {
	st, err := loadState(b.n)
	if err != nil {
		return 0, err
	}
	h, err := st.host(node)
	if err != nil {
		return 0, err
	}
	return matchFor(b.n, h.Index, h.Cgroups).kill(ctx)
}

// Procs returns the pids of node's processes: the members of its cgroups and
// whatever else runs in its network or UTS namespace. The hosts share the
// machine's process table, so a plain pgrep inside a host sees every host's.
func (b *Bed) Procs(node string) ([]int, error) {
	st, err := loadState(b.n)
	if err != nil {
		return nil, err
	}
	h, err := st.host(node)
	if err != nil {
		return nil, err
	}
	return matchFor(b.n, h.Index, h.Cgroups).pids(), nil
}

// Cut takes node's link down: its packets vanish and nobody is told, as when a machine
// leaves the network. Its processes live on.
func (b *Bed) Cut(ctx context.Context, node string) error { return b.setCut(ctx, node, true) }

// Heal brings node's link up again after [Bed.Cut].
func (b *Bed) Heal(ctx context.Context, node string) error { return b.setCut(ctx, node, false) }

func (b *Bed) setCut(ctx context.Context, node string, cut bool) error {
	unlock, err := lock(b.n)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := loadState(b.n)
	if err != nil {
		return err
	}
	h, err := st.host(node)
	if err != nil {
		return err
	}
	if err := setLink(ctx, b.n, h.Index, !cut); err != nil {
		return err
	}
	h.Cut = cut
	return st.save(b.n)
}

// Add adds a host n<K+1>, K being the highest host index so far, to site hc.Site (the
// last site when 0, on a testbed with sites), and starts its agent
// (joining the first host whose agent runs) when the testbed has agents and not
// hc.NoAgent. It returns once the new agent and the running ones see each other alive, or
// fails with [ErrAgentNotReady] (the host stays).
func (b *Bed) Add(ctx context.Context, hc HostConfig) (Host, error) {
	if err := hc.Validate(); err != nil {
		return Host{}, err
	}
	unlock, err := lock(b.n)
	if err != nil {
		return Host{}, err
	}
	defer unlock()
	st, err := loadState(b.n)
	if err != nil {
		return Host{}, err
	}
	k := 0
	for _, h := range st.Hosts {
		k = max(k, h.Index)
	}
	k++
	if k > MaxNodes {
		return Host{}, fmt.Errorf("%w: n%d: at most %d hosts", ErrInvalidConfig, k, MaxNodes)
	}
	for _, o := range st.Hosts {
		if o.IP == b.n.hostIP(k) {
			return Host{}, fmt.Errorf("%w: n%d: its address %s is %s's since readdress", ErrInvalidConfig, k, o.IP, o.Name)
		}
	}
	switch {
	case st.Sites == 0 && hc.Site != 0:
		return Host{}, fmt.Errorf("%w: Site = %d: the testbed has no sites", ErrInvalidConfig, hc.Site)
	case hc.Site > st.Sites:
		return Host{}, fmt.Errorf("%w: Site = %d: the testbed has %d sites", ErrInvalidConfig, hc.Site, st.Sites)
	case hc.Site == 0:
		hc.Site = st.Sites
	}
	if err := b.raiseNeighLimits(len(st.Hosts) + 1); err != nil {
		return Host{}, err
	}
	h, err := b.makeHost(ctx, st, k, hc)
	if err != nil {
		return Host{}, err
	}
	if h.CPUQuotaOff {
		b.logf("warning: no cgroup cpu controller (v2 or v1): %s runs without CPU quota", h.Name)
	}
	if st.Slurm != nil {
		b.logf("warning: %s runs no slurmd: the testbed's Slurm cluster has the hosts of up", h.Name)
	}
	st.Hosts = append(st.Hosts, *h)
	if err := st.save(b.n); err != nil {
		return Host{}, err
	}
	h = &st.Hosts[len(st.Hosts)-1]
	if st.AgentBinary != "" && !hc.NoAgent {
		if err := b.startAgent(ctx, st, h, b.joinAddr(st, h)); err != nil {
			return *h, err
		}
		if err := st.save(b.n); err != nil {
			return *h, err
		}
		if err := b.waitAgent(ctx, h); err != nil {
			return *h, err
		}
		if err := b.waitCluster(ctx, st, []string{h.Name}); err != nil {
			return *h, err
		}
	}
	return *h, nil
}

// joinAddr is the agent address a new agent on h joins: the first other host whose agent
// runs and whose link is up, else n1's.
func (b *Bed) joinAddr(st *state, h *Host) string {
	for _, o := range st.Hosts {
		if o.Index == h.Index || o.Cut {
			continue
		}
		if id, err := nsID(o.netnsPath()); err == nil && alive(o.AgentPID, id) {
			return net.JoinHostPort(o.IP, strconv.Itoa(AgentPort))
		}
	}
	return net.JoinHostPort(st.Hosts[0].IP, strconv.Itoa(AgentPort))
}

// StartAgent starts node's agent again, e.g. after [Bed.Kill] or a leave; it joins another
// running agent. It returns once that agent and the running ones see each other alive, or
// fails with [ErrAgentNotReady]. On a testbed running Slurm it starts node's Slurm daemons
// again instead, and returns once Slurm counts the node. It fails on a testbed with
// neither.
func (b *Bed) StartAgent(ctx context.Context, node string) error {
	unlock, err := lock(b.n)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := loadState(b.n)
	if err != nil {
		return err
	}
	h, err := st.host(node)
	if err != nil {
		return err
	}
	if st.Slurm != nil {
		return b.restartSlurm(ctx, st, h)
	}
	if st.AgentBinary == "" {
		return errors.New("testbed: this testbed runs no agents")
	}
	if id, err := nsID(h.netnsPath()); err == nil && alive(h.AgentPID, id) {
		return fmt.Errorf("testbed: the agent of %s runs already (pid %d)", h.Name, h.AgentPID)
	}
	if err := b.startAgent(ctx, st, h, b.joinAddr(st, h)); err != nil {
		return err
	}
	if err := st.save(b.n); err != nil {
		return err
	}
	if err := b.waitAgent(ctx, h); err != nil {
		return err
	}
	return b.waitCluster(ctx, st, []string{h.Name})
}

// HostStatus is a host as it is now.
type HostStatus struct {
	Host
	State      string // "up", "cut", "asleep" (frozen: [Bed.Sleep]), or "gone" (its namespace no longer exists)
	Procs      int    // processes in the host
	AgentAlive bool
}

// Status describes every host now, and the cgroup support in one line. A host asleep
// past its wake time is woken first (see [Bed.Sleep]).
func (b *Bed) Status() (hosts []HostStatus, cgroups string, err error) {
	if err := b.wakeOverdue(); err != nil {
		return nil, "", err
	}
	st, err := loadState(b.n)
	if err != nil {
		return nil, "", err
	}
	for _, h := range st.Hosts {
		s := HostStatus{Host: h, State: "up"}
		id, err := nsID(h.netnsPath())
		switch {
		case err != nil || !isNsfs(h.netnsPath()):
			s.State = "gone"
		case frozen(h.Cgroups) && h.Cut:
			s.State = "asleep,cut"
		case frozen(h.Cgroups):
			s.State = "asleep"
		case h.Cut:
			s.State = "cut"
		}
		if err == nil {
			s.AgentAlive = alive(h.AgentPID, id)
		}
		s.Procs = len(matchFor(b.n, h.Index, h.Cgroups).pids())
		hosts = append(hosts, s)
	}
	return hosts, st.Cgroups.describe(), nil
}

// Agents reports whether the testbed's hosts run agents, and the binary.
func (b *Bed) Agents() (bool, string, error) {
	st, err := loadState(b.n)
	if err != nil {
		return false, "", err
	}
	return st.AgentBinary != "", st.AgentBinary, nil
}

// makeTmpDir makes a host's temporary directory as a node's /tmp is: every user may
// write it, and it is sticky, so that none can rename or remove another's files in
// it. (os.Chmod takes os.ModeSticky, not the octal 01000.)
func makeTmpDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, os.ModeSticky|0o777)
}
