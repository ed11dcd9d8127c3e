package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/test/testenv"
	"shoal/test/watch"
)

// heatArgs is the local heat job. Unpaced it runs about a second on 4 ranks, so the runs
// that must be interrupted add pace (a floor of 1 ms per step): they then last at least 3 s
// on any machine, and the kill after epoch 2 always lands while the job still runs.
const heatArgs = "--size 800 --steps 3000"

const heatPace = "--pace 1000"

// runReference runs a job to completion without interruption and returns the value
// of key in its output.
func runReference(t *testing.T, key string, program string, args ...string) string {
	t.Helper()
	shoal := testenv.Built(t, "bin/shoal")
	p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, shoal,
		append([]string{"run", "-n", "4", "--ckpt-interval", "0", "--", program}, args...)...)
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("reference run exited %d", code)
	}
	v := field(p.Output(), key)
	if v == "" {
		t.Fatalf("reference run printed no %q line", key)
	}
	return v
}

// killAfterEpoch runs program on 4 ranks, kills rank 2 with SIGKILL once epoch
// `after` is complete, and returns the output of the finished job.
func killAfterEpoch(t *testing.T, after int, program string, args ...string) string {
	return killAfterEpochEvery(t, after, "500ms", program, args...)
}

func killAfterEpochEvery(t *testing.T, after int, interval, program string, args ...string) string {
	t.Helper()
	shoal := testenv.Built(t, "bin/shoal")
	data := t.TempDir()
	p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + data}, shoal,
		append([]string{"run", "-n", "4", "--ckpt-interval", interval, "--", program}, args...)...)
	job := p.WaitLine(`^shoal: job ([^:]+):`, 30*time.Second)[1]
	p.WaitLine(`epoch `+strconv.Itoa(after)+` complete`, 2*time.Minute)
	syscall.Kill(testenv.RankPID(t, data, job, 2), syscall.SIGKILL)
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("job exited %d after the kill", code)
	}
	return p.Output()
}

func TestLocalHeatSurvivesKilledRank(t *testing.T) {
	requireMPI(t)
	heat := testenv.Built(t, "build/examples/heat")
	args := strings.Fields(heatArgs)
	want := runReference(t, "checksum", heat, args...)
	out := killAfterEpoch(t, 2, heat, append(strings.Fields(heatPace), args...)...)
	if !strings.Contains(out, "shoal: rank 2 killed by signal 9; restarting from epoch") {
		t.Errorf("no restart line naming rank 2 and signal 9")
	}
	if got := field(out, "checksum"); got != want {
		t.Errorf("checksum after the kill = %q, want %q (uninterrupted)", got, want)
	}
}

func TestLocalNQueensSurvivesKilledRank(t *testing.T) {
	requireMPI(t)
	nq := testenv.Built(t, "build/examples/nqueens")
	// 441 rounds of at least 5 ms each: 2.2 s or more, epoch 2 after about 0.7 s.
	out := killAfterEpochEvery(t, 2, "300ms", nq, "--pace", "5000", "15")
	if !strings.Contains(out, "restarting from epoch") {
		t.Errorf("no restart line")
	}
	if got := field(out, "solutions"); got != "2279184" {
		t.Errorf("solutions after the kill = %q, want 2279184", got)
	}
}

func TestLocalCorruptNewestEpochFallsBack(t *testing.T) {
	requireMPI(t)
	shoal := testenv.Built(t, "bin/shoal")
	heat := testenv.Built(t, "build/examples/heat")
	args := []string{"--size", "800", "--steps", "6000"}
	want := runReference(t, "checksum", heat, args...)
	data := t.TempDir()
	p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + data}, shoal,
		append([]string{"run", "-n", "4", "--ckpt-interval", "1s", "--", heat, "--pace", "1000"}, args...)...)
	job := p.WaitLine(`^shoal: job ([^:]+):`, 30*time.Second)[1]
	epoch := p.WaitLine(`epoch (\d+) complete`, 2*time.Minute)[1]
	if epoch == "1" {
		epoch = p.WaitLine(`epoch (\d+) complete`, 2*time.Minute)[1]
	}
	n, _ := strconv.Atoi(epoch)
	shard := filepath.Join(data, "ckpt", job, "e"+pad(n, 8), "r000001.shard")
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(testenv.RankPID(t, data, job, 2), syscall.SIGKILL)
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("job exited %d", code)
	}
	out := p.Output()
	if !strings.Contains(out, "epoch "+epoch+" unusable") || !strings.Contains(out, "checksum mismatch") {
		t.Errorf("no warning that epoch %s is unusable because of a checksum mismatch", epoch)
	}
	if !strings.Contains(out, "restarting from epoch "+strconv.Itoa(n-1)+" ") {
		t.Errorf("did not restart from the previous epoch %d", n-1)
	}
	if got := field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q", got, want)
	}
}

