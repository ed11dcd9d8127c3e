// Package slurm runs Shoal jobs as Slurm batch jobs on a testbed running a real Slurm
// (shoal testbed up --slurm): `shoal run` in the batch script starts its agents over the
// allocation, and a host killed while the job runs costs a restart from the last epoch,
// not the job. The tests bring up their own testbed (instance 242) and take it down.
package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 242

// up brings up a testbed of n hosts of 2 cores running Slurm; it is torn down at the end
// of the test, after logging the Slurm daemons' logs if the test failed.
func up(t *testing.T, n int) *testbed.Bed {
	t.Helper()
	testenv.NeedTestbed(t)
	testenv.NeedSlurm(t)
	testenv.Built(t, "build/examples/heat")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := testbed.Up(ctx, testbed.Config{Nodes: n, Cores: []int{2}, Instance: instance, Slurm: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("testbed up --slurm: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs := []string{filepath.Join(b.Dir(), "slurm", "slurmctld.log")}
			for i := 1; i <= n; i++ {
				logs = append(logs, filepath.Join(b.Dir(), fmt.Sprintf("n%d", i), "slurmd.log"))
			}
			for _, l := range logs {
				if out, err := os.ReadFile(l); err == nil {
					t.Logf("%s (tail):\n%s", l, tail(string(out), 20))
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Down(ctx); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	return b
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// batch is a batch job and the file its script's output goes to.
type batch struct {
	id  string
	out string
}

// sbatch submits script from host n1 with the given sbatch flags. The script's last
// line should be endLine, which the test waits for: sbatch --wait would tell the end
// too, but it polls Slurm seconds apart.
func sbatch(t *testing.T, b *testbed.Bed, script string, flags ...string) *batch {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "job.out")
	argv := append(append([]string{"sbatch", "--parsable", "--output", out}, flags...), path)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := b.Exec(ctx, "n1", argv...)
	if err != nil {
		t.Fatal(err)
	}
	j := &batch{id: strings.TrimSpace(string(id)), out: out}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of batch job %s:\n%s", j.id, j.output())
		}
	})
	return j
}

// endLine is the last line of a test's batch script: shoal run's exit code.
const endLine = `echo "shoal run exited $?"`

// wait waits for the line endLine prints and returns the exit code it gives.
func (j *batch) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	code, _ := strconv.Atoi(j.waitOutput(t, `^shoal run exited (\d+)$`, timeout)[1])
	return code
}

func (j *batch) output() string {
	b, _ := os.ReadFile(j.out)
	return string(b)
}

// waitOutput waits until the job's output has a line matching re, and returns its
// submatches.
func (j *batch) waitOutput(t *testing.T, re string, timeout time.Duration) []string {
	t.Helper()
	rx := regexp.MustCompile("(?m)" + re)
	deadline := time.Now().Add(timeout)
	for {
		if m := rx.FindStringSubmatch(j.output()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %q in the job's output within %v", re, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rankHost is a host other than n1 that runs ranks in the newest launch the job's
// output reports ("launching 6 ranks on 3 nodes (n1:0-1 n3:2-3 n4:4-5)", or "on n1, n3,
// n4" for a relaunch), or "".
func rankHost(out string) string {
	launches := regexp.MustCompile(`(?m)^shoal: launching \d+ ranks on (.*)$`).FindAllStringSubmatch(out, -1)
	if len(launches) == 0 {
		return ""
	}
	where := launches[len(launches)-1][1]
	hosts := regexp.MustCompile(`\b(n\d+):`).FindAllStringSubmatch(where, -1)
	if len(hosts) == 0 {
		list, _, _ := strings.Cut(where, " (")
		for _, h := range strings.Split(list, ", ") {
			hosts = append(hosts, []string{h, h})
		}
	}
	for _, h := range hosts {
		if h[1] != "n1" {
			return h[1]
		}
	}
	return ""
}

// TestSlurm runs the batch jobs of docs/slurm.md on one testbed of 4 hosts, one after
// the other: bringing a testbed with Slurm up costs more than most of the jobs. A job
// that loses its batch host has the host's slurmd started again after it; the job that
// kills another host comes last: that host stays down.
func TestSlurm(t *testing.T) {
	b := up(t, 4)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *testbed.Bed)
	}{
		{"Requeued", batchJobRequeued},
		{"HeldS3", batchJobHeldS3},
		{"SubCommunicator", batchJobSubCommunicator},
		{"Preempted", batchJobPreempted},
		{"BatchHostLost", batchHostLost},
		{"KilledHost", batchJobKilledHost},
	} {
		if !t.Run(tc.name, func(t *testing.T) { tc.run(t, b) }) {
			return
		}
	}
}

// batchJobKilledHost: the batch script users write (docs/slurm.md) runs heat on 6
// ranks over 4 allocated hosts; a host running ranks, not the batch host, is killed
// once an epoch is complete. Shoal restarts the ranks on the survivors from that epoch,
// and the job ends with the uninterrupted checksum and exit code 0, its allocation
// shrunk by the lost host.
func batchJobKilledHost(t *testing.T, b *testbed.Bed) {
	heatArgs := []string{"--size", "1000", "--steps", "2500"}
	want := testenv.Reference(t, 6, heatArgs...)
	shoal := filepath.Join(testenv.Root, "bin/shoal")
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	// --pace: at least 10 s of steps, so that the kill lands in the middle.
	script := fmt.Sprintf("#!/bin/bash\n%s run -n 6 --ckpt-interval 2s -- %s %s --pace 4000\n%s\n",
		shoal, heat, strings.Join(heatArgs, " "), endLine)
	j := sbatch(t, b, script, "-N", "4", "--no-kill")

	j.waitOutput(t, `^shoal: epoch \d+ complete`, time.Minute)
	victim := rankHost(j.output())
	if victim == "" {
		t.Fatalf("no host but n1 runs ranks: nothing to kill")
	}
	if _, err := b.Kill(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("shoal run exited %d", code)
	}
	out := j.output()
	if !regexp.MustCompile(`node ` + victim + ` lost .*; restarting 6 ranks from epoch \d+`).MatchString(out) {
		t.Errorf("no restart from an epoch after %s was lost", victim)
	}
	if !strings.Contains(out, "heat: resumed at step") {
		t.Errorf("heat did not resume from a checkpoint")
	}
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	// The agents left: nothing of them remains in the survivors' temporary dirs.
	hosts, _ := b.Hosts()
	for _, h := range hosts {
		if h.Name == victim {
			continue
		}
		if m, _ := filepath.Glob(filepath.Join(h.TmpDir, "shoal-slurm-"+j.id+"*")); len(m) > 0 {
			t.Errorf("%s keeps %v after the job", h.Name, m)
		}
	}
}

func TestRankHost(t *testing.T) {
	tests := []struct{ out, want string }{
		{"shoal: launching 6 ranks on 3 nodes (n1:0-1 n3:2-3 n4:4-5)\n", "n3"},
		{"shoal: launching 6 ranks on 3 nodes (n1:0-1 n3:2-3 n4:4-5)\nshoal: launching 6 ranks on n1, n4 (2 of n3's ranks → n4), from epoch 1\n", "n4"},
		{"shoal: launching 6 ranks on 1 nodes (n1:0-5)\n", ""},
		{"no launch\n", ""},
	}
	for _, tt := range tests {
		if got := rankHost(tt.out); got != tt.want {
			t.Errorf("rankHost(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
}
