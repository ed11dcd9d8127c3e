// Package engine starts jobs through the real MPI launcher (Open MPI's mpirun, MPICH's
// mpiexec; see [Engine]) and tells how a run ended. Shoal never reimplements MPI transports: co-located ranks
// get shared memory and remote ranks TCP, exactly as a plain mpirun launch gives them.
package engine

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
)

// Launch describes one run of a job: a fresh mpirun with its own rank layout.
type Launch struct {
	NRanks  int
	Program string   // absolute path of the executable
	Args    []string // the program's arguments
	Dir     string   // working directory of every rank
	Env     []string // extra KEY=VALUE for every rank
	// Wrapper is prepended to the program, e.g. {"/usr/bin/shoal", "exec-rank", "--"}.
	Wrapper []string
	// Hostfile, when set, lists the hosts mpirun may use (and Rankfile pins each rank
	// to one). Empty means every rank on this machine.
	Hostfile string
	Rankfile string
	// Hosts is how many hosts the launch runs on (0 or 1: this machine
	// alone) and LocalRanks how many of its ranks run on the launcher's own;
	// the launcher's limit on open files follows them ([LauncherOpenFiles]).
	Hosts, LocalRanks int
	// RshAgent is what mpirun runs instead of ssh to start its daemons on other hosts.
	RshAgent string
	// LocalAddr is the launching node's address as the other hosts reach it,
	// for a launcher whose daemons would otherwise call back to its host name
	// (Hydra's), which a cluster of Shoal nodes need not resolve.
	LocalAddr string
	// Oversubscribe lets mpirun start more ranks on a host than it has cores; binding is
	// then turned off and waiting ranks yield the CPU, or they would spin against each
	// other on the same cores.
	Oversubscribe bool
	// NoBind turns off process binding even without oversubscription (testbed hosts
	// share one machine's cores; see docs/testbed.md).
	NoBind bool
	// MCA holds extra --mca parameters.
	MCA map[string]string
	// RunAs, when set, is the user the launcher runs as, and so every rank it
	// starts itself: the job's owner. Nil: the caller's user.
	RunAs *syscall.Credential
}

// OpenMPI builds mpirun command lines for Open MPI 4.1.
type OpenMPI struct {
	// Mpirun is the launcher's path; "" means "mpirun.openmpi" on PATH (Debian's name,
	// which does not depend on which MPI the mpirun alternative points at).
	Mpirun string
}

// Name implements [Engine].
func (OpenMPI) Name() string { return "openmpi" }

func (o OpenMPI) path() string {
	if o.Mpirun != "" {
		return o.Mpirun
	}
	return "mpirun.openmpi"
}

// Command returns the mpirun command for l. Its stdout carries the ranks' tagged

// maxRadix is the routed_radix Shoal gives Open MPI's mpirun across hosts: every
// daemon of up to that many hosts is mpirun's own child. (Open MPI walks the radix
// tree in int arithmetic that a radix of 2^20 overflows: "could not set relations
// bit!", and mpirun crashes.)
const maxRadix = 1024

// output (see [TagReader]).
func (o OpenMPI) Command(l Launch) *exec.Cmd {
	mpirun := o.path()
	args := []string{"--tag-output", "-n", strconv.Itoa(l.NRanks)}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	if l.Oversubscribe {
		args = append(args, "--oversubscribe")
	}
	if l.Oversubscribe || l.NoBind {
		args = append(args, "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1")
	}
	if l.Hostfile != "" {
		args = append(args, "--hostfile", l.Hostfile)
	}
	if l.Rankfile != "" {
		args = append(args, "--rankfile", l.Rankfile)
	}
	if l.RshAgent != "" {
		// mpirun starts every daemon itself: past routed_radix hosts (64 by
		// default) Open MPI has daemons start the next ones, and there the agent
		// (shoal rsh) finds neither the nodes' addresses ($SHOAL_RSH_NODES, set
		// for mpirun only) nor a grant issued for a launch from that node. A
		// radix of maxRadix keeps the launch tree flat up to that many hosts, as
		// it is below 64. (plm_rsh_no_tree_spawn would do it too, but it also
		// has each daemon --daemonize: the launch the agent runs ends at once,
		// taking the daemon with it, and mpirun waits for it for ever.)
		args = append(args, "--mca", "plm_rsh_agent", l.RshAgent, "--mca", "routed_radix", strconv.Itoa(maxRadix))
	}
	if _, set := l.MCA["shmem"]; !set && !hasEnv(l.Env, "OMPI_MCA_shmem") {
		// mmap is the component Open MPI chooses wherever SysV works (priority 50
		// against posix's 40 and sysv's 30); naming it keeps sysv from being
		// queried at all, and its query calls shmget, which Android's seccomp
		// filter answers with SIGSYS: mpirun would die before any rank started.
		// Given here, it reaches mpirun, its daemons and the ranks. A job's own
		// OMPI_MCA_shmem wins.
		args = append(args, "--mca", "shmem", "mmap")
	}
	for _, k := range slices.Sorted(maps.Keys(l.MCA)) {
		args = append(args, "--mca", k, l.MCA[k])
	}
	if l.Dir != "" {
		args = append(args, "--wdir", l.Dir)
	}
	for _, kv := range l.Env {
		args = append(args, "-x", kv)
	}
	args = append(args, l.Wrapper...)
	args = append(args, l.Program)
	args = append(args, l.Args...)
	cmd := exec.Command(mpirun, args...)
	cmd.Dir = l.Dir
	return cmd
}

// Version returns the first line of `mpirun --version`, or an error saying that Open
// MPI is missing.
func (o OpenMPI) Version() (string, error) {
	if err := o.Installed(); err != nil {
		return "", err
	}
	return firstLine(o.path(), "--version")
}

// Installed implements [Engine].
func (o OpenMPI) Installed() error {
	if _, err := exec.LookPath(o.path()); err != nil {
		return fmt.Errorf("engine: %s not found (install Open MPI: apt-get install openmpi-bin libopenmpi-dev)", o.path())
	}
	return nil
}
