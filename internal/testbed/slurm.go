package testbed

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The Slurm cluster of a testbed ([Config].Slurm), from Debian's packages (Slurm 22.05):
//
//   - one munged in the machine's own namespace, with a key and a socket of the
//     testbed's own (DIR/slurm/munge.key, DIR/slurm/munge.socket): a unix socket is
//     reached through the file system, so it serves every host, and it never touches
//     the machine's own /run/munge;
//   - slurmctld in n1, listening on 10.77.I.11:6817;
//   - one slurmd in every host, each with its own spool dir, pid file, log and TmpFS
//     (the %n of slurm.conf); NodeName is the host's name, which is its hostname in its
//     UTS namespace, as slurmd wants;
//   - DIR/slurm/slurm.conf, named by SLURM_CONF in every host, so sbatch, srun, sinfo
//     and scontrol run in a host find the cluster;
//   - a TaskProlog that gives every task the environment of the host it runs in
//     ([HostEnv]: TMPDIR, the Open MPI settings): a job otherwise carries the
//     submitting host's TMPDIR to all its nodes.
//
// Every slurmd and slurmctld runs inside its host, so [Bed.Kill] takes a host out of
// Slurm as it does out of Shoal, and Slurm marks it DOWN after SlurmdTimeout.

// SlurmDaemons are the programs a testbed with Slurm needs, with the Debian package of
// each.
var SlurmDaemons = []struct{ Program, Package string }{
	{"munged", "munge"},
	{"slurmctld", "slurmctld"},
	{"slurmd", "slurmd"},
	{"sinfo", "slurm-client"},
}

// ErrNoSlurm: Slurm or munge is not installed.
var ErrNoSlurm = errors.New("testbed: Slurm is not installed")

// slurmState is what the state file records of a testbed's Slurm cluster.
type slurmState struct {
	Dir         string `json:"dir"`          // DIR/slurm
	Conf        string `json:"conf"`         // slurm.conf, SLURM_CONF in every host
	MungeSocket string `json:"munge_socket"` // the munged every host uses
	MungedPID   int    `json:"munged_pid"`
	CtldPID     int    `json:"slurmctld_pid"`
	CtldLog     string `json:"slurmctld_log"`
}

// slurmTimeout bounds the wait for every slurmd to register with slurmctld.
const slurmTimeout = 30 * time.Second

func (n names) slurmDir() string { return n.dir() + "/slurm" }

