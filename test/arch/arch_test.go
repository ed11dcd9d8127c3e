// Package arch checks hosts of another instruction set on the testbed: arm64 hosts run
// in the Debian arm64 root of `make arm64-root` under qemu-aarch64, with the agent built
// for linux/arm64 (`make arm64-agent`), and say so in `shoal nodes`; an MPI program built
// inside that root with its own Open MPI runs across them through Shoal. The tests share
// one testbed (instance 235): n1 amd64, n2 and n3 arm64. Neither the root nor the arm64
// agent is built by make test: without them the tests are skipped, saying what to run.
package arch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 235

var bed = &testenv.Shared{Config: testbed.Config{
	Nodes: 3, Cores: []int{2}, Instance: instance,
	Arch: []string{testbed.ArchAmd64, testbed.ArchArm64, testbed.ArchArm64},
}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// up brings up the shared testbed, or skips when this machine cannot run arm64 hosts.
func up(t *testing.T) *testbed.Bed {
	t.Helper()
	testenv.NeedTestbed(t)
	if err := testbed.CheckArm64(""); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat(arm64Shoal()); err != nil {
		t.Skip("bin/arm64/shoal not built (make arm64-agent)")
	}
	return bed.Up(t)
}

func arm64Shoal() string { return filepath.Join(testenv.Root, "bin/arm64/shoal") }

// shoal runs `shoal ARGS` in node, with the agent's own build there, and returns its
// stdout.
func shoal(t *testing.T, b *testbed.Bed, node string, args ...string) string {
	t.Helper()
	h, err := b.Host(node)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(testenv.Root, "bin/shoal")
	if h.Arch == testbed.ArchArm64 {
		bin = arm64Shoal()
	}
	out, err := b.Exec(context.Background(), node, append([]string{bin}, args...)...)
	if err != nil {
		t.Fatalf("shoal %s on %s: %v\n%s", strings.Join(args, " "), node, err, out)
	}
	return string(out)
}

// Every agent announces the instruction set it was built for: the arm64 hosts' agents
// run the linux/arm64 build, and every node lists each node's.
func TestNodesShowArch(t *testing.T) {
	b := up(t)
	want := map[string]string{"n1": "amd64", "n2": "arm64", "n3": "arm64"}
	for _, from := range []string{"n1", "n3"} {
		var list api.NodeList
		if err := json.Unmarshal([]byte(shoal(t, b, from, "nodes", "--json")), &list); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, n := range list.Nodes {
			got[n.Name] = n.Arch
		}
		for name, arch := range want {
			if got[name] != arch {
				t.Errorf("shoal nodes --json on %s: %s has arch %q, want %q", from, name, got[name], arch)
			}
		}
	}
	table := shoal(t, b, "n1", "nodes")
	for name, arch := range want {
		found := false
		for _, line := range strings.Split(table, "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[0] == name && f[4] == arch {
				found = true
			}
		}
		if !found {
			t.Errorf("shoal nodes: no line for %s with ARCH %s:\n%s", name, arch, table)
		}
	}
}

// sumProgram is a plain MPI program: each rank adds (rank+1)·1000003, rank 0 prints the
// sum, the machine it runs on and every rank's host.
const sumProgram = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

