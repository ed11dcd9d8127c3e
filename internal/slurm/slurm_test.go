package slurm

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want Allocation
		err  string // substring of the error; "" for none
	}{
		{map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-4]", "SLURM_JOB_NUM_NODES": "4"},
			Allocation{JobID: "42", NodeList: "n[1-4]", NumNodes: 4}, ""},
		{map[string]string{}, Allocation{}, "not inside a Slurm allocation"},
		{map[string]string{"SLURM_JOB_ID": "x1"}, Allocation{}, `SLURM_JOB_ID = "x1"`},
		{map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_NUM_NODES": "4"}, Allocation{}, "SLURM_JOB_NODELIST is not"},
		{map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n1"}, Allocation{}, `SLURM_JOB_NUM_NODES = ""`},
	}
	for _, tt := range tests {
		got, err := FromEnv(func(k string) string { return tt.env[k] })
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("FromEnv(%v): %v, want no error", tt.env, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("FromEnv(%v): error %v, want one with %q", tt.env, err, tt.err)
		case tt.err == "" && got != tt.want:
			t.Errorf("FromEnv(%v) = %+v, want %+v", tt.env, got, tt.want)
		}
	}
	if _, err := FromEnv(func(string) string { return "" }); !errors.Is(err, ErrNotAllocation) {
		t.Errorf("no SLURM_JOB_ID: %v, want ErrNotAllocation", err)
	}
}

func TestAgentPort(t *testing.T) {
	tests := []struct {
		job  string
		want int
	}{{"0", 30000}, {"1", 30003}, {"9999", 59997}, {"10001", 30003}, {"123456", 40368}}
	for _, tt := range tests {
		if got := AgentPort(tt.job); got != tt.want {
			t.Errorf("AgentPort(%s) = %d, want %d", tt.job, got, tt.want)
		}
		// The job store's port (+2) stays below 65536.
		if p := AgentPort(tt.job) + 2; p > 65535 {
			t.Errorf("AgentPort(%s) + 2 = %d: not a port", tt.job, p)
		}
	}
}

func TestAgentStepArgv(t *testing.T) {
	s := AgentStep{Alloc: Allocation{JobID: "7", NodeList: "n[1-4]", NumNodes: 4},
		Shoal: "/usr/bin/shoal", FirstNode: "n1", FirstAddr: "10.0.0.1", Port: 30021}
	got := s.Argv()
	want := []string{"srun", "--no-kill", "--whole", "--mpi=none", "--kill-on-bad-exit=0", "--label",
		"--nodes=4", "--ntasks=4", "--ntasks-per-node=1", "--job-name=shoal-agents",
		"/usr/bin/shoal", "slurm-agent", "--job", "7", "--first", "n1", "--first-addr", "10.0.0.1:30021", "--port", "30021"}
	if !slices.Equal(got, want) {
		t.Errorf("Argv() =\n%q\nwant\n%q", got, want)
	}
	if got := s.APIAddr(); got != "10.0.0.1:30022" {
		t.Errorf("APIAddr() = %s, want 10.0.0.1:30022", got)
	}
	// shoal run in the batch script: the agent on its node learns its pid.
	s.Run = "n1:4242"
	if got, want := s.Argv(), append(want, "--run", "n1:4242"); !slices.Equal(got, want) {
		t.Errorf("Argv() with Run =\n%q\nwant\n%q", got, want)
	}
}

func TestParseNodeAddr(t *testing.T) {
	tests := []struct{ line, want string }{
		{"NodeName=n2 Arch=x86_64 CoresPerSocket=2 NodeAddr=10.77.235.12 NodeHostName=n2 Version=22.05.8", "10.77.235.12"},
		{"NodeName=c001 NodeAddr=c001 NodeHostName=c001", "c001"},
		{"NodeName=c001 State=IDLE", ""},
	}
	for _, tt := range tests {
		if got := ParseNodeAddr(tt.line); got != tt.want {
			t.Errorf("ParseNodeAddr(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestBase(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SLURM_TMPDIR": "/local/job7"}, "/local/job7"},
		{map[string]string{}, os.TempDir()},
	}
	for _, tt := range tests {
		if got := Base(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("Base(%v) = %s, want %s", tt.env, got, tt.want)
		}
	}
}

