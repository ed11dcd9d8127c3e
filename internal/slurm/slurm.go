// Package slurm runs a Shoal cluster inside a Slurm allocation: it reads the allocation
// from the environment Slurm gives a batch script, builds the srun command that starts
// one agent on each allocated node, and says how those agents find each other. The MPI
// launch stays Shoal's own, through its agents (docs/slurm.md says why).
//
// The agents of an allocation listen on ports derived from its job id ([AgentPort]): the
// agent of the first node starts the cluster and the others join it there, so one srun
// starts them all with no rendezvous file (no shared file system is assumed).
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Errors of the slurm package.
var (
	// ErrNotAllocation: the environment names no Slurm job (no SLURM_JOB_ID).
	ErrNotAllocation = errors.New("slurm: not inside a Slurm allocation")
	// ErrScontrol: scontrol failed or printed what this package cannot read.
	ErrScontrol = errors.New("slurm: scontrol")
	// ErrUnsafeDir: a directory that would hold an allocation's files on a node could
	// be changed by another user, or is not the one this run made ([DirError]).
	ErrUnsafeDir = errors.New("slurm: unsafe directory")
)

// SecretEnv carries the allocation's cluster secret from `shoal run` to the agents
// through srun, which passes the submitter's environment to its tasks. Each agent's
// start-up writes it to a file of mode 0600 and removes it from its environment before
// the agent starts anything, so ranks never see it.
const SecretEnv = "SHOAL_SLURM_SECRET"

// Allocation is the part of a Slurm job's environment Shoal uses.
type Allocation struct {
	JobID    string // SLURM_JOB_ID
	NodeList string // SLURM_JOB_NODELIST, Slurm's compressed form: n[1-4]
	NumNodes int    // SLURM_JOB_NUM_NODES
	// Restarts is SLURM_RESTART_COUNT: how often the job was requeued before
	// this run (0 for its first).
	Restarts int
}

// FromEnv reads the allocation of the Slurm job whose environment getenv reads (a batch
// script, salloc's shell). It fails with [ErrNotAllocation] when SLURM_JOB_ID is unset,
// and names the variable that is missing or malformed otherwise.
func FromEnv(getenv func(string) string) (Allocation, error) {
	a := Allocation{JobID: getenv("SLURM_JOB_ID"), NodeList: getenv("SLURM_JOB_NODELIST")}
	if a.JobID == "" {
		return a, ErrNotAllocation
	}
	if _, err := strconv.ParseUint(a.JobID, 10, 32); err != nil {
		return a, fmt.Errorf("slurm: SLURM_JOB_ID = %q: want a job number", a.JobID)
	}
	if a.NodeList == "" {
		return a, errors.New("slurm: SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not")
	}
	n, err := strconv.Atoi(getenv("SLURM_JOB_NUM_NODES"))
	if err != nil || n < 1 {
		return a, fmt.Errorf("slurm: SLURM_JOB_NUM_NODES = %q: want the number of allocated nodes", getenv("SLURM_JOB_NUM_NODES"))
	}
	a.NumNodes = n
	a.Restarts, _ = strconv.Atoi(getenv("SLURM_RESTART_COUNT"))
	return a, nil
}

// Port range of the allocations' agents: each takes three consecutive ports (gossip,
// API, job store), from portBase + 3 × (job id mod portSlots).
const (
	portBase  = 30000
	portSlots = 10000
)

// AgentPort is the gossip port of the agents of job jobID; the API listens on the next
// port and the job store's replication on the one after. Two allocations sharing a node
// collide only when their job ids are equal modulo 10,000.
func AgentPort(jobID string) int {
	id, _ := strconv.ParseUint(jobID, 10, 64)
	return portBase + 3*int(id%portSlots)
}

// DirName is how the names of an allocation's directories on its nodes start: each
// is DirName, a kind ("agent", "run") and a random string ([MakeNodeDir], [PrivateDir]).
func DirName(jobID string) string { return "shoal-slurm-" + jobID }

// AgentStep describes the srun step that runs the agents.
type AgentStep struct {
	Alloc     Allocation
	Shoal     string // the shoal executable, the same path on every node
	FirstNode string // the node whose agent starts the cluster (the allocation's first)
	FirstAddr string // its address, as scontrol gives it (NodeAddr)
	Port      int    // [AgentPort]
	// Run is where shoal run runs, NODE:PID, when that is a node of the allocation
	// (the batch host); "" otherwise. Slurm's SIGTERM on preemption goes to the
	// steps' tasks, the agents, and not to the batch script: the agent on NODE
	// passes it on to shoal run, which holds the job.
	Run string
}

// Argv is the srun command line that starts one agent on every node of the allocation:
//   - --no-kill: a lost node does not end the step, the other agents go on;
//   - --whole: each agent's step gets every CPU Slurm allocated on its node, which its
//     ranks use (under task/cgroup a step is confined to its CPUs);
//   - --mpi=none: the agents are no MPI job, whatever the site's MpiDefault;
//   - --kill-on-bad-exit=0: an agent that fails ends alone;
//   - --label: the agents' log lines in one file, prefixed by task number.
func (s AgentStep) Argv() []string {
	n := strconv.Itoa(s.Alloc.NumNodes)
	argv := []string{"srun", "--no-kill", "--whole", "--mpi=none", "--kill-on-bad-exit=0", "--label",
		"--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1", "--job-name=shoal-agents",
		s.Shoal, "slurm-agent",
		"--job", s.Alloc.JobID, "--first", s.FirstNode,
		"--first-addr", net.JoinHostPort(s.FirstAddr, strconv.Itoa(s.Port)),
		"--port", strconv.Itoa(s.Port)}
	if s.Run != "" {
		argv = append(argv, "--run", s.Run)
	}
	return argv
}

