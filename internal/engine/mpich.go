package engine

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// MPICH builds mpiexec command lines for MPICH 4 and its Hydra process manager.
// MPICH and Open MPI are not ABI compatible: the program must be built with MPICH's
// mpicc (Shoal's build does that in build/mpich/).
type MPICH struct {
	// Mpiexec is the launcher's path; "" means "mpiexec.mpich" on PATH (Debian's name,
	// which does not depend on which MPI the mpiexec alternative points at).
	Mpiexec string
}

// Name implements [Engine].
func (MPICH) Name() string { return "mpich" }

func (m MPICH) path() string {
	if m.Mpiexec != "" {
		return m.Mpiexec
	}
	return "mpiexec.mpich"
}

// Command implements [Engine]. Hydra tags output with the same "[1,RANK]<stdout>:" as
// Open MPI's --tag-output (on both streams; the pipe tells them apart), passes this
// process's environment on to every rank, allows more ranks than cores and does not
// bind them, so Oversubscribe and NoBind need no flag. Hostfile is a Hydra machine
// file ("host:slots" lines) and Rankfile is not used: Hydra places ranks in the order
// of the machine file (see place.MachineFile). RshAgent becomes -launcher-exec (Hydra
// runs it as ssh would be run: AGENT HOST COMMAND...), and then the ranks keep the
// environment their host's daemon was started with (-genvnone: Hydra would otherwise
// give every rank this process's, whose data directory is this host's) plus Env;
// LocalAddr becomes -localhost, the address Hydra's daemons call back. Every rank
// also gets the settings that keep UCX from SysV IPC (see [ucxNoSysVIPC]) that Env
// does not set.
func (m MPICH) Command(l Launch) *exec.Cmd {
	args := []string{"-n", strconv.Itoa(l.NRanks), "-prepend-pattern", "[1,%r]<stdout>:"}
	if l.Hostfile != "" {
		args = append(args, "-f", l.Hostfile)
	}
	if l.RshAgent != "" {
		args = append(args, "-launcher", "ssh", "-launcher-exec", l.RshAgent, "-genvnone")
	}
	if l.LocalAddr != "" {
		args = append(args, "-localhost", l.LocalAddr)
	}
	if l.Dir != "" {
		args = append(args, "-wdir", l.Dir)
	}
	for _, kv := range append(append([]string(nil), l.Env...), noSysVIPC(l.Env)...) {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "-genv", k, v)
	}
	args = append(args, l.Wrapper...)
	args = append(args, l.Program)
	args = append(args, l.Args...)
	cmd := exec.Command(m.path(), args...)
	cmd.Dir = l.Dir
	return cmd
}

// Installed implements [Engine].
func (m MPICH) Installed() error {
	if _, err := exec.LookPath(m.path()); err != nil {
		return fmt.Errorf("engine: %s not found (install MPICH: apt-get install mpich libmpich-dev)", m.path())
	}
	return nil
}

// Version implements [Engine].
func (m MPICH) Version() (string, error) {
	if err := m.Installed(); err != nil {
		return "", err
	}
	out, err := exec.Command(m.path(), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("engine: %s --version: %w", m.path(), err)
	}
	// Hydra's first line is "HYDRA build details:"; the version is on the next.
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Version:"); ok {
			return "MPICH Hydra " + strings.TrimSpace(v), nil
		}
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), nil
}

// ucxNoSysVIPC keeps the ranks of Debian's MPICH 4.0, whose ch4 device runs over
// UCX, from calling SysV IPC, which Android's seccomp filter answers with SIGSYS:
// UCX's memory hooks test themselves with shmget and shmat as the library loads
// (UCX_MEM_EVENTS=no), and its sysv transport allocates with shmget (UCX_TLS=^sysv;
// its posix transport shares memory the same way through /dev/shm). Unlike Open
// MPI's, this is not what UCX does by itself: without memory events UCX keeps no
// cache of registered memory, which RDMA networks (InfiniBand, RoCE) use for large
// messages; shared memory and TCP do not.
var ucxNoSysVIPC = []string{"UCX_MEM_EVENTS=no", "UCX_TLS=^sysv"}

// noSysVIPC is what of ucxNoSysVIPC env does not set itself.
func noSysVIPC(env []string) []string {
	var out []string
	for _, kv := range ucxNoSysVIPC {
		k, _, _ := strings.Cut(kv, "=")
		if !hasEnv(env, k) {
			out = append(out, kv)
		}
	}
	return out
}

// hasEnv reports whether env (KEY=VALUE) sets key.
func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}