func TestParseJob(t *testing.T) {
	tests := []struct {
		line string
		want Job
		why  string
	}{
		{"JobId=12 JobName=job.sh UserId=root(0) JobState=RUNNING Reason=None Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 BatchHost=n2",
			Job{State: "RUNNING", Requeue: true, Batch: true, BatchHost: "n2"}, ""},
		{"JobId=12 JobState=RUNNING Requeue=0 Restarts=2 BatchFlag=1",
			Job{State: "RUNNING", Batch: true, Restarts: 2}, "submitted with --no-requeue (or the site's JobRequeue=0)"},
		{"JobId=12 JobState=CANCELLED Requeue=1 Restarts=0 BatchFlag=1",
			Job{State: "CANCELLED", Requeue: true, Batch: true}, "its state is CANCELLED"},
		{"JobId=12 JobState=RUNNING Requeue=1 Restarts=0 BatchFlag=0",
			Job{State: "RUNNING", Requeue: true}, "not a batch job"},
	}
	for _, tt := range tests {
		got := ParseJob(tt.line)
		if got != tt.want {
			t.Errorf("ParseJob(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
		if why := got.Requeueable(); why != tt.why {
			t.Errorf("Requeueable(%+v) = %q, want %q", got, why, tt.why)
		}
	}
}

func TestNodeState(t *testing.T) {
	tests := []struct {
		line, state string
		lost        bool
	}{
		{"NodeName=n2 Arch=x86_64 CoresPerSocket=2 State=IDLE ThreadsPerCore=1", "IDLE", false},
		{"NodeName=n2 State=ALLOCATED ThreadsPerCore=1", "ALLOCATED", false},
		{"NodeName=n2 State=MIXED+DRAIN ThreadsPerCore=1", "MIXED+DRAIN", false},
		{"NodeName=n2 State=ALLOCATED* ThreadsPerCore=1", "ALLOCATED*", true},
		{"NodeName=n2 State=DOWN* ThreadsPerCore=1", "DOWN*", true},
		{"NodeName=n2 State=DOWN+NOT_RESPONDING ThreadsPerCore=1", "DOWN+NOT_RESPONDING", true},
		{"NodeName=n2 State=IDLE+NOT_RESPONDING", "IDLE+NOT_RESPONDING", true},
		{"NodeName=n2", "", false},
	}
	for _, tt := range tests {
		state := ParseNodeState(tt.line)
		if state != tt.state {
			t.Errorf("ParseNodeState(%q) = %q, want %q", tt.line, state, tt.state)
		}
		if lost := StateLost(state); lost != tt.lost {
			t.Errorf("StateLost(%q) = %v, want %v", state, lost, tt.lost)
		}
	}
}

// TestScrubEnv: the agents' environment loses the job's Slurm variables and the
// secret, and keeps where Slurm's configuration is.
func TestScrubEnv(t *testing.T) {
	for k, v := range map[string]string{SecretEnv: "s3cret", "SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n2",
		"SLURM_CONF": "/etc/slurm/slurm.conf", "SHOAL_KEEP": "yes"} {
		t.Setenv(k, v)
	}
	if got := ScrubEnv(); got != "s3cret" {
		t.Errorf("ScrubEnv() = %q, want the secret", got)
	}
	for _, k := range []string{SecretEnv, "SLURM_JOB_ID", "SLURMD_NODENAME"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%s is left", k, v)
		}
	}
	for _, k := range []string{"SLURM_CONF", "SHOAL_KEEP"} {
		if _, ok := os.LookupEnv(k); !ok {
			t.Errorf("%s is gone", k)
		}
	}
}