// CheckSlurm reports, wrapping [ErrNoSlurm], which of the programs a testbed with Slurm
// runs are missing, and how to install them.
func CheckSlurm() error {
	var missing, pkgs []string
	for _, d := range SlurmDaemons {
		if _, err := exec.LookPath(d.Program); err != nil {
			missing = append(missing, d.Program)
			pkgs = append(pkgs, d.Package)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: no %s (apt-get install %s; make deps installs them)",
		ErrNoSlurm, strings.Join(missing, ", "), strings.Join(pkgs, " "))
}

// slurmConf is the slurm.conf of the testbed: the settings a cluster of namespace hosts
// on one machine needs, each with its reason in docs/testbed.md.
func slurmConf(n names, st *state) string {
	dir := n.slurmDir()
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by shoal testbed up --slurm (instance %d); removed by shoal testbed down.\n", n.inst)
	first := st.Hosts[0]
	for _, kv := range [][2]string{
		{"ClusterName", fmt.Sprintf("shoal%d", n.inst)},
		{"SlurmctldHost", fmt.Sprintf("%s(%s)", first.Name, first.IP)},
		{"SlurmUser", "root"},
		{"SlurmdUser", "root"},
		{"AuthType", "auth/munge"},
		{"CredType", "cred/munge"},
		// cred_expire is also how long a requeued job waits before it may run
		// again (120 s by default): the tests requeue jobs.
		{"AuthInfo", "socket=" + dir + "/munge.socket,cred_expire=10"},
		{"StateSaveLocation", dir + "/state"},
		{"SlurmctldPidFile", dir + "/slurmctld.pid"},
		{"SlurmctldLogFile", dir + "/slurmctld.log"},
		// %n is the node's name: without a TmpFS of its own, the hosts' slurmstepds
		// share one directory (PMIx's collides).
		{"SlurmdSpoolDir", n.dir() + "/%n/slurmd"},
		{"SlurmdPidFile", n.dir() + "/%n/slurmd.pid"},
		{"SlurmdLogFile", n.dir() + "/%n/slurmd.log"},
		{"TmpFS", n.dir() + "/%n/tmp"},
		{"TaskProlog", dir + "/task-prolog"},
		// The hosts share the machine's cores and cgroups: slurmd takes the cores
		// slurm.conf says, and tracks processes by parent pid.
		{"SlurmdParameters", "config_overrides"},
		{"ProctrackType", "proctrack/linuxproc"},
		{"TaskPlugin", "task/none"},
		{"JobAcctGatherType", "jobacct_gather/none"},
		{"AccountingStorageType", "accounting_storage/none"},
		{"MpiDefault", "none"},
		{"SelectType", "select/cons_tres"},
		{"SelectTypeParameters", "CR_Core"},
		{"SchedulerType", "sched/backfill"},
		// A requeued job becomes eligible when its wait is over, which no event
		// announces: the schedulers look every 2 s instead of every 60 s and 30 s.
		{"SchedulerParameters", "sched_interval=2,bf_interval=2"},
		// A killed host is DOWN 10 s after its last contact, and back by itself
		// when its slurmd registers again.
		{"SlurmdTimeout", "10"},
		{"ReturnToService", "2"},
		{"KillWait", "5"},
		{"InactiveLimit", "0"},
		// A job of partition urgent preempts the jobs of partition shoal it needs
		// the nodes of: SIGTERM to their steps' tasks, then after their
		// partition's GraceTime the end of the job and a requeue.
		{"PreemptType", "preempt/partition_prio"},
		{"PreemptMode", "REQUEUE"},
	} {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	for _, h := range st.Hosts {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=%s CPUs=%d Sockets=1 CoresPerSocket=%d ThreadsPerCore=1 RealMemory=1024 State=UNKNOWN\n",
			h.Name, h.IP, h.Cores, h.Cores)
	}
	// Whole nodes, as MPI clusters usually give them: an allocation's agent offers its
	// ranks the cores Slurm allocated on its node.
	fmt.Fprintf(&b, "PartitionName=shoal Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE PriorityTier=1 GraceTime=60\n")
	fmt.Fprintf(&b, "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE PriorityTier=2 PreemptMode=OFF\n")
	return b.String()
}

// taskEnv is the output of the TaskProlog in host h: one "export NAME=VALUE" line per
// variable of [HostEnv], which slurmstepd puts into the task's environment.
func taskEnv(h Host, inst int) string {
	var b strings.Builder
	for _, kv := range HostEnv(h, inst) {
		fmt.Fprintf(&b, "export %s\n", kv)
	}
	return b.String()
}

// startSlurm writes the configuration, starts munged, slurmctld and every slurmd, and
// waits until every node is idle.
func (b *Bed) startSlurm(ctx context.Context, st *state) error {
	if err := CheckSlurm(); err != nil {
		return err
	}
	n := b.n
	dir := n.slurmDir()
	s := &slurmState{
		Dir: dir, Conf: dir + "/slurm.conf", MungeSocket: dir + "/munge.socket",
		CtldLog: dir + "/slurmctld.log",
	}
	// munged wants its socket's directory searchable by all (0755).
	for _, d := range []string{dir, dir + "/state", dir + "/env"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, h := range st.Hosts {
		if err := os.MkdirAll(filepath.Join(h.Dir, "slurmd"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "env", h.Name), []byte(taskEnv(h, n.inst)), 0o644); err != nil {
			return err
		}
	}
	prolog := "#!/bin/sh\n# The environment of the host this task runs in (see shoal testbed).\nexec cat " +
		shellQuote(dir+"/env/") + `"$(uname -n)"` + "\n"
	if err := os.WriteFile(dir+"/task-prolog", []byte(prolog), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(s.Conf, []byte(slurmConf(n, st)), 0o644); err != nil {
		return err
	}
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(dir+"/munge.key", key, 0o400); err != nil {
		return err
	}
	st.Slurm = s
	if err := st.save(n); err != nil {
		return err
	}

	pid, err := startDaemon(dir+"/munged.out", nil, "munged", "--foreground",
		"--socket="+s.MungeSocket, "--key-file="+dir+"/munge.key",
		"--pid-file="+dir+"/munged.pid", "--seed-file="+dir+"/munged.seed", "--log-file="+dir+"/munged.log")
	if err != nil {
		return err
	}
	s.MungedPID = pid
	if err := st.save(n); err != nil {
		return err
	}
	if err := pollUntil(ctx, 10*time.Second, func() (bool, error) {
		if !running(pid) {
			return false, fmt.Errorf("testbed: munged exited:\n%s", tail(dir+"/munged.out", 5))
		}
		_, err := os.Stat(s.MungeSocket)
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("testbed: munged: %w", err)
	}

	first := &st.Hosts[0]
	if s.CtldPID, err = startDaemon(dir+"/slurmctld.out", prefix(st, first), "slurmctld", "-D", "-f", s.Conf); err != nil {
		return err
	}
	for i := range st.Hosts {
		h := &st.Hosts[i]
		if h.SlurmdPID, err = startDaemon(filepath.Join(h.Dir, "slurmd.out"), prefix(st, h), "slurmd", "-D", "-f", s.Conf); err != nil {
			return err
		}
	}
	if err := st.save(n); err != nil {
		return err
	}
	return b.waitSlurm(ctx, st)
}

// waitSlurm waits until sinfo, run in n1, shows every host idle.
func (b *Bed) waitSlurm(ctx context.Context, st *state) error {
	s := st.Slurm
	last := ""
	err := pollUntil(ctx, slurmTimeout, func() (bool, error) {
		if !running(s.CtldPID) {
			return false, fmt.Errorf("slurmctld exited; last lines of %s:\n%s", s.CtldLog, tail(s.CtldLog, 5))
		}
		for i := range st.Hosts {
			if err := slurmdExited(&st.Hosts[i]); err != nil {
				return false, err
			}
		}
		states, err := b.slurmNodes(ctx, st)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprint(states)
		for _, h := range st.Hosts {
			if states[h.Name] != "idle" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("testbed: Slurm not ready: %w (nodes: %s)", err, last)
	}
	return nil
}

// restartSlurm starts the Slurm daemons of host h that [Bed.Kill] ended (its slurmd;
// slurmctld too in n1) and waits until Slurm counts the node again: a node DOWN
// returns by itself when its slurmd registers (ReturnToService=2).
func (b *Bed) restartSlurm(ctx context.Context, st *state, h *Host) error {
	s := st.Slurm
	if h == &st.Hosts[0] && !running(s.CtldPID) {
		pid, err := startDaemon(s.Dir+"/slurmctld.out", prefix(st, h), "slurmctld", "-D", "-f", s.Conf)
		if err != nil {
			return err
		}
		s.CtldPID = pid
	}
	if running(h.SlurmdPID) {
		return fmt.Errorf("testbed: the slurmd of %s runs already (pid %d)", h.Name, h.SlurmdPID)
	}
	pid, err := startDaemon(filepath.Join(h.Dir, "slurmd.out"), prefix(st, h), "slurmd", "-D", "-f", s.Conf)
	if err != nil {
		return err
	}
	h.SlurmdPID = pid
	if err := st.save(b.n); err != nil {
		return err
	}
	last := ""
	err = pollUntil(ctx, slurmTimeout, func() (bool, error) {
		if err := slurmdExited(h); err != nil {
			return false, err
		}
		states, err := b.slurmNodes(ctx, st)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = states[h.Name]
		return !strings.ContainsAny(last, "*~#") && !strings.HasPrefix(last, "down") && last != "", nil
	})
	if err != nil {
		return fmt.Errorf("testbed: %s not back in Slurm: %w (state: %s)", h.Name, err, last)
	}
	return nil
}

// slurmdExited says, with the last lines of its log, that host h's slurmd is no
// longer running; nil while it runs.
func slurmdExited(h *Host) error {
	if running(h.SlurmdPID) {
		return nil
	}
	log := filepath.Join(h.Dir, "slurmd.log")
	return fmt.Errorf("the slurmd of %s exited; last lines of %s:\n%s", h.Name, log, tail(log, 5))
}

// slurmNodes runs sinfo in n1 and returns the state of every node by name.
func (b *Bed) slurmNodes(ctx context.Context, st *state) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	argv := append(prefix(st, &st.Hosts[0]), "sinfo", "--noheader", "--Node", "--format=%N %T")
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("sinfo: %v: %s", err, firstLine(string(out)))
	}
	states := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			states[f[0]] = f[1]
		}
	}
	return states, nil
}

// SlurmNodes returns the state sinfo gives each host (idle, allocated, down*, …), or an
// error on a testbed without Slurm.
func (b *Bed) SlurmNodes(ctx context.Context) (map[string]string, error) {
	st, err := loadState(b.n)
	if err != nil {
		return nil, err
	}
	if st.Slurm == nil {
		return nil, errors.New("testbed: this testbed runs no Slurm")
	}
	return b.slurmNodes(ctx, st)
}

// Slurm reports whether the testbed runs Slurm, and its slurm.conf.
func (b *Bed) Slurm() (bool, string, error) {
	st, err := loadState(b.n)
	if err != nil {
		return false, "", err
	}
	if st.Slurm == nil {
		return false, "", nil
	}
	return true, st.Slurm.Conf, nil
}

// slurmEnv is what every process in a host of a testbed with Slurm gets besides
// [HostEnv]: where the cluster's slurm.conf is.
func (s *slurmState) env() []string {
	if s == nil {
		return nil
	}
	return []string{"SLURM_CONF=" + s.Conf}
}

// startDaemon starts argv (after the host prefix pre, if any) in its own session with
// its output appended to log, and returns its pid; it is reaped while this process
// lives, by init after.
func startDaemon(log string, pre []string, argv ...string) (int, error) {
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	full := append(append([]string(nil), pre...), argv...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("testbed: start %s: %w", argv[0], err)
	}
	go cmd.Wait()
	return cmd.Process.Pid, nil
}

// pollUntil polls ok every 100 ms until it returns true or an error, or timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := ok()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopMunged kills the testbed's munged, the one Slurm process outside the hosts: the
// pid in its pid file in DIR/slurm, else pid (from the state file), if its command line
// names that directory, so that a pid reused since is left alone.
func stopMunged(n names, pid int) error {
	dir := n.slurmDir()
	if b, err := os.ReadFile(dir + "/munged.pid"); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pid = p
		}
	}
	if pid <= 1 {
		return nil
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), dir+"/") {
		return nil
	}
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("testbed: munged (pid %d) survives SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
