// Package arch checks hosts of another instruction set on the testbed: arm64 hosts run
// in the Debian arm64 root of `make arm64-root` under qemu-aarch64, with the agent built
// for linux/arm64 (`make arm64-agent`), and say so in `shoal nodes`; an MPI program built
// inside that root with its own Open MPI runs across them through Shoal, placed there for
// its instruction set; a job with a build for each set moves from the amd64 hosts to the
// arm64 ones when the amd64 ones cannot hold it. The tests share one testbed (instance
// 235): n1 and n2 amd64, n3 and n4 arm64. The root, the arm64 agent and
// build/arm64 are built by make test (make test-arm64), where a missing one fails the
// tests; elsewhere they are skipped, saying what to run.
package arch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/node"
	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 235

var bed = &testenv.Shared{Config: testbed.Config{
	Nodes: 4, Cores: []int{2}, Instance: instance,
	Arch: []string{testbed.ArchAmd64, testbed.ArchAmd64, testbed.ArchArm64, testbed.ArchArm64},
}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// up brings up the shared testbed, or skips when this machine cannot run arm64 hosts.
func up(t *testing.T) *testbed.Bed {
	t.Helper()
	testenv.NeedTestbed(t)
	if err := testbed.CheckArm64(""); err != nil {
		missing(t, err.Error())
	}
	if _, err := os.Stat(arm64Shoal()); err != nil {
		missing(t, "bin/arm64/shoal not built (make arm64-agent)")
	}
	return bed.Up(t)
}

// missing skips the test for what the machine lacks, or fails it under make test
// (SHOAL_REQUIRE_BUILD), which builds the arm64 root, agent and programs first.
func missing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
		t.Fatalf("%s, though make test builds it (make test-arm64)", what)
	}
	t.Skip(what)
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
	want := map[string]string{"n1": "amd64", "n2": "amd64", "n3": "arm64", "n4": "arm64"}
	for _, from := range []string{"n1", "n3"} {
		var list node.List
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
// MPI: the amd64 hosts, though alive and idle, get none (the program is an arm64 one).
func TestOpenMPIAcrossArm64Hosts(t *testing.T) {
	b := up(t)
	dir := t.TempDir() // under /tmp, which the arm64 hosts see at the same path
	src, prog := filepath.Join(dir, "sum.c"), filepath.Join(dir, "sum")
	if err := os.WriteFile(src, []byte(sumProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Exec(context.Background(), "n3", "mpicc.openmpi", "-O2", "-o", prog, src); err != nil {
		t.Fatalf("mpicc in n3: %v\n%s", err, out)
	}
	out := shoal(t, b, "n3", "run", "-n", "2", "--ranks-per-node", "1", "--", prog)
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
	slices.Sort(hosts)
	if !slices.Equal(hosts, []string{"n3", "n4"}) {
		t.Errorf("ranks ran on %v, want one on each of n3 and n4", hosts)
	}
}

// heatArgs make a run of about 5 s with a checkpoint every 500 ms.
var heatArgs = []string{"--size", "200", "--steps", "1500", "--pace", "3000"}

// The C heat with a build for each instruction set runs on the amd64 pair, one rank a
// node; n2 is killed after epoch 2, and with no room left on amd64 the job continues on
// the arm64 pair from the newest epoch (written on amd64, read on arm64) and ends with
// the checksum of an uninterrupted run. Killing n2 leaves two of the three voters.
func TestHeatMovesToArm64(t *testing.T) {
	b := up(t)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	heatArm := filepath.Join(testenv.Root, "build/arm64/examples/heat")
	if _, err := os.Stat(heatArm); err != nil {
		missing(t, "build/arm64/examples/heat not built (make build-arm64)")
	}
	ref, err := b.Exec(context.Background(), "n1", append([]string{"mpirun.openmpi", "--allow-run-as-root", "-n", "1", heat + "-plain"}, heatArgs[:4]...)...)
	if err != nil {
		t.Fatalf("reference run in n1: %v\n%s", err, ref)
	}
	want := watch.Field(string(ref), "checksum")
	if want == "" {
		t.Fatalf("reference run printed no checksum:\n%s", ref)
	}
	argv := append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run", "-n", "2", "--ranks-per-node", "1", "--ckpt-interval", "500ms",
		"--program-for", "arm64=" + heatArm, "--", heat}, heatArgs...)
	moveToArm64(t, b, argv, want, 4*time.Minute)
}

// With --mix-arch and a build for each set, one world spans amd64 and arm64 hosts (Open
// MPI 4.1 runs it over TCP: docs/testbed.md), each host running its own build; a rank on
// an arm64 host is killed after epoch 2 and the world restarts from an epoch whose shards
// both sets wrote, ending with the checksum of an uninterrupted run. It runs on the hosts
// left alive (n2 was killed above, or is alive when this test runs alone), where it was
// placed (--no-replan: the rank to kill is found by that placement).
func TestMixedWorld(t *testing.T) {
	b := up(t)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	heatArm := filepath.Join(testenv.Root, "build/arm64/examples/heat")
	if _, err := os.Stat(heatArm); err != nil {
		missing(t, "build/arm64/examples/heat not built (make build-arm64)")
	}
	ref, err := b.Exec(context.Background(), "n1", append([]string{"mpirun.openmpi", "--allow-run-as-root", "-n", "1", heat + "-plain"}, heatArgs[:4]...)...)
	if err != nil {
		t.Fatalf("reference run in n1: %v\n%s", err, ref)
	}
	want := watch.Field(string(ref), "checksum")
	argv := append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run", "-n", "3", "--ranks-per-node", "1", "--ckpt-interval", "500ms",
		"--mix-arch", "--no-replan", "--program-for", "arm64=" + heatArm, "--", heat}, heatArgs...)
	cmd, err := b.Command(context.Background(), "n1", argv...)
	if err != nil {
		t.Fatal(err)
	}
	p := watch.Start(t, cmd)
	job := p.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	placed := p.WaitLine(`launching 3 ranks on 3 nodes \(([^)]*)\)`, time.Minute)[1]
	if !regexp.MustCompile(`n[12]:`).MatchString(placed) || !regexp.MustCompile(`n[34]:`).MatchString(placed) {
		t.Fatalf("ranks placed %s, want hosts of both sets", placed)
	}
	for {
		if n, _ := strconv.Atoi(p.WaitLine(`epoch (\d+) complete`, 2*time.Minute)[1]); n >= 2 {
			break
		}
	}
	armRank := -1
	for _, part := range strings.Fields(placed) {
		node, ranks, _ := strings.Cut(part, ":")
		if node == "n3" || node == "n4" {
			armRank, _ = strconv.Atoi(strings.SplitN(ranks, "-", 2)[0])
			h, err := b.Host(node)
			if err != nil {
				t.Fatal(err)
			}
			syscall.Kill(testenv.RankPID(t, h.DataDir, job, armRank), syscall.SIGKILL)
			break
		}
	}
	if code := p.Wait(4 * time.Minute); code != 0 {
		t.Fatalf("heat exited %d after the kill", code)
	}
	out := p.Output()
	if !strings.Contains(out, fmt.Sprintf("shoal: rank %d killed by signal 9; restarting from epoch", armRank)) {
		t.Errorf("no restart line naming rank %d and signal 9:\n%s", armRank, out)
	}
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum %q, want %q (uninterrupted run)\n%s", got, want, out)
	}
	t.Logf("ranks on %s, rank %d killed on arm64; checksum %s, as uninterrupted", placed, armRank, want)
}

