// Package hang runs a job on testbed hosts (instance 260) and stops one of its
// ranks with SIGSTOP, as Android freezes an app in the background: the job is
// declared hung, naming the rank and its node, within the automatic bound
// (job.HangFloor for heat, whose calls come every few milliseconds), and ends
// with the checksum of an uninterrupted run.
//
// The programs come from build/ (SHOAL_HANG_BUILD names another build
// directory, relative to the repository or absolute: one with a libshoal
// that writes the ranks' alive files).
package hang

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 260

// built returns a program of the build directory the test uses.
func built(t *testing.T, rel string) string {
	t.Helper()
	dir := os.Getenv("SHOAL_HANG_BUILD")
	if dir == "" {
		return testenv.Built(t, filepath.Join("build", rel))
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(testenv.Root, dir)
	}
	p := filepath.Join(dir, rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("SHOAL_HANG_BUILD=%s: %v", dir, err)
	}
	return p
}

// reference runs heat-plain with mpirun on this machine alone and returns the
// checksum of that uninterrupted run.
func reference(t *testing.T, n int, argv ...string) string {
	t.Helper()
	args := append([]string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", strconv.Itoa(n)}, argv...)
	out, err := exec.Command("mpirun", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	v := watch.Field(string(out), "checksum")
	if v == "" {
		t.Fatalf("reference run printed no checksum:\n%s", out)
	}
	return v
}

// TestStoppedRankIsHung: heat on 4 ranks over 2 hosts, rank 1 (on n2) stopped
// with SIGSTOP once an epoch is complete. The job says that rank 1 on n2 made
// no snapshot call, hung, within the automatic bound and a poll or two, is
// relaunched from its newest complete epoch, and ends with the checksum of an
// uninterrupted run. Before hangs were noticed, the job waited as long as the
// rank stayed stopped.
func TestStoppedRankIsHung(t *testing.T) {
	bin := testenv.NeedTestbed(t)
	heat := built(t, "examples/heat")
	args := []string{"--size", "400", "--steps", "5000", "--pace", "2000"} // 10 s or more
	want := reference(t, 4, built(t, "examples/heat-plain"), "--size", "400", "--steps", "5000")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := testbed.Up(ctx, testbed.Config{Nodes: 2, Cores: []int{2}, Instance: instance, AgentBinary: bin, Logf: t.Logf})
	if err != nil {
		t.Fatalf("testbed up: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Down(ctx); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})

	argv := append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run", "-n", "4", "--layout", "cyclic", "--ckpt-interval", "1s", "--", heat}, args...)
	cmd, err := b.Command(context.Background(), "n1", argv...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = testenv.Root
	j := watch.Start(t, cmd)
	id := j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`^shoal: launching 4 ranks on 2 nodes \(n1:0 n2:1 n1:2 n2:3\)`, time.Minute)
	j.WaitLine(`epoch \d+ complete`, time.Minute)

	n2, err := b.Host("n2")
	if err != nil {
		t.Fatal(err)
	}
	pid := testenv.RankPID(t, n2.DataDir, id, 1)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop rank 1 (pid %d): %v", pid, err)
	}
	stopped := time.Now()
	t.Cleanup(func() { killIfStopped(pid) })

	// The silence counts from the rank's last record, before the stop: the
	// line comes within the bound of the stop, and a rescan and a poll.
	const slack = 2 * time.Second
	// How soon is the bench's to measure; under load a poll may come late.
	line := j.WaitLine(`^shoal: rank 1 on n2 made no snapshot call for ([\d.]+) s \(usually every [^)]+\), idle: hung$`, job.HangFloor+slack+40*time.Second)
	took := time.Since(stopped)
	silence, _ := strconv.ParseFloat(line[1], 64)
	// The silence counts from the rank's last record, just before the stop, so
	// the line may come a little less than the bound after the stop itself.
	if silence < job.HangFloor.Seconds() {
		t.Errorf("declared hung %v after the stop, after %.1f s of silence; want at least %v of silence", took.Round(100*time.Millisecond), silence, job.HangFloor)
	}
	j.WaitLine(`: hung; restarting 4 ranks from epoch \d+ on 2 nodes`, 30*time.Second)
	if code := j.Wait(2 * time.Minute); code != 0 {
		t.Fatalf("job exited %d:\n%s", code, shoalLines(j.Output()))
	}
	out := j.Output()
	t.Logf("declared hung %v after the stop:\n%s", took.Round(100*time.Millisecond), shoalLines(out))
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)\n%s", got, want, shoalLines(out))
	}
	if n := regexp.MustCompile(`(?m)^shoal: rank \d+ on n\d made no snapshot call for .*: hung$`).FindAllString(out, -1); len(n) != 1 {
		t.Errorf("declared hung %d times, want once:\n%s", len(n), shoalLines(out))
	}
}

// killIfStopped kills pid if it is still a stopped process (the run's end
// should have killed it).
func killIfStopped(pid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return
	}
	if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "T" {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// shoalLines keeps shoal's own lines of a job's output.
func shoalLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "shoal") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