func TestLocalProgramFailureIsNotRetried(t *testing.T) {
	requireMPI(t)
	shoal := testenv.Built(t, "bin/shoal")
	dir := t.TempDir()
	src := filepath.Join(dir, "fail.c")
	os.WriteFile(src, []byte(`#include <mpi.h>
int main(int argc, char **argv) {
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return rank == 1 ? 7 : 0;
}
`), 0o644)
	bin := filepath.Join(dir, "fail")
	if out, err := exec.Command("mpicc", src, "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, shoal, "run", "-n", "2", bin)
	if code := p.Wait(time.Minute); code != 7 {
		t.Errorf("exit code %d, want the program's 7", code)
	}
	out := p.Output()
	if strings.Contains(out, "restarting from") || !strings.Contains(out, "rank 1 exited with code 7; not restarting") {
		t.Errorf("a program's own failure must end the job without a restart")
	}
}

func TestLocalRestartsExhausted(t *testing.T) {
	requireMPI(t)
	shoal := testenv.Built(t, "bin/shoal")
	dir := t.TempDir()
	src := filepath.Join(dir, "die.c")
	os.WriteFile(src, []byte(`#include <mpi.h>
#include <signal.h>
int main(int argc, char **argv) {
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 1) raise(SIGKILL);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
`), 0o644)
	bin := filepath.Join(dir, "die")
	if out, err := exec.Command("mpicc", src, "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, shoal, "run", "-n", "2", "--max-restarts", "2", bin)
	if code := p.Wait(time.Minute); code != 3 {
		t.Errorf("exit code %d, want 3 (restarts exhausted)", code)
	}
	out := p.Output()
	if n := strings.Count(out, "restarting from the beginning"); n != 2 {
		t.Errorf("%d restarts, want 2", n)
	}
	if !strings.Contains(out, "giving up after 2 restarts") {
		t.Errorf("no line saying why the job gave up")
	}
}

func pad(n, width int) string {
	s := strconv.Itoa(n)
	for len(s) < width {
		s = "0" + s
	}
	return s
}

// TestStandaloneRestart runs heat under plain mpirun (no shoal at all), kills a rank
// once a checkpoint epoch is in the manifest, and runs it again: the second run must
// resume from that epoch and finish with the uninterrupted checksum.
func TestStandaloneRestart(t *testing.T) {
	requireMPI(t)
	heat := testenv.Built(t, "build/examples/heat")
	args := []string{"--size", "800", "--steps", "12000"} // long enough to be killed mid-way
	want := runReference(t, "checksum", heat, args...)
	dir := t.TempDir()
	env := []string{"SHOAL_DIR=" + dir, "SHOAL_CKPT_INTERVAL=0.5", "SHOAL_JOB=heat-standalone"}
	mpirun := append([]string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", "4", heat}, args...)
	first := watch.Spawn(t, env, "mpirun", mpirun...)
	manifest := filepath.Join(dir, "heat-standalone", "manifest")
	deadline := time.Now().Add(time.Minute)
	for {
		if b, _ := os.ReadFile(manifest); strings.Contains(string(b), "epoch 2 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no epoch 2 in the manifest within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := exec.Command("pgrep", "-f", "-n", "^"+heat).Output()
	if err != nil {
		t.Fatalf("find a rank of heat: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	syscall.Kill(pid, syscall.SIGKILL)
	if code := first.Wait(time.Minute); code == 0 {
		t.Fatal("mpirun exited 0 although a rank was killed")
	}
	second := watch.Spawn(t, env, "mpirun", mpirun...)
	if code := second.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("second run exited %d", code)
	}
	if !strings.Contains(second.Output(), "heat: resumed at step") {
		t.Error("second run did not resume from the checkpoint")
	}
	if got := field(second.Output(), "checksum"); got != want {
		t.Errorf("checksum after resuming = %q, want %q", got, want)
	}
}

// mpirunOutput runs program on n ranks under plain mpirun (libshoal standalone, no
// checkpoints) and returns its output, failing on a non-zero exit.
func mpirunOutput(t *testing.T, n int, program string, args ...string) string {
	t.Helper()
	env := []string{"SHOAL_DIR=" + t.TempDir(), "SHOAL_CKPT_INTERVAL=0"}
	p := watch.Spawn(t, env, "mpirun", append([]string{"--allow-run-as-root", "--oversubscribe",
		"--bind-to", "none", "-n", strconv.Itoa(n), program}, args...)...)
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("%s on %d ranks exited %d", filepath.Base(program), n, code)
	}
	return p.Output()
}

// heat's checksum does not depend on how the grid is split: a restart on another number
// of nodes keeps the rank count, but users compare runs of different sizes too. 301 rows
// split unevenly over 2, 3 and 4 ranks.
func TestHeatChecksumOnAnyRankCount(t *testing.T) {
	requireMPI(t)
	heat := testenv.Built(t, "build/examples/heat")
	args := []string{"--size", "301", "--steps", "200"}
	want := field(mpirunOutput(t, 1, heat, args...), "checksum")
	if want == "" {
		t.Fatal("heat on 1 rank printed no checksum")
	}
	for n := 2; n <= 4; n++ {
		if got := field(mpirunOutput(t, n, heat, args...), "checksum"); got != want {
			t.Errorf("checksum on %d ranks = %q, on 1 rank %q", n, got, want)
		}
	}
}

// nqueens finds the published solution counts.
func TestNQueensKnownCounts(t *testing.T) {
	requireMPI(t)
	nq := testenv.Built(t, "build/examples/nqueens")
	for n, want := range map[string]string{"8": "92", "12": "14200", "13": "73712", "14": "365596"} {
		if got := field(mpirunOutput(t, 4, nq, n), "solutions"); got != want {
			t.Errorf("nqueens %s: solutions = %q, want %s", n, got, want)
		}
	}
}
