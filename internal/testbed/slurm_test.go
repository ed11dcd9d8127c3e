package testbed

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestSlurmConf checks the settings a Slurm cluster of namespace hosts needs (see
// slurm.go): one node line per host with its address and cores, and everything a
// host's slurmd writes kept apart by %n.
func TestSlurmConf(t *testing.T) {
	n := names{236}
	st := &state{Hosts: []Host{
		{Name: "n1", Index: 1, IP: n.hostIP(1), Cores: 2},
		{Name: "n2", Index: 2, IP: n.hostIP(2), Cores: 3},
	}}
	conf := slurmConf(n, st)
	for _, want := range []string{
		"SlurmctldHost=n1(10.77.236.11)\n",
		"AuthInfo=socket=/tmp/shoal-testbed-236/slurm/munge.socket,cred_expire=10\n",
		"SchedulerParameters=sched_interval=2,bf_interval=2\n",
		"SlurmdSpoolDir=/tmp/shoal-testbed-236/%n/slurmd\n",
		"SlurmdPidFile=/tmp/shoal-testbed-236/%n/slurmd.pid\n",
		"SlurmdLogFile=/tmp/shoal-testbed-236/%n/slurmd.log\n",
		"TmpFS=/tmp/shoal-testbed-236/%n/tmp\n",
		"ProctrackType=proctrack/linuxproc\n",
		"TaskPlugin=task/none\n",
		"SlurmdTimeout=10\n",
		"ReturnToService=2\n",
		"SlurmdParameters=config_overrides\n",
		"NodeName=n1 NodeAddr=10.77.236.11 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 ",
		"NodeName=n2 NodeAddr=10.77.236.12 CPUs=3 Sockets=1 CoresPerSocket=3 ThreadsPerCore=1 ",
		"PartitionName=shoal Nodes=ALL Default=YES",
		"PreemptType=preempt/partition_prio\n",
		"PreemptMode=REQUEUE\n",
		"PartitionName=urgent Nodes=ALL ",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q; got:\n%s", want, conf)
		}
	}
}

// TestTaskEnv: the TaskProlog gives each task its host's environment, TMPDIR first
// among it, one export line per variable (values with spaces whole).
func TestTaskEnv(t *testing.T) {
	h := Host{Name: "n2", TmpDir: "/tmp/shoal-testbed-236/n2/tmp", DataDir: "/tmp/shoal-testbed-236/n2/data", Cores: 2}
	env := taskEnv(h, 236)
	for _, want := range []string{
		"export TMPDIR=/tmp/shoal-testbed-236/n2/tmp\n",
		"export SHOAL_TESTBED_NODE=n2\n",
		"export HWLOC_SYNTHETIC=pack:1 core:2 pu:1\n",
		"export OMPI_MCA_btl_tcp_if_include=10.77.236.0/24\n",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("task env lacks %q; got:\n%s", want, env)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(env, "\n"), "\n") {
		if !strings.HasPrefix(l, "export ") {
			t.Errorf("line %q: want export NAME=VALUE", l)
		}
	}
}

// TestSlurm brings up two hosts running Slurm: srun runs a task in each host, as that
// host (its hostname, its TMPDIR through the TaskProlog), and Down stops every Slurm
// daemon, munged too, leaving nothing behind.
func TestSlurm(t *testing.T) {
	needRoot(t)
	if err := CheckSlurm(); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%v: make deps should have installed it", err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	b, err := Up(ctx, Config{Nodes: 2, Cores: []int{2}, Instance: testInstance, Slurm: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Down(ctx)
	out, err := b.Exec(ctx, "n1", "srun", "--nodes=2", "--ntasks-per-node=1", "--label",
		"sh", "-c", `echo "$(hostname) $SLURMD_NODENAME $TMPDIR"`)
	if err != nil {
		t.Fatalf("srun: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	want := []string{
		"0: n1 n1 " + b.n.hostDir(1) + "/tmp",
		"1: n2 n2 " + b.n.hostDir(2) + "/tmp",
	}
	if !slices.Equal(got, want) {
		t.Errorf("srun printed %q, want %q", got, want)
	}
	st, err := loadState(b.n)
	if err != nil {
		t.Fatal(err)
	}
	munged := st.Slurm.MungedPID
	if err := b.Down(ctx); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if running(munged) {
		t.Errorf("munged (pid %d) runs after Down", munged)
	}
	if l := leftovers(t, testInstance); len(l) > 0 {
		t.Errorf("after Down: %v", l)
	}
}
