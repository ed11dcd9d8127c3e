package main

import (
	"bytes"
	"strings"
	"testing"
)

// Inside a Slurm allocation with no agent, shoal run starts agents that stop when it
// returns: --detach would leave a job with nobody to run it.
func TestRunInAllocationRefusesDetach(t *testing.T) {
	t.Setenv("SHOAL_DATA_DIR", t.TempDir())
	t.Setenv("SHOAL_AGENT", "")
	t.Setenv("SLURM_JOB_ID", "7")
	t.Setenv("SLURM_JOB_NODELIST", "n[1-4]")
	t.Setenv("SLURM_JOB_NUM_NODES", "4")
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "-n", "2", "--detach", "/bin/true"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "--detach inside a Slurm allocation") {
		t.Errorf("exit %d, stderr %q; want %d and a word on --detach inside an allocation", code, stderr.String(), exitUsage)
	}
}

func TestSlurmAgentUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"slurm-agent", "--job", "7"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("slurm-agent without --first: exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), "shoal run starts it") {
		t.Errorf("stderr %q: want it to say who starts slurm-agent", stderr.String())
	}
}