int main(int argc, char **argv) {
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	struct utsname u;
	uname(&u);
	char host[64] = {0};
	strncpy(host, u.nodename, sizeof host - 1);
	char *hosts = malloc(sizeof host * size);
	MPI_Gather(host, sizeof host, MPI_CHAR, hosts, sizeof host, MPI_CHAR, 0, MPI_COMM_WORLD);
	long v = (rank + 1) * 1000003L, sum = 0;
	MPI_Reduce(&v, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("size=%d sum=%ld machine=%s hosts=", size, sum, u.machine);
		for (int i = 0; i < size; i++)
			printf("%s%s", i ? "," : "", hosts + i * sizeof host);
		printf("\n");
	}
	free(hosts);
	MPI_Finalize();
	return 0;
}
`

// A plain MPI program compiled inside the arm64 root with that root's mpicc runs its two
// ranks on the two arm64 hosts, launched by Shoal from one of them with that root's Open
// MPI.
func TestOpenMPIAcrossArm64Hosts(t *testing.T) {
	b := up(t)
	dir := t.TempDir() // under /tmp, which the arm64 hosts see at the same path
	src, prog := filepath.Join(dir, "sum.c"), filepath.Join(dir, "sum")
	if err := os.WriteFile(src, []byte(sumProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Exec(context.Background(), "n2", "mpicc.openmpi", "-O2", "-o", prog, src); err != nil {
		t.Fatalf("mpicc in n2: %v\n%s", err, out)
	}
	leaveAmd64(t, b)
	out := shoal(t, b, "n2", "run", "-n", "2", "--ranks-per-node", "1", "--", prog)
	want := "size=2 sum=3000009 machine=aarch64 hosts="
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if after, ok := strings.CutPrefix(l, "[0] "); ok && strings.HasPrefix(after, "size=") {
			line = after
		}
	}
	if !strings.HasPrefix(line, want) {
		t.Fatalf("shoal run printed\n%s\nwant a line starting %q", out, want)
	}
	t.Logf("rank 0 printed: %s", line)
	hosts := strings.Split(strings.TrimPrefix(line, want), ",")
	if len(hosts) != 2 || hosts[0] == hosts[1] || !strings.HasPrefix(hosts[0], "n") || hosts[0] == "n1" || hosts[1] == "n1" {
		t.Errorf("ranks ran on %v, want one on each of n2 and n3", hosts)
	}
}

// leaveAmd64 makes n1, the amd64 host, leave the cluster unless it has, and waits until
// the arm64 hosts' job store has a leader again: Open MPI runs no world over both
// instruction sets, and shoal run does not place a job by instruction set, so the jobs of
// these tests run where only the arm64 hosts are left.
func leaveAmd64(t *testing.T, b *testbed.Bed) {
	t.Helper()
	nodes := func() []api.Node {
		var list api.NodeList
		if err := json.Unmarshal([]byte(shoal(t, b, "n2", "nodes", "--json")), &list); err != nil {
			t.Fatal(err)
		}
		return list.Nodes
	}
	for _, n := range nodes() {
		if n.Name == "n1" && n.State == "alive" {
			shoal(t, b, "n1", "leave")
		}
	}
	// Two voters remain: under load a slow one holds up the store for a moment.
	poll.Until(t, time.Minute, func() string { return api.Quorum(nodes()) })
}

// heatArgs make a run of a few seconds under qemu with a checkpoint every 500 ms.
var heatArgs = []string{"--size", "200", "--steps", "1500"}

// The C heat built inside the arm64 root (make build-arm64) runs on the two arm64 hosts;
// its rank 1 is killed after epoch 2, and the job restarts from an epoch and ends with
// the checksum of an uninterrupted run.
func TestHeatKilledRankOnArm64(t *testing.T) {
	b := up(t)
	heat := filepath.Join(testenv.Root, "build/arm64/examples/heat")
	if _, err := os.Stat(heat); err != nil {
		t.Skip("build/arm64/examples/heat not built (make build-arm64)")
	}
	ref, err := b.Exec(context.Background(), "n2", append([]string{"mpirun.openmpi", "-n", "1", heat + "-plain"}, heatArgs...)...)
	if err != nil {
		t.Fatalf("reference run in n2: %v\n%s", err, ref)
	}
	want := watch.Field(string(ref), "checksum")
	if want == "" {
		t.Fatalf("reference run printed no checksum:\n%s", ref)
	}
	leaveAmd64(t, b)
	argv := append([]string{arm64Shoal(), "run", "-n", "2", "--ranks-per-node", "1", "--ckpt-interval", "500ms", "--", heat}, heatArgs...)
	cmd, err := b.Command(context.Background(), "n2", append(argv, "--pace", "3000")...)
	if err != nil {
		t.Fatal(err)
	}
	p := watch.Start(t, cmd)
	job := p.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	for {
		// Epochs can be overtaken: wait for any at least 2.
		if n, _ := strconv.Atoi(p.WaitLine(`epoch (\d+) complete`, 2*time.Minute)[1]); n >= 2 {
			break
		}
	}
	syscall.Kill(rankPID(t, b, job, 1), syscall.SIGKILL)
	if code := p.Wait(4 * time.Minute); code != 0 {
		t.Fatalf("heat exited %d after the kill", code)
	}
	out := p.Output()
	if !strings.Contains(out, "shoal: rank 1 killed by signal 9; restarting from epoch") {
		t.Errorf("no restart line naming rank 1 and signal 9:\n%s", out)
	}
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum %q, want %q (uninterrupted run)\n%s", got, want, out)
	}
	t.Logf("checksum %s after the restart, as uninterrupted", want)
}

// rankPID is the pid of rank of job on whichever arm64 host runs it: the hosts share
// the machine's process table.
func rankPID(t *testing.T, b *testbed.Bed, job string, rank int) int {
	t.Helper()
	for _, node := range []string{"n2", "n3"} {
		h, err := b.Host(node)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(h.DataDir, "jobs", job, "ranks", fmt.Sprintf("r%06d", rank))); err == nil {
			return testenv.RankPID(t, h.DataDir, job, rank)
		}
	}
	t.Fatalf("no arm64 host runs rank %d of job %s", rank, job)
	return 0
}
