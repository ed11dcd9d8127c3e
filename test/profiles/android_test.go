package profiles

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// androidHeatArgs make a heat run of about 3 s at 4 ranks, checkpointed every 500 ms;
// killerHeatArgs a shorter one, for 20 ranks some of which talk over Wi-Fi.
var (
	androidHeatArgs = []string{"--size", "100", "--steps", "600", "--pace", "5000"}
	killerHeatArgs  = []string{"--size", "100", "--steps", "100", "--pace", "2000"}
)

// referenceChecksum is the checksum of an uninterrupted heat run of args on this
// machine (one rank of heat-plain: heat's result does not depend on the count).
func referenceChecksum(t *testing.T, args []string) string {
	t.Helper()
	ref := watch.Spawn(t, nil, "mpirun.openmpi", append([]string{"--allow-run-as-root", "-n", "1",
		testenv.Built(t, "build/examples/heat-plain")}, args[:4]...)...)
	if code := ref.Wait(time.Minute); code != 0 {
		t.Fatalf("the reference run exited %d:\n%s", code, ref.Output())
	}
	return watch.Field(ref.Output(), "checksum")
}

// A 4-rank heat job runs on one android host (no agent: shoal run runs it there
// alone), checkpoints, and ends with the checksum of an uninterrupted run, with
// either MPI: Shoal launches Open MPI with its shmem framework on mmap, so mpirun,
// which would otherwise die of SIGSYS probing shmget, runs, and its ranks share
// memory through files; and it keeps MPICH's UCX from its SysV calls, which would
// kill every rank.
func TestAndroidHeat(t *testing.T) {
	b := bed.Up(t)
	ctx := context.Background()
	want := referenceChecksum(t, androidHeatArgs)
	h, err := b.Add(ctx, testbed.HostConfig{Cores: 2, Profile: testbed.Android.Name, NoAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Kill(ctx, h.Name) })

	tests := []struct{ engine, heat string }{
		{"openmpi", "build/examples/heat"},
		{"mpich", "build/mpich/examples/heat"},
	}
	for _, tt := range tests {
		cmd, err := b.Command(ctx, h.Name, append([]string{"env", "SHOAL_DATA_DIR=" + filepath.Join(t.TempDir(), "data"),
			testenv.Built(t, "bin/shoal"), "run", "-n", "4", "--engine", tt.engine, "--max-oversubscribe", "2", "--max-restarts", "0",
			"--ckpt-interval", "500ms", "--", testenv.Built(t, tt.heat)}, androidHeatArgs...)...)
		if err != nil {
			t.Fatal(err)
		}
		j := watch.Start(t, cmd)
		if code := j.Wait(2 * time.Minute); code != 0 {
			t.Errorf("%s: shoal run on %s exited %d:\n%s", tt.engine, h.Name, code, j.Output())
			continue
		}
		out := j.Output()
		if got := watch.Field(out, "checksum"); got != want {
			t.Errorf("%s: checksum %q, want the uninterrupted run's %q", tt.engine, got, want)
		}
		if !regexp.MustCompile(`shoal: epoch \d+ complete`).MatchString(out) {
			t.Errorf("%s: no epoch was complete:\n%s", tt.engine, out)
		}
	}
}

