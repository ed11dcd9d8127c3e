package testbed

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// Errors of the testbed package. Callers test them with errors.Is.
var (
	// ErrNotRoot: network namespaces, bridges and cgroups need root.
	ErrNotRoot = errors.New("testbed: needs root (network namespaces)")
	// ErrNotUp: no testbed of this instance is up (no state file).
	ErrNotUp = errors.New("testbed: no testbed is up")
	// ErrUnknownNode: the named host is not part of the testbed.
	ErrUnknownNode = errors.New("testbed: unknown node")
	// ErrInvalidConfig: a Config or HostConfig field is out of range.
	ErrInvalidConfig = errors.New("testbed: invalid config")
	// ErrAgentNotReady: an agent exited, did not publish its address in time, or the
	// agents did not all see each other alive in time.
	ErrAgentNotReady = errors.New("testbed: agent not ready")
	// ErrNoFreezer: the machine's cgroups cannot freeze a host (no cgroup v2 and no v1
	// freezer hierarchy), so it cannot sleep.
	ErrNoFreezer = errors.New("testbed: no cgroup freezer (cgroup v2 or the v1 freezer): hosts cannot sleep")
)

// Limits of one testbed instance.
const (
	// MaxNodes is the largest host index: host nK has address 10.77.I.(10+K).
	MaxNodes = 244
	// MaxInstance is the largest instance number: instance I has subnet
	// 10.(77+I/256).(I%256).0/24, so 10.77.I.0/24 up to 255 and 10.78.(I-256).0/24 beyond.
	MaxInstance = 511
	// AgentPort is the port every host's agent binds (gossip and, by the agent's choice,
	// its API next to it).
	AgentPort = 7946
)

// Config describes a testbed to bring up with [Up].
type Config struct {
	// Nodes is the number of hosts, named n1 … nNodes. 1 ≤ Nodes ≤ [MaxNodes].
	Nodes int

	// Cores is the number of cores each host says it has (given to its agent, and in
	// SHOAL_TESTBED_CORES). Empty: every host has runtime.NumCPU() cores; one value: all
	// hosts; otherwise exactly one value per host. Each ≥ 1. The cores are not reserved:
	// hosts share the machine's CPUs (see CPUQuota).
	Cores []int

	// CPUQuota is each host's CPU time limit in CPUs: 0.5 is half of one CPU, 2 is two
	// CPUs. It becomes the host cgroup's quota = CPUQuota × 100 ms per 100 ms period
	// (cpu.max on cgroup v2, cpu.cfs_quota_us on v1). 0 means no limit; otherwise
	// 0.01 ≤ CPUQuota ≤ 1024. Empty, one value for all hosts, or one per host. Without a
	// cgroup cpu controller the testbed warns and runs without quota.
	CPUQuota []float64

	// Rate is each host's bandwidth in tc syntax ("15mbit", "1gbit", "500kbit"),
	// applied with tbf in both directions of the host's link (egress of its eth0 and of
	// its bridge port). "" means no limit. Empty, one value for all hosts, or one per host.
	Rate []string

	// Profile is each host's device condition, a name of [Profiles] ("wifi": delay,
	// jitter, loss and a rate on its link; see [Profile]) or "" / "none": empty, one
	// value for all hosts, or one per host. A host's own Rate wins over its profile's.
	Profile []string

	// LinkBinary is the shoal executable whose `testbed delay-line` carries the frames
	// of hosts with a delaying profile ([RunLink]); "" means AgentBinary.
	LinkBinary string

	// Sites groups the hosts into sites, by number of hosts in host order: {3, 3} puts
	// n1–n3 in site 1 and n4–n6 in site 2. Inside a site hosts talk at full speed
	// (SiteRate does not apply); traffic between sites crosses both sites' links, each
	// limited to SiteRate. Empty, or one value, means no sites. With two or more: each
	// ≥ 1, adding up to Nodes.
	Sites []int

	// SiteRate is the bandwidth of each site's link to the other sites, in tc syntax as
	// Rate, applied with tbf in both directions. Required with two sites or more; ""
	// without sites.
	SiteRate string

	// Instance selects one of several testbeds that can coexist on the machine (tests
	// of different packages run at the same time; give each its own). It decides every
	// name: bridge shoalbr<Instance>, subnet 10.77.<Instance>.0/24 (10.78.<Instance-256>.0/24
	// from 256), namespaces and links
	// shoal<Instance>-nK, directory /tmp/shoal-testbed (Instance 0) or
	// /tmp/shoal-testbed-<Instance>. 0 ≤ Instance ≤ [MaxInstance]; the CLI uses 0.
	Instance int

	// Arch is each host's instruction set, [ArchAmd64] or [ArchArm64]: empty (all
	// amd64), one value for all hosts, or one per host. An arm64 host runs in the root
	// file system at Arm64Root under qemu-aarch64 ([CheckArm64] says whether it can).
	Arch []string

	// Arm64Root is the Debian arm64 root file system of arm64 hosts (`make
	// arm64-root`); "" means [DefaultArm64Root]. Each arm64 host sees it through an
	// overlay of its own, so what the host writes stays out of it.
	Arm64Root string

	// Arm64Agent is the shoal executable (built for linux/arm64) whose agent runs in
	// every arm64 host; "" means arm64/shoal beside AgentBinary (`make arm64-agent`
	// builds bin/arm64/shoal). Unused without agents or arm64 hosts.
	Arm64Agent string

	// AgentBinary is the shoal executable whose `agent` subcommand runs in every host.
	// "" means no agents. If `AgentBinary agent --help` fails, Up warns and continues
	// without agents.
	AgentBinary string

	// AgentArgs are more flags for every host's agent, after those the testbed gives
	// (e.g. a short retention for tests: "--keep-failed", "3s"). Kept for agents started
	// later ([Bed.StartAgent], [Bed.Add]).
	AgentArgs []string

	// Slurm runs a Slurm cluster in the hosts (Debian's slurmctld, slurmd and munge;
	// see [CheckSlurm]): munged once for all hosts, slurmctld in n1, a slurmd in every
	// host. Hosts with Slurm run no Shoal agent (AgentBinary must be ""): a job's
	// `shoal run` starts agents in its allocation (docs/slurm.md).
	Slurm bool

	// S3 gives every process in the hosts (agents, Slurm's daemons, commands run with
	// [Bed.Command]) the AWS_* settings of the testbed's S3 server ([S3Up]), its
	// endpoint at the instance's bridge address: a shoal run --durable s3://… in a
	// host finds the store without flags. [Up] fails with [ErrS3NotUp] when the
	// server is not up. The settings are those of Up's time: a server brought up
	// anew since has other credentials.
	S3 bool
	// S3Server, with S3, is the server whose settings the hosts get instead of the
	// testbed's (a test's own, [StartS3]); its endpoint is taken at the instance's
	// bridge address, so it must listen there or on every address.
	S3Server *S3Server
	// S3Hosts, with S3, are the only hosts whose processes get the settings (nil:
	// every host): a testbed whose agents have the store's credentials on some
	// nodes only.
	S3Hosts []string

	// Logf receives warnings (no cgroup cpu controller, agent missing or dead). nil
	// discards them.
	Logf func(format string, args ...any)
}

