package testbed

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{Config{Nodes: 3}, ""},
		{Config{Nodes: 3, Cores: []int{2, 2, 3}, CPUQuota: []float64{0.5, 0.5, 1}, Rate: []string{"15mbit"}}, ""},
		{Config{Nodes: 1, Instance: 255, Rate: []string{"1.5Gbit"}}, ""},
		{Config{Nodes: 0}, "Nodes = 0"},
		{Config{Nodes: 245}, "Nodes = 245"},
		{Config{Nodes: 2, Instance: 512}, "Instance = 512"},
		{Config{Nodes: 3, Cores: []int{2, 2}}, "Cores has 2 values for 3 nodes"},
		{Config{Nodes: 2, Cores: []int{2, -1}}, "Cores[1] = -1"},
		{Config{Nodes: 2, CPUQuota: []float64{0.001}}, "CPUQuota[0] = 0.001"},
		{Config{Nodes: 2, CPUQuota: []float64{1, 2, 3}}, "CPUQuota has 3 values"},
		{Config{Nodes: 2, Rate: []string{"15"}}, `Rate[0] = "15"`},
		{Config{Nodes: 2, Rate: []string{"fast"}}, `Rate[0] = "fast"`},
		{Config{Nodes: 1, Rate: []string{"100bit"}}, "below 8kbit"},
		{Config{Nodes: 6, Sites: []int{3, 3}, SiteRate: "20mbit", Rate: []string{"100mbit"}}, ""},
		{Config{Nodes: 6, Sites: []int{6}}, ""},
		{Config{Nodes: 6, Sites: []int{3, 2}, SiteRate: "20mbit"}, "Sites = [3 2]: 5 hosts in all, want Nodes = 6"},
		{Config{Nodes: 6, Sites: []int{3, 3, 0}, SiteRate: "20mbit"}, "Sites[2] = 0"},
		{Config{Nodes: 6, Sites: []int{4}}, "Sites = [4]"},
		{Config{Nodes: 6, Sites: []int{3, 3}}, `SiteRate = ""`},
		{Config{Nodes: 6, Sites: []int{3, 3}, SiteRate: "fast"}, `SiteRate = "fast"`},
		{Config{Nodes: 6, SiteRate: "20mbit"}, `SiteRate = "20mbit" without Sites`},
		{Config{Nodes: 4, Slurm: true}, ""},
		{Config{Nodes: 4, Arch: []string{"amd64", "amd64", "arm64", "arm64"}}, ""},
		{Config{Nodes: 2, Arch: []string{"arm64"}}, ""},
		{Config{Nodes: 3, Arch: []string{"amd64", "x86", "arm64"}}, `Arch[1] = "x86": want amd64 or arm64`},
		{Config{Nodes: 3, Arch: []string{"amd64", "arm64"}}, "Arch has 2 values for 3 nodes"},
		{Config{Nodes: 4, Slurm: true, AgentBinary: "/bin/shoal"}, `AgentBinary = "/bin/shoal" with Slurm`},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tt.cfg, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Validate(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
		case tt.want != "" && !errors.Is(err, ErrInvalidConfig):
			t.Errorf("Validate(%+v) = %v, want errors.Is ErrInvalidConfig", tt.cfg, err)
		}
	}
}