// A heat job of 20 ranks from n1 puts 16 or more of them on an android host of 24
// cores (blocks in proportion to cores, or all of them where the planner keeps them
// off the Wi-Fi links): with their wrappers, the host's agent and Open MPI's daemon
// that is beyond the 32 processes its killer allows, and the killer SIGKILLs the
// newest. The job says that the host killed its ranks while it stayed up and how
// many it places there now, keeps to that, and ends with the checksum of an
// uninterrupted run. (This machine is shared: a lead lost under its load restarts
// the job too, hence the restarts allowed.)
func TestAndroidKillerLearned(t *testing.T) {
	b := bed.Up(t)
	ctx := context.Background()
	want := referenceChecksum(t, killerHeatArgs)
	h, err := b.Add(ctx, testbed.HostConfig{Cores: 24, Profile: testbed.Android.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Kill(ctx, h.Name) })
	waitAlive(t, b, h.Name)

	cmd, err := b.Command(ctx, "n1", append([]string{testenv.Built(t, "bin/shoal"), "run", "-n", "20",
		"--max-restarts", "8", "--ckpt-interval", "500ms", "--", testenv.Built(t, "build/examples/heat")}, killerHeatArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	j := watch.Start(t, cmd)
	t.Cleanup(func() { // before the job is killed: what the host ran when it failed
		if !t.Failed() {
			return
		}
		hosts, _ := b.Hosts()
		for _, o := range hosts {
			logHost(t, b, o.Name)
		}
	})
	code := j.Wait(90 * time.Second)
	out := j.Output()
	if code != 0 {
		t.Fatalf("shoal run exited %d:\n%s", code, out)
	}
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum %q, want the uninterrupted run's %q", got, want)
	}
	learned := regexp.MustCompile(`(?m)^shoal: `+h.Name+` killed ranks by signal 9 while it stayed up and (?:kept \d+ of its \d+|none of its \d+ ran on): placing at most (\d+) ranks? there$`).FindAllStringSubmatch(out, -1)
	if learned == nil {
		t.Fatalf("no line says that %s killed ranks:\n%s", h.Name, out)
	}
	for _, l := range learned {
		t.Logf("%s", l[0])
	}
	limit, _ := strconv.Atoi(learned[len(learned)-1][1])
	launches := regexp.MustCompile(`launching 20 ranks on \d+ nodes \(([^)]*)\)`).FindAllStringSubmatch(out, -1)
	if got := ranksOn(launches[len(launches)-1][1], h.Name); got > limit {
		t.Errorf("the last run put %d ranks on %s, beyond the %d learned", got, h.Name, limit)
	}
	if log, _ := os.ReadFile(filepath.Join(b.Dir(), h.Name, "killer.log")); len(log) == 0 {
		t.Errorf("%s's killer killed nothing: the test did not meet it", h.Name)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// logHost logs node's processes and its process killer's log, if it has one.
func logHost(t *testing.T, b *testbed.Bed, node string) {
	if log, err := os.ReadFile(filepath.Join(b.Dir(), node, "killer.log")); err == nil {
		t.Logf("%s's killer.log:\n%s", node, log)
	}
	pids, err := b.Procs(node)
	if err != nil || len(pids) == 0 {
		t.Logf("%s's processes: none (%v)", node, err)
		return
	}
	list := make([]string, len(pids))
	for i, p := range pids {
		list[i] = strconv.Itoa(p)
	}
	ps, _ := exec.Command("ps", "-o", "pid,ppid,pgid,etimes,stat,wchan:20,args", "-p", strings.Join(list, ",")).CombinedOutput()
	t.Logf("%s's processes:\n%s", node, ps)
}

// ranksOn counts the ranks a layout ("n1:0-3 n2:4-6 n4:7-23,25") puts on node.
func ranksOn(layout, node string) int {
	n := 0
	for _, part := range strings.Fields(layout) {
		name, ranks, _ := strings.Cut(part, ":")
		if name != node {
			continue
		}
		for _, r := range strings.Split(ranks, ",") {
			lo, hi, found := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if found {
				b, _ = strconv.Atoi(hi)
			}
			n += b - a + 1
		}
	}
	return n
}

// waitAlive waits until n1's agent lists node alive.
func waitAlive(t *testing.T, b *testbed.Bed, node string) {
	t.Helper()
	poll.Until(t, 20*time.Second, func() string {
		out, err := b.Exec(context.Background(), "n1", testenv.Built(t, "bin/shoal"), "nodes")
		if err != nil {
			return err.Error()
		}
		if !regexp.MustCompile(`(?m)^` + node + `\s.*\salive\s`).Match(out) {
			return "n1 does not list " + node + " alive:\n" + string(out)
		}
		return ""
	})
}
