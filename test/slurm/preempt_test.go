package slurm

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/slurm"
	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// heatScript is the batch script of a job with --durable dir: heat on ranks ranks,
// exec'd so that the batch shell is shoal run. --pace stretches the steps, so that
// what a test does to the job lands while it computes.
func heatScript(dir string, ranks int, heatArgs []string) string {
	return fmt.Sprintf("#!/bin/bash\nexec %s run -n %d --ckpt-interval 2s --durable %s -- %s %s --pace 6000\n",
		filepath.Join(testenv.Root, "bin/shoal"), ranks, dir,
		filepath.Join(testenv.Root, "build/examples/heat"), strings.Join(heatArgs, " "))
}

// batchJobPreempted: a job of partition urgent needs the nodes of a running Shoal job
// (partition shoal, --requeue, --durable), and Slurm preempts it: SIGTERM to every
// task of its steps, the agents and the ranks under them, and not to the batch
// script. The agent on the batch host passes the signal on to shoal run, which holds
// the job as on the warning signal: the newest epoch kept in DIR, then the job
// requeued well inside the partition's GraceTime. The urgent job runs; the requeued
// job then resumes from exactly the held epoch and ends with the uninterrupted
// checksum.
func batchJobPreempted(t *testing.T, b *testbed.Bed) {
	heatArgs := []string{"--size", "1000", "--steps", "2500"}
	want := testenv.Reference(t, 6, heatArgs...)
	dir := filepath.Join(t.TempDir(), "durable")
	kept := regexp.QuoteMeta(dir)
	j := sbatch(t, b, heatScript(dir, 6, heatArgs), "-N", "4", "--no-kill", "--requeue", "--open-mode=append")

	j.waitOutput(t, `^shoal: epoch \d+ kept in `+kept, time.Minute)
	urgent := sbatch(t, b, "#!/bin/bash\necho urgent job ran on $SLURM_JOB_NODELIST\n", "--partition", "urgent", "-N", "4")
	j.waitOutput(t, `^shoal: SIGTERM in Slurm job `+j.id+`: checkpointing job \S+ and holding it`, 30*time.Second)
	held := j.waitOutput(t, `^shoal: epoch (\d+) kept in `+kept+`; requeueing Slurm job `+j.id, 45*time.Second)[1]
	urgent.waitOutput(t, `^urgent job ran on `, time.Minute)

	j.waitOutput(t, `^shoal: resuming from epoch `+held+` kept in `+kept+` \(job \S+; Slurm job `+j.id+`, restart 1\)`, time.Minute)
	j.finished(t, b, want)
}

// batchHostLost: the batch host of a running elastic job (--min-ranks 2 --max-ranks
// 8, on two or three hosts: sbatch -N 2-3) is killed, and shoal run with it. Slurm
// ends the job (NODE_FAIL) once the host has been silent for SlurmdTimeout and
// requeues it by itself (--requeue); its next run, on the two hosts left, resumes
// from the newest epoch DIR keeps on another number of ranks, chosen for those
// hosts, and ends with the uninterrupted checksum. At the end the host's slurmd is
// started again, and Slurm counts the host again.
func batchHostLost(t *testing.T, b *testbed.Bed) {
	heatArgs := []string{"--size", "1000", "--steps", "1500"}
	want := testenv.Reference(t, 4, heatArgs...)
	dir := filepath.Join(t.TempDir(), "durable")
	kept := regexp.QuoteMeta(dir)
	script := fmt.Sprintf("#!/bin/bash\nexec %s run --min-ranks 2 --max-ranks 8 --ckpt-interval 2s --durable %s -- %s %s --pace 6000\n",
		filepath.Join(testenv.Root, "bin/shoal"), dir,
		filepath.Join(testenv.Root, "build/examples/heat"), strings.Join(heatArgs, " "))
	// Not n1, whose loss would take slurmctld too; the 3 others at first, so that
	// the requeued job finds 2 hosts when one is down.
	j := sbatch(t, b, script, "-N", "2-3", "--exclude", "n1", "--no-kill", "--requeue", "--open-mode=append")

	j.waitOutput(t, `^shoal: epoch \d+ kept in `+kept, time.Minute)
	host := batchHost(t, b, j.id)
	if _, err := b.Kill(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.StartAgent(ctx, host); err != nil {
			t.Errorf("restart %s: %v", host, err)
		}
	}()
	// The newest epoch the killed run kept: nothing of it can be written after the kill.
	keptRx := regexp.MustCompile(`(?m)^shoal: epoch (\d+) kept in ` + kept + ` \(`)
	all := keptRx.FindAllStringSubmatch(j.output(), -1)
	newest := all[len(all)-1][1]

	resumed := j.waitOutput(t, `^shoal: resuming from epoch (\d+) kept in `+kept+` \(job \S+; Slurm job `+j.id+`, restart 1\)`, 2*time.Minute)[1]
	if resumed != newest {
		t.Errorf("resumed from epoch %s, want %s, the newest the lost run kept", resumed, newest)
	}
	if again := batchHost(t, b, j.id); again == host {
		t.Errorf("the requeued run's batch host is %s, the lost one", host)
	}
	out := j.finished(t, b, want)
	// The count follows the hosts: the epoch written on three hosts resumes on two
	// with fewer ranks.
	m := regexp.MustCompile(`restarting from epoch ` + resumed + `, written by (\d+) ranks, on (\d+) ranks`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no line of libshoal restoring epoch %s onto another count:\n%s", resumed, out)
	}
	before, after := atoi(t, m[1]), atoi(t, m[2])
	if after >= before {
		t.Errorf("epoch %s written by %d ranks on three hosts resumed on %d on two; want fewer", resumed, before, after)
	}
	t.Logf("epoch %s written by %d ranks on three hosts, resumed on %d on the two left", resumed, before, after)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// batchHost is the host that runs job id's batch script (BatchHost of scontrol show
// job).
func batchHost(t *testing.T, b *testbed.Bed, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.Exec(ctx, "n1", "scontrol", "show", "job", "--oneliner", id)
	if err != nil {
		t.Fatalf("scontrol show job %s: %v %s", id, err, out)
	}
	host := slurm.ParseJob(string(out)).BatchHost
	if host == "" {
		t.Fatalf("job %s has no BatchHost: %s", id, out)
	}
	return host
}

// finished waits until the job has printed its checksum and Slurm has it COMPLETED,
// and checks that the checksum is want and that no run of it started from the
// beginning. It returns the job's output.
func (j *batch) finished(t *testing.T, b *testbed.Bed, want string) string {
	t.Helper()
	j.waitOutput(t, `^\[0\] checksum: `, time.Minute)
	if state := waitState(t, b, j.id, func(s string) bool { return s == "COMPLETED" || s == "FAILED" }, 30*time.Second); state != "COMPLETED" {
		t.Errorf("the job ended %s, want COMPLETED", state)
	}
	out := j.output()
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	if regexp.MustCompile(`restarting \d+ ranks from the beginning`).MatchString(out) {
		t.Errorf("a run started from the beginning")
	}
	return out
}
