package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"shoal/internal/durable"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// Inside a Slurm allocation with no agent, shoal run starts agents that stop when it
// returns: --detach would leave a job with nobody to run it.
func TestRunInAllocationRefusesDetach(t *testing.T) {
	inAllocation(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "-n", "2", "--detach", "/bin/true"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "--detach inside a Slurm allocation") {
		t.Errorf("exit %d, stderr %q; want %d and a word on --detach inside an allocation", code, stderr.String(), exitUsage)
	}
}

// TestRunInAllocationRefusesForeignDurable: an epoch of another job in --durable DIR
// is refused in one line before any agent starts (there is no Slurm here to start
// one), and DIR keeps it.
func TestRunInAllocationRefusesForeignDurable(t *testing.T) {
	inAllocation(t)
	dir := t.TempDir()
	other := durable.Identity{Program: "heat", Args: []string{"--steps", "3000"}, Ranks: 1}
	shard := func(int) (io.ReadCloser, error) {
		b, err := shard.Encode(shard.Header{Job: "heat-1", Epoch: 3, NRanks: 1}, []shard.Region{{ID: 1, ElemSize: 1, Count: 4, Data: []byte("heat")}})
		return io.NopCloser(bytes.NewReader(b)), err
	}
	if err := durable.Save(dir, durable.Manifest{Identity: other, Job: "heat-1", SlurmJob: "6", Epoch: 3}, shard); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		not  string
	}{
		{[]string{"-n", "2"}, "not of true on 2 ranks"},
		{[]string{"--min-ranks", "1", "--max-ranks", "4"}, "not of true on any number of ranks"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append(append([]string{"run"}, tt.args...), "--durable", dir, "/bin/true"), &stdout, &stderr)
		msg := strings.TrimSuffix(stderr.String(), "\n")
		if code != exitFailure || strings.Contains(msg, "\n") || !strings.Contains(msg, tt.not) || !strings.Contains(msg, "give another DIR") {
			t.Errorf("run %v: exit %d, stderr %q; want %d and one line refusing heat's epoch", tt.args, code, stderr.String(), exitFailure)
		}
		if strings.Contains(stdout.String(), "starting an agent") {
			t.Errorf("run %v: agents were started: %q", tt.args, stdout.String())
		}
	}
	if _, err := durable.Peek(dir, other); err != nil {
		t.Errorf("DIR lost heat's epoch: %v", err)
	}
}

// inAllocation makes the test's environment a Slurm allocation of 4 nodes with no
// agent running.
func inAllocation(t *testing.T) {
	t.Setenv("SHOAL_DATA_DIR", t.TempDir())
	t.Setenv("SHOAL_AGENT", "")
	t.Setenv("SLURM_JOB_ID", "7")
	t.Setenv("SLURM_JOB_NODELIST", "n[1-4]")
	t.Setenv("SLURM_JOB_NUM_NODES", "4")
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

// TestOrphaned: an agent ends the Slurm job left without its batch script only when
// shoal run's node has been dead orphanGrace, and only the live agent of the lowest
// name, not leaving, does.
func TestOrphaned(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	member := func(name, state string, ago time.Duration) node.Node {
		return node.Node{Name: name, State: state, Since: now.Add(-ago)}
	}
	long, short := orphanGrace+time.Second, orphanGrace-time.Second
	tests := []struct {
		name  string
		nodes []node.Node
		want  bool
	}{
		{"dead long enough", []node.Node{member("n2", "dead", long), member("n3", "alive", time.Hour), member("n4", "alive", time.Hour)}, true},
		{"dead too briefly", []node.Node{member("n2", "dead", short), member("n3", "alive", time.Hour), member("n4", "alive", time.Hour)}, false},
		{"left at the job's end", []node.Node{member("n2", "left", long), member("n3", "alive", time.Hour)}, false},
		{"suspect", []node.Node{member("n2", "suspect", long), member("n3", "alive", time.Hour)}, false},
		{"alive", []node.Node{member("n2", "alive", long), member("n3", "alive", time.Hour)}, false},
		{"a lower live node acts", []node.Node{member("n1", "alive", time.Hour), member("n2", "dead", long), member("n3", "alive", time.Hour)}, false},
		{"a lower dead node does not", []node.Node{member("n1", "dead", time.Hour), member("n2", "dead", long), member("n3", "alive", time.Hour)}, true},
		{"self leaving", []node.Node{member("n2", "dead", long), {Name: "n3", State: "alive", Leaving: true}}, false},
		{"run node unknown", []node.Node{member("n3", "alive", time.Hour)}, false},
	}
	for _, tt := range tests {
		if got := orphaned(tt.nodes, "n3", "n2", now); got != tt.want {
			t.Errorf("%s: orphaned = %v, want %v", tt.name, got, tt.want)
		}
	}
}