// APIAddr is the API address of the first node's agent: where `shoal run` submits.
func (s AgentStep) APIAddr() string {
	return net.JoinHostPort(s.FirstAddr, strconv.Itoa(s.Port+1))
}

// Hostnames expands a Slurm node list (n[1-4,7]) into node names, in order, with
// `scontrol show hostnames`.
func Hostnames(ctx context.Context, nodeList string) ([]string, error) {
	out, err := scontrol(ctx, "show", "hostnames", nodeList)
	if err != nil {
		return nil, err
	}
	names := strings.Fields(out)
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: show hostnames %s: no names", ErrScontrol, nodeList)
	}
	return names, nil
}

// NodeAddr is the address Slurm reaches node at (NodeAddr of `scontrol show node`): its
// host name on most clusters, an IP address where slurm.conf says so.
func NodeAddr(ctx context.Context, node string) (string, error) {
	out, err := scontrol(ctx, "show", "node", "--oneliner", node)
	if err != nil {
		return "", err
	}
	addr := ParseNodeAddr(out)
	if addr == "" {
		return "", fmt.Errorf("%w: show node %s: no NodeAddr in %q", ErrScontrol, node, strings.TrimSpace(out))
	}
	return addr, nil
}

// ParseNodeAddr returns the NodeAddr field of one line of `scontrol show node
// --oneliner`, or "".
func ParseNodeAddr(line string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "NodeAddr="); ok {
			return v
		}
	}
	return ""
}

// NodeLost reports whether Slurm has given up on node: DOWN, or not responding (the
// "*" scontrol adds to its state), as it marks a node silent for SlurmdTimeout.
func NodeLost(ctx context.Context, node string) (bool, error) {
	out, err := scontrol(ctx, "show", "node", "--oneliner", node)
	if err != nil {
		return false, err
	}
	return StateLost(ParseNodeState(out)), nil
}

// ParseNodeState returns the State field of one line of `scontrol show node
// --oneliner` (IDLE, ALLOCATED*, DOWN*+DRAIN, …), or "".
func ParseNodeState(line string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "State="); ok {
			return v
		}
	}
	return ""
}

// StateLost reports whether a node state of scontrol's says Slurm has given up on the
// node: DOWN, or not responding ("*", NOT_RESPONDING).
func StateLost(state string) bool {
	return strings.HasPrefix(state, "DOWN") || strings.Contains(state, "*") || strings.Contains(state, "NOT_RESPONDING")
}

func scontrol(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "scontrol", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("%w %s: %s", ErrScontrol, strings.Join(args, " "), msg)
	}
	return stdout.String(), nil
}

// ScrubEnv removes from this process's environment what Slurm set for the agents' step,
// before an agent starts: Open MPI that sees SLURM_JOB_ID launches its daemons through
// srun and takes its hosts from the allocation, not from the rankfile Shoal gives it;
// and the secret ([SecretEnv]) must not reach the ranks. SLURM_CONF stays: the agents
// run scontrol (watchOrphan). It returns the secret.
func ScrubEnv() (secret string) {
	secret = os.Getenv(SecretEnv)
	os.Unsetenv(SecretEnv)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "SLURM_CONF" {
			continue // where Slurm's commands find the cluster's configuration
		}
		if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SLURMD_") {
			os.Unsetenv(k)
		}
	}
	return secret
}

// Job is the part of `scontrol show job` Shoal uses to decide, after it held a job
// on Slurm's warning signal, whether to requeue it.
type Job struct {
	State    string // JobState: RUNNING, CANCELLED, TIMEOUT, ...
	Requeue  bool   // Requeue=1: sbatch --requeue, or the site's JobRequeue default
	Batch    bool   // BatchFlag=1: a batch job (salloc's are not requeued)
	Restarts int    // Restarts: how often it was requeued (SLURM_RESTART_COUNT in its run)
	// BatchHost is the node that runs the batch script, "" for salloc's jobs.
	BatchHost string
}

// ParseJob reads one line of `scontrol show job --oneliner`.
func ParseJob(line string) Job {
	var j Job
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "JobState":
			j.State = v
		case "Requeue":
			j.Requeue = v == "1"
		case "BatchFlag":
			j.Batch = v == "1"
		case "Restarts":
			j.Restarts, _ = strconv.Atoi(v)
		case "BatchHost":
			j.BatchHost = v
		}
	}
	return j
}

// Requeueable says why Shoal must not requeue job j itself after holding it, or "":
// only a running batch job that accepts a requeue is. A job Slurm is ending
// (scancel, the time limit reached) stays ended: a requeue would undo the user's
// cancel.
func (j Job) Requeueable() string {
	switch {
	case !j.Batch:
		return "not a batch job"
	case !j.Requeue:
		return "submitted with --no-requeue (or the site's JobRequeue=0)"
	case j.State != "RUNNING":
		return "its state is " + j.State
	}
	return ""
}

// ShowJob asks Slurm about job id.
func ShowJob(ctx context.Context, id string) (Job, error) {
	out, err := scontrol(ctx, "show", "job", "--oneliner", id)
	if err != nil {
		return Job{}, err
	}
	return ParseJob(out), nil
}

// Requeue puts job id back into the queue (`scontrol requeue`): Slurm ends its
// processes and runs its batch script again, with the same job id and
// SLURM_RESTART_COUNT one higher, once the job's credential has expired (AuthInfo
// cred_expire, 120 s by default).
func Requeue(ctx context.Context, id string) error {
	_, err := scontrol(ctx, "requeue", id)
	return err
}

// Cancel ends job id (`scancel`).
func Cancel(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "scancel", id).CombinedOutput(); err != nil {
		return fmt.Errorf("scancel %s: %v: %s", id, err, strings.TrimSpace(string(out)))
	}
	return nil
}