func TestConfigHost(t *testing.T) {
	cfg := Config{Nodes: 3, Cores: []int{2, 2, 3}, CPUQuota: []float64{0.5}, Rate: nil}
	got := []HostConfig{cfg.Host(0), cfg.Host(1), cfg.Host(2)}
	want := []HostConfig{{Cores: 2, CPUQuota: 0.5}, {Cores: 2, CPUQuota: 0.5}, {Cores: 3, CPUQuota: 0.5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hosts of %+v: got %+v, want %+v", cfg, got, want)
	}
	cfg = Config{Nodes: 5, Sites: []int{1, 3, 1}, SiteRate: "1mbit"}
	var sites []int
	for i := 0; i < cfg.Nodes; i++ {
		sites = append(sites, cfg.Host(i).Site)
	}
	if want := []int{1, 2, 2, 2, 3}; !reflect.DeepEqual(sites, want) {
		t.Errorf("sites of %+v: got %v, want %v", cfg, sites, want)
	}
	if s := (Config{Nodes: 2, Sites: []int{2}}).Host(1).Site; s != 0 {
		t.Errorf("one site: host in site %d, want 0 (no sites)", s)
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"15mbit", 15e6}, {"1gbit", 1e9}, {"500kbit", 500e3}, {"2mbps", 16e6}, {"1.5Mbit", 1.5e6}, {"8000bit", 8000},
	}
	for _, tt := range tests {
		got, err := parseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseRate(%q) = %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	n := names{0}
	got := []string{n.bridge(), n.bridgeIP(), n.subnet(), n.hostIP(1), n.netns(1), n.dir(), n.hostDir(2), n.lockFile()}
	want := []string{"shoalbr0", "10.77.0.1", "10.77.0.0/24", "10.77.0.11", "shoal0-n1", "/tmp/shoal-testbed", "/tmp/shoal-testbed/n2", "/run/lock/shoal-testbed.lock"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names of instance 0: got %q, want %q", got, want)
	}
	n = names{255}
	if got, want := n.netns(MaxNodes), "shoal255-n244"; got != want || len(got) > 15 {
		t.Errorf("longest link name: got %q, want %q (at most 15 bytes)", got, want)
	}
	if got, want := n.hostIP(MaxNodes), "10.77.255.254"; got != want {
		t.Errorf("last host address: got %q, want %q", got, want)
	}
	if got, want := (names{259}).hostIP(1), "10.78.3.11"; got != want {
		t.Errorf("address of n1 of instance 259: got %q, want %q", got, want)
	}
	if got := []string{n.siteBridge(MaxNodes), n.siteOut(MaxNodes), n.siteIn(MaxNodes)}; len(got[1]) > 15 || len(got[2]) > 15 {
		t.Errorf("longest site link names: %q: want at most 15 bytes", got)
	}
	for _, tt := range []struct {
		name string
		want int
	}{{"shoal255-s7", 7}, {"shoal255-s7o", 7}, {"shoal255-s7i", 7}, {"shoal255-s07", 0}, {"shoal255-s7x", 0}, {"shoal255-s7io", 0}, {"shoal255-n7", 0}, {"shoal25-s7", 0}, {"shoal255-s", 0}} {
		if got := n.siteIndex(tt.name); got != tt.want {
			t.Errorf("siteIndex(%q) = %d, want %d", tt.name, got, tt.want)
		}
	}
	for _, tt := range []struct {
		name string
		want int
	}{{"shoal255-n7", 7}, {"shoal255-n07", 0}, {"shoal25-n7", 0}, {"shoal255-n", 0}, {"shoal255-n245", 0}, {"shoalbr255", 0}} {
		if got := n.hostIndex(tt.name); got != tt.want {
			t.Errorf("hostIndex(%q) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestGoMaxProcs: a host's Go processes get as many Ps as the host has cores, never more
// than the machine's CPUs.
func TestGoMaxProcs(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, c := range []struct{ cores, want int }{{1, 1}, {cpus, cpus}, {cpus + 3, cpus}} {
		if got := GoMaxProcs(c.cores); got != c.want {
			t.Errorf("GoMaxProcs(%d) = %d, want %d", c.cores, got, c.want)
		}
	}
	env := HostEnv(Host{Name: "n1", Cores: 1}, 0)
	if !slices.Contains(env, "GOMAXPROCS=1") {
		t.Errorf("HostEnv of a 1-core host lacks GOMAXPROCS=1: %q", env)
	}
}

func TestMPIEnv(t *testing.T) {
	env := HostEnv(Host{Name: "n2", TmpDir: "/tmp/shoal-testbed/n2/tmp", DataDir: "/tmp/shoal-testbed/n2/data", Cores: 3}, 0)
	for _, want := range []string{
		"TMPDIR=/tmp/shoal-testbed/n2/tmp",
		"SHOAL_DATA_DIR=/tmp/shoal-testbed/n2/data",
		"SHOAL_TESTBED_NODE=n2",
		"SHOAL_TESTBED_CORES=3",
		"HWLOC_SYNTHETIC=pack:1 core:3 pu:1",
		"OMPI_MCA_oob_tcp_if_include=10.77.0.0/24",
		"OMPI_MCA_btl_tcp_if_include=10.77.0.0/24",
		"OMPI_MCA_hwloc_base_binding_policy=none",
		"OMPI_MCA_mpi_yield_when_idle=1",
	} {
		found := false
		for _, e := range env {
			found = found || e == want
		}
		if !found {
			t.Errorf("HostEnv lacks %s: %q", want, env)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/sys/fs/cgroup/cpu/shoal-testbed/n1/cgroup.procs", "/sys/fs/cgroup/cpu/shoal-testbed/n1/cgroup.procs"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"", "''"},
	} {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestAgentArgsLast: Config.AgentArgs reach every agent, after the testbed's
// own flags, so that a test can change any agent setting.
func TestAgentArgsLast(t *testing.T) {
	st := &state{AgentBinary: "/bin/shoal", Secret: "/s", AgentArgs: []string{"--keep-failed", "3s"}}
	h := &Host{Name: "n1", IP: "10.77.9.11", DataDir: "/d", Cores: 1}
	for _, join := range []string{"", "10.77.9.12:7946"} {
		argv := agentArgv(st, h, join)
		if got := argv[len(argv)-2:]; got[0] != "--keep-failed" || got[1] != "3s" {
			t.Errorf("join %q: argv %q: want it to end with --keep-failed 3s", join, argv)
		}
	}
}

// TestMakeTmpDir: a host's TMPDIR is sticky and open to all, as /tmp is.
func TestMakeTmpDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1", "tmp")
	if err := makeTmpDir(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode(), os.ModeDir|os.ModeSticky|0o777; got != want {
		t.Errorf("mode of %s: got %v, want %v", dir, got, want)
	}
}