// HostConfig describes one host: the per-host values of [Config], or what [Bed.Add] adds.
type HostConfig struct {
	Cores    int     // as Config.Cores; 0 means runtime.NumCPU()
	CPUQuota float64 // as Config.CPUQuota; 0 means no limit
	Rate     string  // as Config.Rate; "" means no limit
	Arch     string  // as Config.Arch; "" means amd64
	Profile  string  // as Config.Profile; "" means none
	// Site is the host's site, 1 to the number of sites; 0 on a testbed without
	// sites. In [Config] it comes from Config.Sites; for [Bed.Add], 0 means the last
	// site.
	Site int
	// NoAgent makes [Bed.Add] start no agent in the new host even when the testbed has
	// agents (a host for an agent started by hand). [Up] ignores it: Config.AgentBinary
	// decides for every host.
	NoAgent bool
}

// DefaultConfig is three hosts of instance 0, with as many cores as the machine, no
// quota, no rate limit and no agent.
func DefaultConfig() Config { return Config{Nodes: 3} }

var rateRE = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$`)

// Validate reports the first field that is out of range, naming the field and the value.
func (c Config) Validate() error {
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		return fmt.Errorf("%w: Nodes = %d: want 1 to %d", ErrInvalidConfig, c.Nodes, MaxNodes)
	}
	if c.Instance < 0 || c.Instance > MaxInstance {
		return fmt.Errorf("%w: Instance = %d: want 0 to %d", ErrInvalidConfig, c.Instance, MaxInstance)
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"Cores", len(c.Cores)}, {"CPUQuota", len(c.CPUQuota)}, {"Rate", len(c.Rate)}, {"Arch", len(c.Arch)}, {"Profile", len(c.Profile)}} {
		if l.n > 1 && l.n != c.Nodes {
			return fmt.Errorf("%w: %s has %d values for %d nodes: want none, one, or one per node",
				ErrInvalidConfig, l.name, l.n, c.Nodes)
		}
	}
	if c.Slurm && c.AgentBinary != "" {
		return fmt.Errorf("%w: AgentBinary = %q with Slurm: hosts with Slurm run no agent (shoal run starts them in each allocation)", ErrInvalidConfig, c.AgentBinary)
	}
	if err := c.validateSites(); err != nil {
		return err
	}
	for i := 0; i < c.Nodes; i++ {
		if err := c.Host(i).validate(fmt.Sprintf("[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) validateSites() error {
	if len(c.Sites) == 1 && c.Sites[0] != c.Nodes {
		return fmt.Errorf("%w: Sites = %v: one site of %d hosts, want all %d (or no Sites)", ErrInvalidConfig, c.Sites, c.Sites[0], c.Nodes)
	}
	if len(c.Sites) < 2 {
		if c.SiteRate != "" {
			return fmt.Errorf("%w: SiteRate = %q without Sites: want two sites or more, or no SiteRate", ErrInvalidConfig, c.SiteRate)
		}
		return nil
	}
	sum := 0
	for i, n := range c.Sites {
		if n < 1 {
			return fmt.Errorf("%w: Sites[%d] = %d: want at least 1 host", ErrInvalidConfig, i, n)
		}
		sum += n
	}
	if sum != c.Nodes {
		return fmt.Errorf("%w: Sites = %v: %d hosts in all, want Nodes = %d", ErrInvalidConfig, c.Sites, sum, c.Nodes)
	}
	if c.SiteRate == "" {
		return fmt.Errorf("%w: SiteRate = \"\": want the rate of the link between the %d sites", ErrInvalidConfig, len(c.Sites))
	}
	if _, err := parseRate(c.SiteRate); err != nil {
		return fmt.Errorf("%w: SiteRate = %q: %v", ErrInvalidConfig, c.SiteRate, err)
	}
	return nil
}

// sites is the number of sites: 0 without them.
func (c Config) sites() int {
	if len(c.Sites) < 2 {
		return 0
	}
	return len(c.Sites)
}

// Host returns the configuration of host n(i+1).
func (c Config) Host(i int) HostConfig {
	var h HostConfig
	if v := pick(c.Cores, i); v != nil {
		h.Cores = *v
	}
	if v := pick(c.CPUQuota, i); v != nil {
		h.CPUQuota = *v
	}
	if v := pick(c.Rate, i); v != nil {
		h.Rate = *v
	}
	if v := pick(c.Arch, i); v != nil {
		h.Arch = *v
	}
	if v := pick(c.Profile, i); v != nil {
		h.Profile = *v
	}
	if c.sites() > 0 {
		first := 0
		for s, n := range c.Sites {
			if i < first+n {
				h.Site = s + 1
				break
			}
			first += n
		}
	}
	return h
}

func pick[T any](vs []T, i int) *T {
	switch {
	case len(vs) == 0:
		return nil
	case len(vs) == 1:
		return &vs[0]
	case i < len(vs):
		return &vs[i]
	}
	return nil
}

// Validate reports the first field that is out of range.
func (h HostConfig) Validate() error { return h.validate("") }

func (h HostConfig) validate(index string) error {
	if h.Cores < 0 || h.Cores > 4096 {
		return fmt.Errorf("%w: Cores%s = %d: want 1 to 4096 (0 for the machine's count)", ErrInvalidConfig, index, h.Cores)
	}
	if h.CPUQuota != 0 && !(h.CPUQuota >= 0.01 && h.CPUQuota <= 1024) {
		return fmt.Errorf("%w: CPUQuota%s = %g: want 0.01 to 1024 CPUs (0 for no limit)", ErrInvalidConfig, index, h.CPUQuota)
	}
	if h.Rate != "" {
		if _, err := parseRate(h.Rate); err != nil {
			return fmt.Errorf("%w: Rate%s = %q: %v", ErrInvalidConfig, index, h.Rate, err)
		}
	}
	if h.Arch != "" && h.Arch != ArchAmd64 && h.Arch != ArchArm64 {
		return fmt.Errorf("%w: Arch%s = %q: want %s or %s", ErrInvalidConfig, index, h.Arch, ArchAmd64, ArchArm64)
	}
	if _, _, err := lookupProfile(h.Profile); err != nil {
		return fmt.Errorf("%w: Profile%s = %q: %v", ErrInvalidConfig, index, h.Profile, err)
	}
	if h.Site < 0 || h.Site > MaxNodes {
		return fmt.Errorf("%w: Site%s = %d: want 1 to the number of sites (0: none, or the last for Bed.Add)", ErrInvalidConfig, index, h.Site)
	}
	return nil
}

func (h HostConfig) withDefaults() HostConfig {
	if h.Cores == 0 {
		h.Cores = runtime.NumCPU()
	}
	h.Profile = strings.ToLower(h.Profile)
	if p, ok, _ := lookupProfile(h.Profile); ok && h.Rate == "" {
		h.Rate = p.Rate
	} else if !ok {
		h.Profile = ""
	}
	h.Rate = strings.ToLower(h.Rate)
	if h.Arch == "" {
		h.Arch = ArchAmd64
	}
	return h
}

// parseRate turns a tc rate ("15mbit", "2mbps") into bits per second.
func parseRate(s string) (float64, error) {
	m := rateRE.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, errors.New("want a number and a unit: bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps, tbps (tc syntax)")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, err
	}
	mult := map[string]float64{
		"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
		"bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
	}[m[3]]
	bits := v * mult
	if bits < 8000 {
		return 0, errors.New("below 8kbit")
	}
	return bits, nil
}

// names derives every name and address of one testbed instance. Nothing else in the
// package builds them.
type names struct{ inst int }

func (n names) bridge() string        { return fmt.Sprintf("shoalbr%d", n.inst) }
func (n names) net24() string         { return fmt.Sprintf("10.%d.%d", 77+n.inst/256, n.inst%256) }
func (n names) bridgeIP() string      { return n.net24() + ".1" }
func (n names) subnet() string        { return n.net24() + ".0/24" }
func (n names) hostName(k int) string { return fmt.Sprintf("n%d", k) }
func (n names) hostIP(k int) string   { return fmt.Sprintf("%s.%d", n.net24(), 10+k) }

// Site s has its own bridge, and its link to the others is a veth pair between that
// bridge and the instance's bridge: the end in the site's bridge sends out of the site,
// the end in the instance's bridge into it. Each carries the site's tbf.
func (n names) siteBridge(s int) string { return fmt.Sprintf("shoal%d-s%d", n.inst, s) }
func (n names) siteOut(s int) string    { return fmt.Sprintf("shoal%d-s%do", n.inst, s) }
func (n names) siteIn(s int) string     { return fmt.Sprintf("shoal%d-s%di", n.inst, s) }

// siteIndex is the inverse of siteBridge, siteOut and siteIn: s, or 0 when name is
// none of this instance's.
func (n names) siteIndex(name string) int {
	rest, ok := strings.CutPrefix(name, fmt.Sprintf("shoal%d-s", n.inst))
	if !ok {
		return 0
	}
	if r, ok := strings.CutSuffix(rest, "o"); ok {
		rest = r
	} else {
		rest = strings.TrimSuffix(rest, "i")
	}
	s, err := strconv.Atoi(rest)
	if err != nil || s < 1 || s > MaxNodes || strconv.Itoa(s) != rest {
		return 0
	}
	return s
}

// netns is both the network namespace's name and the name of the host's bridge port.
func (n names) netns(k int) string { return fmt.Sprintf("shoal%d-n%d", n.inst, k) }

// hostIndex is the inverse of netns: k, or 0 when name is not one of this instance's.
func (n names) hostIndex(name string) int {
	rest, ok := strings.CutPrefix(name, fmt.Sprintf("shoal%d-n", n.inst))
	if !ok {
		return 0
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 1 || k > MaxNodes || strconv.Itoa(k) != rest {
		return 0
	}
	return k
}

func (n names) base() string {
	if n.inst == 0 {
		return "shoal-testbed"
	}
	return fmt.Sprintf("shoal-testbed-%d", n.inst)
}

func (n names) dir() string              { return "/tmp/" + n.base() }
func (n names) hostDir(k int) string     { return fmt.Sprintf("%s/n%d", n.dir(), k) }
func (n names) stateFile() string        { return n.dir() + "/state.json" }
func (n names) machineNetnsPath() string { return n.dir() + "/machine-netns" }
func (n names) secretFile() string       { return n.dir() + "/secret" }
func (n names) s3EnvFile() string        { return n.dir() + "/s3.env" }
func (n names) cgroupGroup() string      { return n.base() }
func (n names) lockFile() string         { return "/run/lock/" + n.base() + ".lock" }
func (n names) netnsPath(k int) string   { return "/run/netns/" + n.netns(k) }
func (n names) utsPath(k int) string     { return n.hostDir(k) + "/uts" }
func (n names) mntnsDir() string         { return n.dir() + "/mntns" }
func (n names) mntnsPath(k int) string   { return fmt.Sprintf("%s/n%d", n.mntnsDir(), k) }
