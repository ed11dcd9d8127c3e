package e2e

import (
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/test/testenv"
	"shoal/test/watch"
)

var kernels = []string{"cg", "mg", "ft", "is", "ep"}

// mpirun returns a command that runs bin on 4 ranks under plain mpirun, in a fresh
// directory, with env added and without checkpoints.
func mpirun(t *testing.T, bin, class string, env ...string) *exec.Cmd {
	cmd := exec.Command("mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", "4", bin, "--class", class)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), "SHOAL_CKPT_INTERVAL=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// verified returns the value after "verification: passed", failing the test when the
// line is missing or says failed.
func verified(t *testing.T, what, out string) string {
	t.Helper()
	v := field(out, "verification")
	if !strings.HasPrefix(v, "passed") {
		t.Fatalf("%s: verification %q, want passed\n%s", what, v, out)
	}
	return strings.TrimSpace(strings.TrimPrefix(v, "passed"))
}

// TestKernelsVerify runs every kernel at class S on 4 ranks, built with and without
// Shoal, under plain mpirun: both verify and print the same value.
func TestKernelsVerify(t *testing.T) {
	requireMPI(t)
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			values := map[string]string{}
			for _, build := range []string{k, k + "-plain"} {
				out, err := mpirun(t, testenv.Built(t, "build/bench/kernels/"+build), "S").CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", build, err, out)
				}
				values[build] = verified(t, build, string(out))
			}
			if values[k] != values[k+"-plain"] {
				t.Errorf("with Shoal %q, without %q: want the same value", values[k], values[k+"-plain"])
			}
		})
	}
}

// TestKernelsCatchSpoiledState spoils one element of every kernel's protected state
// mid-run through the SHOAL_KERNEL_FAULT test hook: the kernel must say its verification
// failed and exit non-zero, which is what a restart from a wrong state would look like.
func TestKernelsCatchSpoiledState(t *testing.T) {
	requireMPI(t)
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			cmd := mpirun(t, testenv.Built(t, "build/bench/kernels/"+k), "S", "SHOAL_KERNEL_FAULT=1")
			b, err := cmd.CombinedOutput()
			out := string(b)
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("exit: %v, want a non-zero exit status\n%s", err, out)
			}
			if !strings.Contains(out, k+": SHOAL_KERNEL_FAULT=1: ") {
				t.Errorf("the kernel never said it spoiled its state\n%s", out)
			}
			if v := field(out, "verification"); !strings.HasPrefix(v, "failed ") {
				t.Errorf("verification %q, want failed\n%s", v, out)
			}
		})
	}
}

// resumedAt is the line a kernel prints at its first iteration after a restart.
var resumedAt = regexp.MustCompile(`resumed from a checkpoint at iteration (\d+) of (\d+)`)

// TestKernelsSurviveKilledRank runs every kernel at class W under shoal run, kills a
// rank once a fifth of the iterations are done and an epoch has completed since, and
// checks the relaunched job resumed mid-run and verifies with the value an
// uninterrupted run of the same binary prints. A resume from iteration 0 would prove
// nothing: it passes even when a kernel leaves part of its state unprotected.
func TestKernelsSurviveKilledRank(t *testing.T) {
	requireMPI(t)
	shoal := testenv.Built(t, "bin/shoal")
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			bin := testenv.Built(t, "build/bench/kernels/"+k)
			out, err := mpirun(t, bin, "W").CombinedOutput()
			if err != nil {
				t.Fatalf("uninterrupted run: %v\n%s", err, out)
			}
			want := verified(t, "uninterrupted run", string(out))

			data := t.TempDir()
			p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + data}, shoal, "run", "-n", "4", "--ckpt-interval", "300ms", "--", bin, "--class", "W")
			job := p.WaitLine(`^shoal: job ([^:]+):`, 30*time.Second)[1]
			for {
				pct, _ := strconv.Atoi(p.WaitLine(`^shoal: progress (\d+)%`, 2*time.Minute)[1])
				if pct >= 20 {
					break
				}
			}
			p.WaitLine(`epoch \d+ complete`, time.Minute)
			syscall.Kill(testenv.RankPID(t, data, job, 1), syscall.SIGKILL)
			if code := p.Wait(5 * time.Minute); code != 0 {
				t.Fatalf("job exited %d", code)
			}
			if !strings.Contains(p.Output(), "rank 1 killed by signal 9; restarting from epoch") {
				t.Error("no restart from an epoch after the kill")
			}
			m := resumedAt.FindStringSubmatch(p.Output())
			if m == nil {
				t.Fatal("the kernel never said where it resumed")
			}
			iter, _ := strconv.Atoi(m[1])
			n, _ := strconv.Atoi(m[2])
			t.Logf("resumed at iteration %d of %d", iter, n)
			if iter <= 0 || iter >= n {
				t.Errorf("resumed at iteration %d of %d, want one strictly between 0 and %d", iter, n, n)
			}
			if got := verified(t, "after the kill", p.Output()); got != want {
				t.Errorf("verified value after the kill %q, want %q", got, want)
			}
		})
	}
}
