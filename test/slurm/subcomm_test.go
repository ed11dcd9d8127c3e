package slurm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// batchJobSubCommunicator: a program that gives libshoal a communicator of its
// first ranks only (subcomm on 6 ranks checkpoints 4, as NAS MG parks its surplus
// ranks) with --durable DIR. The warning signal holds the job and its epoch of 4
// shards is kept; the next batch job of the same script, 6 ranks again, resumes
// from it and ends with the result of an uninterrupted run. Before the manifest
// recorded the writing run's 6 ranks beside its 4 shards, the kept epoch was "of
// another rank count" and the second job refused to start.
func batchJobSubCommunicator(t *testing.T, b *testbed.Bed) {
	prog := testenv.Built(t, "build/test/subcomm")
	ref := exec.Command("mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", "6",
		"-x", "SHOAL_DIR", "-x", "SHOAL_CKPT_INTERVAL", prog, "--steps", "400")
	// Standalone libshoal checkpoints into ./shoal-ckpt unless told otherwise.
	ref.Env = append(os.Environ(), "SHOAL_DIR="+t.TempDir(), "SHOAL_CKPT_INTERVAL=0")
	out, err := ref.CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	want := watch.Field(string(out), "result")
	if want == "" {
		t.Fatalf("reference run printed no result:\n%s", out)
	}
	shoal := filepath.Join(testenv.Root, "bin/shoal")
	dir := filepath.Join(t.TempDir(), "durable")
	// --pace: at least 8 s of steps, so that the warning comes mid-run.
	script := fmt.Sprintf("#!/bin/bash\nexec %s run -n 6 --ckpt-interval 1s --durable %s -- %s --steps 400 --pace 20000\n",
		shoal, dir, prog)
	kept := regexp.QuoteMeta(dir)

	j := sbatch(t, b, script, "-N", "4", "--no-kill", "--no-requeue")
	j.waitOutput(t, `^shoal: epoch \d+ kept in `+kept+` \(`, time.Minute)
	scancel(t, b, "--batch", "--signal=TERM", j.id)
	held := j.waitOutput(t, `^shoal: epoch (\d+) kept in `+kept+`; not requeueing Slurm job `+j.id, 45*time.Second)[1]

	j2 := sbatch(t, b, script, "-N", "4", "--no-kill", "--no-requeue")
	j2.waitOutput(t, `^shoal: resuming from epoch `+held+` kept in `+kept+` \(job \S+; Slurm job `+j2.id+`, restart 0\)`, time.Minute)
	j2.waitOutput(t, `^\[0\] result: `, 2*time.Minute)
	if state := waitState(t, b, j2.id, func(s string) bool { return s == "COMPLETED" || s == "FAILED" }, 30*time.Second); state != "COMPLETED" {
		t.Errorf("the second job ended %s, want COMPLETED:\n%s", state, j2.output())
	}
	got := j2.output()
	if v := watch.Field(got, "result"); v != want {
		t.Errorf("result = %q, want %q (uninterrupted run)\n%s", v, want, got)
	}
	if !strings.Contains(got, "subcomm: resumed at step") {
		t.Errorf("subcomm did not resume:\n%s", got)
	}
}