// pythonFor is a python3 for both instruction sets at one path under dir, the way each
// machine of a real cluster has its own python3 with numpy, mpi4py and shoal: on an
// arm64 host the root's (its extras, `make arm64-root`) with the shoal package that
// `make build-arm64` installs in build/arm64/python; on an amd64 host the venv of make
// build. The testbed's hosts share the machine's file system, so one path has to say
// which.
func pythonFor(t *testing.T, dir string) string {
	t.Helper()
	for _, p := range []string{"usr/bin/python3", "usr/lib/python3/dist-packages/numpy", "usr/lib/python3/dist-packages/mpi4py", "usr/lib/python3/dist-packages/xxhash"} {
		if _, err := os.Stat(filepath.Join(testbed.DefaultArm64Root, p)); err != nil {
			missing(t, fmt.Sprintf("the arm64 root has no /%s (make arm64-root adds Python's packages)", p))
		}
	}
	for _, p := range []string{"build/arm64/python/shoal/_libshoal.py", "build/venv/bin/python"} {
		if _, err := os.Stat(filepath.Join(testenv.Root, p)); err != nil {
			missing(t, p+" not built (make build build-arm64)")
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(dir, "bin", "python3")
	script := fmt.Sprintf(`#!/bin/sh
case $(uname -m) in
aarch64) PYTHONPATH=%s exec /usr/bin/python3 "$@" ;;
*) exec %s "$@" ;;
esac
`, filepath.Join(testenv.Root, "build/arm64/python"), filepath.Join(testenv.Root, "build/venv/bin/python"))
	if err := os.WriteFile(python, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return python
}

// restartAgent starts node's agent again if it is not running (a test before killed the
// host), so that a test can kill it in its turn.
func restartAgent(t *testing.T, b *testbed.Bed, node string) {
	t.Helper()
	hosts, _, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.Name == node && !h.AgentAlive {
			if err := b.StartAgent(context.Background(), node); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pyHeatArgs make a run of a few seconds on amd64 with a checkpoint every 500 ms, and
// under a minute for what is left of it on arm64 under qemu.
var pyHeatArgs = []string{"--size", "100", "--steps", "400", "--pace", "5000"}

// The Python heat, the same script on both instruction sets (the interpreter runs by its
// path, and the script is staged to every node), runs on the amd64 pair, one rank a
// node; n2 is killed after epoch 2, and with no room left on amd64 the job continues on
// the arm64 pair from the newest epoch, in the root's python3 and mpi4py, and ends with
// the checksum of an uninterrupted run.
func TestPythonHeatMovesToArm64(t *testing.T) {
	b := up(t)
	python := pythonFor(t, t.TempDir())
	restartAgent(t, b, "n2") // killed by TestHeatMovesToArm64 when it ran first
	script := filepath.Join(testenv.Root, "examples/python/heat.py")
	ref, err := b.Exec(context.Background(), "n1", append([]string{"mpirun.openmpi", "--allow-run-as-root", "-n", "1",
		filepath.Join(testenv.Root, "build/examples/heat-plain")}, pyHeatArgs[:4]...)...)
	if err != nil {
		t.Fatalf("reference run in n1: %v\n%s", err, ref)
	}
	want := watch.Field(string(ref), "checksum")
	if want == "" {
		t.Fatalf("reference run printed no checksum:\n%s", ref)
	}
	argv := append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run", "-n", "2", "--ranks-per-node", "1", "--ckpt-interval", "500ms",
		"--", python, script}, pyHeatArgs...)
	out := moveToArm64(t, b, argv, want, 5*time.Minute)
	if !regexp.MustCompile(`heat: resumed at step [1-9]`).MatchString(out) {
		t.Errorf("heat.py did not resume from a saved step on arm64:\n%s", out)
	}
}

// moveToArm64 runs argv, a 2-rank heat of one rank a node, on n1: it runs on the amd64
// pair; n2 is killed after epoch 2, and with no room left on amd64 the job goes on on the
// arm64 pair from the newest epoch (written on amd64, read on arm64), and ends, within
// the time given, with checksum want. It returns the job's output.
func moveToArm64(t *testing.T, b *testbed.Bed, argv []string, want string, within time.Duration) string {
	t.Helper()
	cmd, err := b.Command(context.Background(), "n1", argv...)
	if err != nil {
		t.Fatal(err)
	}
	p := watch.Start(t, cmd)
	p.WaitLine(`^shoal: job ([^:]+):`, time.Minute)
	p.WaitLine(`running on the amd64 nodes; n3, n4 \(arm64\) left out: one MPI world per instruction set`, time.Minute)
	for {
		// Epochs can be overtaken: wait for any at least 2.
		if n, _ := strconv.Atoi(p.WaitLine(`epoch (\d+) complete`, 2*time.Minute)[1]); n >= 2 {
			break
		}
	}
	if _, err := b.Kill(context.Background(), "n2"); err != nil {
		t.Fatal(err)
	}
	p.WaitLine(`running on the arm64 nodes; n1 \(amd64\) left out: one MPI world per instruction set`, 2*time.Minute)
	if code := p.Wait(within); code != 0 {
		t.Fatalf("the job exited %d after the kill", code)
	}
	out := p.Output()
	if !regexp.MustCompile(`restarting 2 ranks from epoch [1-9]`).MatchString(out) {
		t.Errorf("no restart from an epoch:\n%s", out)
	}
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum %q, want %q (uninterrupted run)\n%s", got, want, out)
	}
	t.Logf("checksum %s after the move to arm64, as uninterrupted", want)
	return out
}
