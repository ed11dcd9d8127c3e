package e2e

import (
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
	"shoal/internal/localrun"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// A short heat: 400 steps of at least 3 ms, so that an interrupt after the
// first epoch lands while it runs.
var resumeArgs = []string{"--size", "200", "--steps", "400"}

// localRun starts shoal run on this machine alone with data dir data, on 2
// ranks checkpointing every 0.2 s.
func localRun(t *testing.T, data string, flags []string, args ...string) (*watch.Proc, *exec.Cmd) {
	t.Helper()
	heat := testenv.Built(t, "build/examples/heat")
	all := append(append([]string{"run", "-n", "2", "--ckpt-interval", "0.2"}, flags...), "--", heat)
	cmd := exec.Command(testenv.Built(t, "bin/shoal"), append(all, args...)...)
	cmd.Env = append(os.Environ(), "SHOAL_DATA_DIR="+data)
	cmd.Dir = t.TempDir()
	return watch.Start(t, cmd), cmd
}

// interrupt waits for epoch 1 of a local run, interrupts it as Ctrl-C does,
// and returns its output.
func interrupt(t *testing.T, p *watch.Proc, cmd *exec.Cmd) string {
	t.Helper()
	p.WaitLine(`epoch 1 complete`, time.Minute)
	cmd.Process.Signal(syscall.SIGINT)
	if code := p.Wait(time.Minute); code != 130 {
		t.Fatalf("interrupted run exited %d, want 130", code)
	}
	return p.Output()
}

// A local run interrupted with Ctrl-C resumes, run again with the same
// --job-id, program and arguments, from the epoch it kept, and ends with the
// checksum of an uninterrupted run; the epochs of the earlier run are not
// announced again. Other arguments are refused, naming them, unless --fresh
// is given; the earlier run's data of another, expired job is collected by
// the first run.
func TestLocalRunResumes(t *testing.T) {
	requireMPI(t)
	data := t.TempDir()
	// A run cancelled 25 h ago, past the 24 h a cancelled run is kept.
	store := localrun.Store{CkptRoot: filepath.Join(data, "ckpt"), RunRoot: filepath.Join(data, "jobs")}
	os.MkdirAll(filepath.Join(store.CkptRoot, "expired", "e00000001"), 0o755)
	ended := time.Now().Add(-25 * time.Hour)
	store.Write(localrun.Record{Job: "expired", State: job.Cancelled, Started: ended.Add(-time.Minute), Ended: ended})

	ref, _ := localRun(t, t.TempDir(), []string{"--ckpt-interval", "0"}, resumeArgs...)
	if code := ref.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("uninterrupted run exited %d", code)
	}
	want := field(ref.Output(), "checksum")

	paced := append([]string{"--pace", "3000"}, resumeArgs...)
	p, cmd := localRun(t, data, []string{"--job-id", "r1"}, paced...)
	out := interrupt(t, p, cmd)
	if !strings.Contains(out, "removed") || !strings.Contains(out, "job expired") {
		t.Errorf("the first run did not say it removed the expired job's data")
	}
	if _, err := os.Stat(filepath.Join(store.CkptRoot, "expired")); !os.IsNotExist(err) {
		t.Errorf("the expired job's checkpoints are still there: %v", err)
	}
	if !strings.Contains(out, "for 24h") || !strings.Contains(out, "'shoal run --job-id r1' with the same program and arguments resumes") {
		t.Errorf("the interrupted run does not say how long its checkpoints stay and how to resume")
	}

	other, _ := localRun(t, data, []string{"--job-id", "r1"}, append([]string{"--pace", "2000"}, resumeArgs...)...)
	if code := other.Wait(time.Minute); code != 1 {
		t.Errorf("a rerun with other arguments exited %d, want 1", code)
	}
	if !strings.Contains(other.Output(), "arguments --pace 3000 --size 200 --steps 400 (now --pace 2000 --size 200 --steps 400)") {
		t.Errorf("the refusal does not name the arguments that differ")
	}

	p, _ = localRun(t, data, []string{"--job-id", "r1"}, paced...)
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("the resumed run exited %d", code)
	}
	out = p.Output()
	m := regexp.MustCompile(`shoal: resuming job r1 from epoch (\d+) \(kept by an earlier run, cancelled [^)]* ago\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no line saying the run resumes")
	}
	from, _ := strconv.Atoi(m[1])
	for _, l := range regexp.MustCompile(`epoch (\d+) complete`).FindAllStringSubmatch(out, -1) {
		if n, _ := strconv.Atoi(l[1]); n <= from {
			t.Errorf("stale line of the earlier run: %q (resumed from epoch %d)", l[0], from)
		}
	}
	if !strings.Contains(out, "heat: resumed at step") {
		t.Errorf("heat did not restore its state")
	}
	if got := field(out, "checksum"); got != want {
		t.Errorf("checksum of the resumed run = %q, want %q (uninterrupted)", got, want)
	}
}

// --fresh starts a run from the beginning whatever an earlier run of the id
// kept, and says so.
func TestLocalRunFresh(t *testing.T) {
	requireMPI(t)
	data := t.TempDir()
	p, cmd := localRun(t, data, []string{"--job-id", "f1"}, append([]string{"--pace", "3000"}, resumeArgs...)...)
	interrupt(t, p, cmd)
	p, _ = localRun(t, data, []string{"--job-id", "f1", "--fresh"}, resumeArgs...)
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("run with --fresh exited %d", code)
	}
	out := p.Output()
	if !strings.Contains(out, "shoal: job f1: --fresh: removed what an earlier run kept; starting from the beginning") || strings.Contains(out, "resum") {
		t.Errorf("the run with --fresh does not say it starts afresh, or resumed")
	}
}
