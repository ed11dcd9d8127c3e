package hang

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"shoal/test/testenv"
	"shoal/test/watch"
)

// TestStoppedRankIsHungLocally: shoal run on this machine alone (no agent)
// reads its ranks' alive files itself: rank 1 of heat stopped with SIGSTOP,
// the run is declared hung on this node within --hang-after 3s and a poll or
// two, relaunched from its newest epoch, and ends with the checksum of an
// uninterrupted run. A bound that short is the test's, not a default: on a
// machine at load 20 or more a rank starved of its core, or waiting seconds
// for its writer's fsync, can pass it too, and be relaunched once more.
func TestStoppedRankIsHungLocally(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it)")
	}
	heat := built(t, "examples/heat")
	args := []string{"--size", "200", "--steps", "3000", "--pace", "2000"} // 6 s or more
	want := reference(t, 2, built(t, "examples/heat-plain"), "--size", "200", "--steps", "3000")
	data := t.TempDir()
	cmd := exec.Command(testenv.Built(t, "bin/shoal"), append([]string{"run", "--local", "-n", "2", "--job-id", "hang-local",
		"--hang-after", "3s", "--max-restarts", "10", "--ckpt-interval", "0.5", "--", heat}, args...)...)
	cmd.Env = append(os.Environ(), "SHOAL_DATA_DIR="+data)
	cmd.Dir = t.TempDir()
	j := watch.Start(t, cmd)
	j.WaitLine(`epoch \d+ complete`, time.Minute)
	pid := testenv.RankPID(t, data, "hang-local", 1)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop rank 1 (pid %d): %v", pid, err)
	}
	stopped := time.Now()
	t.Cleanup(func() { killIfStopped(pid) })
	const bound, slack = 3 * time.Second, 2 * time.Second
	line := j.WaitLine(`^shoal: rank 1 on this node made no snapshot call for ([\d.]+) s \(usually every [^)]+\), idle: hung$`, bound+slack+10*time.Second)
	took := time.Since(stopped)
	silence, _ := strconv.ParseFloat(line[1], 64)
	if took > bound+slack || silence < bound.Seconds() {
		t.Errorf("declared hung %v after the stop, after %.1f s of silence; want within %v of the stop, after at least %v", took.Round(100*time.Millisecond), silence, bound+slack, bound)
	}
	j.WaitLine(`: hung; restarting 2 ranks from epoch \d+ on 1 node`, 30*time.Second)
	if code := j.Wait(2 * time.Minute); code != 0 {
		t.Fatalf("job exited %d:\n%s", code, shoalLines(j.Output()))
	}
	out := j.Output()
	t.Logf("declared hung %v after the stop:\n%s", took.Round(100*time.Millisecond), shoalLines(out))
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
}
