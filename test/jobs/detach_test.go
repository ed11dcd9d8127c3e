package jobs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
)

// shoalIn runs bin/shoal with args inside host and returns its exit code, stdout
// and stderr.
func shoalIn(t *testing.T, b *testbed.Bed, host string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, err := b.Command(ctx, host, append([]string{filepath.Join(testenv.Root, "bin/shoal")}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = testenv.Root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("shoal %s in %s: %v", strings.Join(args, " "), host, err)
	}
	return 0, stdout.String(), stderr.String()
}

// detach submits a job from host with shoal run --detach and returns its id, the
// last line of its output.
func detach(t *testing.T, b *testbed.Bed, host string, args ...string) string {
	t.Helper()
	code, stdout, stderr := shoalIn(t, b, host, append([]string{"run", "--detach"}, args...)...)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	id := lines[len(lines)-1]
	if code != 0 || !regexp.MustCompile(`^[A-Za-z0-9._-]+$`).MatchString(id) {
		t.Fatalf("shoal run --detach: exit %d, last line %q; want 0 and the job id\nstderr: %s", code, id, stderr)
	}
	return id
}

// TestDetachWaitLogs submits heat over two hosts detached, then waits for it and
// reads its output: the exit code of a run, and the uninterrupted checksum.
func TestDetachWaitLogs(t *testing.T) {
	b := up(t, 2)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	args := []string{"--size", "300", "--steps", "600"}
	want := reference(t, "checksum", 4, append([]string{heat}, args...)...)
	id := detach(t, b, "n1", append([]string{"-n", "4", "--", heat}, args...)...)
	if code, stdout, stderr := shoalIn(t, b, "n1", "wait", id); code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("shoal wait %s: exit %d, stdout %q, stderr %q; want 0 and nothing printed", id, code, stdout, stderr)
	}
	code, stdout, stderr := shoalIn(t, b, "n1", "logs", id)
	if code != 0 {
		t.Fatalf("shoal logs %s: exit %d\n%s", id, code, stderr)
	}
	if got := field(stdout, "checksum"); got != want {
		t.Errorf("shoal logs: checksum %q, want %q (uninterrupted run)\n%s", got, want, stdout)
	}
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		if !regexp.MustCompile(`^\[[0-3]\] `).MatchString(l) {
			t.Errorf("shoal logs printed %q, want only rank lines for a job that did not restart", l)
		}
	}
	if code, _, stderr := shoalIn(t, b, "n1", "wait", "nosuch"); code != 4 || !strings.HasPrefix(stderr, `shoal wait: no job "nosuch"`) {
		t.Errorf("shoal wait nosuch: exit %d, stderr %q; want 4 and a line naming the job", code, stderr)
	}
}

// TestRestartsExhaustedOnCluster has every rank, on two hosts, kill itself with
// SIGKILL at every launch: once --max-restarts is used up, shoal run exits 3, as
// it does on one machine, and so does shoal wait for a detached job.
func TestRestartsExhaustedOnCluster(t *testing.T) {
	b := up(t, 2)
	die := filepath.Join(t.TempDir(), "die")
	if err := os.WriteFile(die, []byte("#!/bin/sh\nkill -KILL $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := shoalIn(t, b, "n1", "run", "-n", "4", "--max-restarts", "1", "--", die)
	t.Logf("shoal run:\n%s%s", stdout, stderr)
	if code != 3 || !regexp.MustCompile(`(?m)^shoal run: job die-\w+ failed: rank \d killed by signal 9; giving up after 1 restart \(--max-restarts\)$`).MatchString(stderr) {
		t.Errorf("shoal run: exit %d; want 3 and a line saying restarts ran out", code)
	}
	if !strings.Contains(stdout, "launching 4 ranks on 2 nodes") || strings.Count(stdout, "restarting from the beginning") != 1 {
		t.Errorf("want one launch over both hosts and one restart")
	}
	id := detach(t, b, "n1", "-n", "4", "--max-restarts", "0", "--", die)
	if code, _, stderr := shoalIn(t, b, "n1", "wait", id); code != 3 || !strings.Contains(stderr, "giving up after 0 restarts") {
		t.Errorf("shoal wait %s: exit %d, stderr %q; want 3, giving up after 0 restarts", id, code, stderr)
	}
}

// TestRunSaysWhenItsAgentIsGone SIGKILLs the agent a running shoal run follows
// its job through (the job's coordinator too): with no agent to re-attach through,
// shoal run must say so in one line and exit 1 at once, not hang or re-attach.
func TestRunSaysWhenItsAgentIsGone(t *testing.T) {
	b := up(t, 2)
	j := submit(t, b, "n2", append([]string{"-n", "4", "--", filepath.Join(testenv.Root, "build/examples/heat")}, longHeat...)...)
	id := j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`launching 4 ranks`, time.Minute)
	h, err := b.Host("n2")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(h.AgentPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill n2's agent (pid %d): %v", h.AgentPID, err)
	}
	if code := j.Wait(15 * time.Second); code != 1 {
		t.Errorf("shoal run exited %d, want 1", code)
	}
	want := regexp.MustCompile(`(?m)^shoal run: the agent at 10\.77\.\d+\.12:\d+ stopped answering: cannot follow job ` + id + ` any more \(another node's agent may: shoal wait ` + id + `\)$`)
	t.Logf("output:\n%s", grepShoal(j.Output()))
	if out := j.Output(); !want.MatchString(out) || strings.Contains(out, "re-attaching") {
		t.Errorf("want a line matching %s, and no re-attach", want)
	}
}

// TestAutoInterval runs heat with the default interval, auto: libshoal chooses
// it from what its checkpoints cost and the MTBF the coordinator passes, here
// from --mtbf (by default from the cluster's failure record, whose prior of an
// hour a node would give no checkpoint in a run this short), the job announces
// it, and shoal jobs says why.
func TestAutoInterval(t *testing.T) {
	b := up(t, 2)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	id := detach(t, b, "n1", "-n", "4", "--mtbf", "1m", "--", heat, "--size", "1000", "--steps", "8000")
	if code, _, stderr := shoalIn(t, b, "n1", "wait", id); code != 0 {
		t.Fatalf("shoal wait %s: exit %d\n%s", id, code, stderr)
	}
	_, events, _ := shoalIn(t, b, "n1", "events", id)
	announced := regexp.MustCompile(`checkpoints every [0-9.]+ s \(auto: a checkpoint costs the run [0-9.]+ m?s; their nodes lose one every 30s: as given with --mtbf\)`)
	if !announced.MatchString(events) {
		t.Errorf("shoal events %s: no announcement of the automatic interval:\n%s", id, events)
	}
	if !strings.Contains(events, "epoch 1 complete") {
		t.Errorf("shoal events %s: no checkpoint at the automatic interval:\n%s", id, events)
	}
	_, out, _ := shoalIn(t, b, "n2", "jobs", id)
	if !regexp.MustCompile(`(?m)^checkpoints: every [0-9.]+ s \(auto: `).MatchString(out) {
		t.Errorf("shoal jobs %s on n2 does not say the interval and why:\n%s", id, out)
	}
}
