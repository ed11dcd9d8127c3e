package testbed

import (
	"fmt"
	"runtime"
	"strconv"
)

// MPIEnv is the Open MPI environment of every process run in a testbed host (commands
// and the agent), for the testbed's subnet (10.77.I.0/24). Checked against Open MPI
// 4.1.4 with `ompi_info --all --parsable` (each shows "source:environment"):
//
//   - OMPI_MCA_oob_tcp_if_include, OMPI_MCA_btl_tcp_if_include: daemons and ranks talk
//     over the testbed's subnet only (a host also has lo; the machine may have more).
//   - OMPI_MCA_hwloc_base_binding_policy=none: every host's daemon believes it owns the
//     whole machine and binds its first rank to core 0, so ranks of different hosts share
//     one CPU (a 4-rank CG ran 40× slower, ping-pong took 4 ms instead of 10 µs). Same as
//     mpirun --bind-to none.
//   - OMPI_MCA_mpi_yield_when_idle=1: ranks waiting for a message yield the CPU, since
//     hosts share the machine's cores.
//   - OMPI_ALLOW_RUN_AS_ROOT, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: the testbed runs as root.
//
// On real separate machines none of this applies: keep Open MPI's normal binding there.
func MPIEnv(subnet string) []string {
	return []string{
		"OMPI_MCA_oob_tcp_if_include=" + subnet,
		"OMPI_MCA_btl_tcp_if_include=" + subnet,
		"OMPI_MCA_hwloc_base_binding_policy=none",
		"OMPI_MCA_mpi_yield_when_idle=1",
		"OMPI_ALLOW_RUN_AS_ROOT=1",
		"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
	}
}

// HostEnv is the environment every process run in host h gets on top of the caller's:
// its own TMPDIR (Open MPI keeps its session directory there, and two daemons sharing one
// clash), its agent's data dir as SHOAL_DATA_DIR (so `shoal nodes`, `shoal leave` and
// `shoal run` in the host find its agent without flags), who it is (SHOAL_TESTBED_NODE,
// SHOAL_TESTBED_INSTANCE, SHOAL_TESTBED_CORES), the machine it claims to be
// ([HwlocSynthetic], [GoMaxProcs]), and [MPIEnv].
func HostEnv(h Host, instance int) []string {
	env := []string{
		"TMPDIR=" + h.TmpDir,
		"SHOAL_DATA_DIR=" + h.DataDir,
		"SHOAL_TESTBED_NODE=" + h.Name,
		"SHOAL_TESTBED_INSTANCE=" + strconv.Itoa(instance),
		"SHOAL_TESTBED_CORES=" + strconv.Itoa(h.Cores),
	}
	if h.Cores > 0 {
		env = append(env, "HWLOC_SYNTHETIC="+HwlocSynthetic(h.Cores), "GOMAXPROCS="+strconv.Itoa(GoMaxProcs(h.Cores)))
	}
	return append(env, MPIEnv(names{instance}.subnet())...)
}

// HwlocSynthetic is the hwloc topology of a host with the given number of cores (one
// package, one hardware thread per core): the HWLOC_SYNTHETIC of every process in a
// testbed host, so that Open MPI (mpirun and its daemons; hwloc reads the variable) sees
// as many cores as the host's --cores says, not the machine's CPUs. Without it a host
// with more --cores than the machine has CPUs cannot start a rankfile that uses its
// cores: Shoal numbers a host's slots up to its cores, and Open MPI 4.1 rejects
// "slot=2" on a machine with 2 processing units (mpirun exits 1 with no message).
// Binding is off on the testbed ([MPIEnv]), so the topology names no real CPU.
func HwlocSynthetic(cores int) string {
	return fmt.Sprintf("pack:1 core:%d pu:1", cores)
}

// GoMaxProcs is the GOMAXPROCS of every process in a testbed host with the given number of
// cores: the Go runtime of a real host sizes itself to the host's CPUs, so an agent (and
// shoal rsh, shoal exec-rank) on a 1-core host runs one P, not one per CPU of the machine
// under the testbed. Without it, 32 one-core hosts on 2 CPUs ran 32 agents of 2 Ps each:
// perf put 0.29 CPU-s of a 32-rank launch in their schedulers, and idle they used 0.35 to
// 0.38 CPU-s a second against 0.33 with it. Never more than the machine's CPUs: more Ps
// than CPUs only adds threads.
func GoMaxProcs(cores int) int {
	return min(cores, runtime.NumCPU())
}

// InstanceFromEnv returns the testbed instance named by SHOAL_TESTBED_INSTANCE (set in
// every host), or def when it is unset.
func InstanceFromEnv(getenv func(string) string, def int) (int, error) {
	s := getenv("SHOAL_TESTBED_INSTANCE")
	if s == "" {
		return def, nil
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i > MaxInstance {
		return 0, fmt.Errorf("%w: SHOAL_TESTBED_INSTANCE = %q: want 0 to %d", ErrInvalidConfig, s, MaxInstance)
	}
	return i, nil
}
