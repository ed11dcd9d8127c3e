package slurm

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/slurm"
	"shoal/internal/testbed"
	"shoal/test/testenv"
)

// batchJobRequeued: one batch job with --durable, in three runs. Its first run gets
// Slurm's warning signal (scancel --batch --signal=TERM, as --signal=B:TERM@60 sends
// it): Shoal checkpoints, holds, keeps the epoch in DIR and requeues the job, whose
// second run resumes from exactly that epoch, losing no work. Then the allocation is
// lost with no warning: SIGKILL to the batch script (scancel --batch --signal=KILL) ends
// shoal run, its agents' step with it and the job (FAILED), every node's checkpoints
// gone with the agents. (Plain scancel --signal=KILL would not do: Slurm turns it into
// a cancel, SIGTERM first.) The job is requeued by hand; its third run resumes from the
// epoch DIR keeps, and the job ends with the
// uninterrupted checksum, DIR emptied of its epochs.
func batchJobRequeued(t *testing.T, b *testbed.Bed) {
	heatArgs := []string{"--size", "1000", "--steps", "1500"}
	want := testenv.Reference(t, 6, heatArgs...)
	shoal := filepath.Join(testenv.Root, "bin/shoal")
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	dir := filepath.Join(t.TempDir(), "durable")
	// --pace: at least 9 s of steps over the three runs. exec: the warning signal
	// goes to the batch shell alone, which must be shoal run.
	script := fmt.Sprintf("#!/bin/bash\nexec %s run -n 6 --ckpt-interval 2s --durable %s -- %s %s --pace 6000\n",
		shoal, dir, heat, strings.Join(heatArgs, " "))
	j := sbatch(t, b, script, "-N", "4", "--no-kill", "--requeue", "--open-mode=append")
	kept := regexp.QuoteMeta(dir)

	// Run 1: the warning signal once an epoch is kept.
	j.waitOutput(t, `^shoal: epoch \d+ kept in `+kept, time.Minute)
	scancel(t, b, "--batch", "--signal=TERM", j.id)
	held := j.waitOutput(t, `^shoal: epoch (\d+) kept in `+kept+`; requeueing Slurm job `+j.id, 45*time.Second)[1]

	// Run 2 resumes from the epoch held: the ranks computed nothing after it.
	j.waitOutput(t, `^shoal: resuming from epoch `+held+` kept in `+kept+` \(job \S+; Slurm job `+j.id+`, restart 1\)`, time.Minute)
	run2 := len(j.output())
	// The allocation lost once run 2 kept an epoch of its own.
	newer := regexp.MustCompile(`(?m)^shoal: epoch (\d+) kept in ` + kept)
	deadline := time.Now().Add(time.Minute)
	for newer.FindString(j.output()[run2:]) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("run 2 kept no epoch in %s within a minute", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	scancel(t, b, "--batch", "--signal=KILL", j.id)
	waitState(t, b, j.id, func(s string) bool { return s != "RUNNING" && s != "COMPLETING" }, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := b.Exec(ctx, "n1", "scontrol", "requeue", j.id); err != nil {
		t.Fatalf("scontrol requeue %s: %v %s", j.id, err, out)
	}

	// Run 3 resumes from what DIR keeps and finishes.
	j.waitOutput(t, `^shoal: resuming from epoch \d+ kept in `+kept+` \(job \S+; Slurm job `+j.id+`, restart 2\)`, time.Minute)
	out := j.finished(t, b, want)
	if n := strings.Count(out, "heat: resumed at step"); n != 2 {
		t.Errorf("heat resumed %d times, want 2", n)
	}
	// The job is done: a later run of it starts afresh.
	if m, _ := filepath.Glob(filepath.Join(dir, "epoch-*")); len(m) > 0 {
		t.Errorf("%s keeps %v after the job finished", dir, m)
	}
}

// scancel runs scancel with args in host n1.
func scancel(t *testing.T, b *testbed.Bed, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := b.Exec(ctx, "n1", append([]string{"scancel"}, args...)...); err != nil {
		t.Fatalf("scancel %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// waitState waits until Slurm reports job id in a state done accepts, and returns it.
func waitState(t *testing.T, b *testbed.Bed, id string, done func(string) bool, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := b.Exec(ctx, "n1", "scontrol", "show", "job", "--oneliner", id)
		cancel()
		if err == nil {
			last = slurm.ParseJob(string(out)).State
			if done(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Slurm job %s is %s after %v", id, last, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
