package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Host is one testbed host as recorded in the state file.
type Host struct {
	Name     string  `json:"name"`      // n1, n2, …: also its hostname
	Index    int     `json:"index"`     // K of nK
	IP       string  `json:"ip"`        // 10.77.I.(10+K), on its eth0
	Netns    string  `json:"netns"`     // network namespace, /run/netns/<Netns>
	Link     string  `json:"link"`      // its bridge port in the machine's namespace (same name as Netns)
	UTS      string  `json:"uts"`       // bind mount keeping its UTS namespace
	Dir      string  `json:"dir"`       // DIR/nK
	TmpDir   string  `json:"tmp_dir"`   // TMPDIR of its processes
	DataDir  string  `json:"data_dir"`  // the agent's --data-dir
	AgentLog string  `json:"agent_log"` // the agent's stdout and stderr
	Cores    int     `json:"cores"`
	CPUQuota float64 `json:"cpu_quota,omitempty"` // CPUs; 0 none (or not applied: see CPUQuotaOff)
	Rate     string  `json:"rate,omitempty"`
	// Arch is amd64 or arm64. An arm64 host's processes enter the mount namespace kept at
	// MountNS and chroot into Root, its overlay of the arm64 root file system.
	Arch    string `json:"arch,omitempty"`
	MountNS string `json:"mount_ns,omitempty"`
	Root    string `json:"root,omitempty"`
	Site    int    `json:"site,omitempty"` // 1, 2, …; 0 on a testbed without sites
	// Profile is the host's [Profile] ("" none); LinkPID its delay line ([RunLink]),
	// whose TAP devices are its eth0 and its bridge port.
	Profile string `json:"profile,omitempty"`
	LinkPID int    `json:"link_pid,omitempty"`
	// KillerPID is its phantom-process killer, with a profile that limits processes.
	KillerPID int      `json:"killer_pid,omitempty"`
	Cgroups   []string `json:"cgroups,omitempty"` // cgroup directories every process of the host joins
	Cut       bool     `json:"cut,omitempty"`     // link down
	// BlockedFrom names the hosts whose new TCP connections to this one are
	// dropped ([Bed.Block]).
	BlockedFrom []string `json:"blocked_from,omitempty"`
	AgentPID    int      `json:"agent_pid,omitempty"`
	// WakeAt is when a host put to sleep ([Bed.Sleep]) wakes, in Unix milliseconds; 0
	// when awake. WakerPID is the process that wakes it then.
	WakeAt   int64 `json:"wake_at,omitempty"`
	WakerPID int   `json:"waker_pid,omitempty"`
	// SlurmdPID is the host's slurmd, on a testbed with Slurm.
	SlurmdPID int `json:"slurmd_pid,omitempty"`
	// CPUQuotaOff says the quota was asked for but no cgroup cpu controller exists.
	CPUQuotaOff bool `json:"cpu_quota_off,omitempty"`
}

// state is the content of DIR/state.json.
type state struct {
	Version     int         `json:"version"`
	Instance    int         `json:"instance"`
	Bridge      string      `json:"bridge"`
	BridgeIP    string      `json:"bridge_ip"`
	Subnet      string      `json:"subnet"`
	AgentBinary string      `json:"agent_binary,omitempty"` // "" when hosts run no agent
	AgentHelp   string      `json:"agent_help,omitempty"`   // `agent --help` output, to see which flags it takes
	AgentArgs   []string    `json:"agent_args,omitempty"`   // Config.AgentArgs
	Arm64Agent  string      `json:"arm64_agent,omitempty"`  // the agent of arm64 hosts
	Arm64Root   string      `json:"arm64_root,omitempty"`   // the root file system of arm64 hosts
	LinkBinary  string      `json:"link_binary,omitempty"`  // Config.LinkBinary, or AgentBinary
	Secret      string      `json:"secret_file"`
	Cgroups     cgroupSetup `json:"cgroup_setup"`
	Sites       int         `json:"sites,omitempty"`     // 0: no sites
	SiteRate    string      `json:"site_rate,omitempty"` // Config.SiteRate
	Hosts       []Host      `json:"hosts"`
	// Slurm is the testbed's Slurm cluster; nil without one.
	Slurm *slurmState `json:"slurm,omitempty"`
	// S3Env is the file of AWS_* exports every process in the hosts reads first
	// (Config.S3; mode 0600: it holds the server's secret); "" for none.
	S3Env string `json:"s3_env,omitempty"`
	// S3Hosts are the hosts whose processes read S3Env (Config.S3Hosts); nil
	// for every host.
	S3Hosts []string `json:"s3_hosts,omitempty"`
}

const stateVersion = 1

func (s *state) host(name string) (*Host, error) {
	for i := range s.Hosts {
		h := &s.Hosts[i]
		if h.Name == name || h.IP == name || h.Netns == name {
			return h, nil
		}
	}
	return nil, fmt.Errorf("%w: %q (hosts: %s)", ErrUnknownNode, name, s.hostNames())
}

func (s *state) hostNames() string {
	out := ""
	for i, h := range s.Hosts {
		if i > 0 {
			out += ", "
		}
		out += h.Name
	}
	return out
}

func loadState(n names) (*state, error) {
	// Root acts on what the file says (the pids it kills, the mounts it removes).
	err := checkRootDir(n.dir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (instance %d: no %s)", ErrNotUp, n.inst, n.stateFile())
	}
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	b, err := os.ReadFile(n.stateFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (instance %d: no %s)", ErrNotUp, n.inst, n.stateFile())
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("testbed: read %s: %w", n.stateFile(), err)
	}
	if s.Version != stateVersion || s.Instance != n.inst {
		return nil, fmt.Errorf("testbed: %s: version %d instance %d, want version %d instance %d (run down and up again)",
			n.stateFile(), s.Version, s.Instance, stateVersion, n.inst)
	}
	return &s, nil
}

// save writes the state file the crash-safe way: tmp, fsync, rename, fsync the directory.
func (s *state) save(n names) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	path := n.stateFile()
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lock serialises the operations that change a testbed instance, across processes.
// The lock file stays in /run/lock (it must outlive the testbed's directory).
func lock(n names) (unlock func(), err error) {
	path := n.lockFile()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("testbed: lock %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
