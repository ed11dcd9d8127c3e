package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/agent"
	"shoal/internal/job"
	"shoal/internal/launch"
	"shoal/internal/membership"
	"shoal/test/poll"
	"shoal/test/watch"
)

// rshAgent is an in-process agent named node-b on loopback, with the files
// shoal rsh needs, set in the test's environment: a nodes file mapping node-b
// and 127.0.0.1 to it, the secret file and a job id. It returns the agent and
// the path of a fake orted (see fakeOrted) that the agent accepts as a daemon.
func rshAgent(t *testing.T, job string) (*agent.Agent, string) {
	t.Helper()
	orted := fakeOrted(t)
	cfg := agent.Config{
		DataDir:      t.TempDir(),
		Name:         "node-b",
		Bind:         "127.0.0.1:0",
		Init:         true,
		Gossip:       membership.DefaultLocalConfig(),
		SpeedSample:  10 * time.Millisecond,
		ExtraDaemons: []string{orted},
	}
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("agent", "node-b")
	}
	a, err := agent.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	nodes, _ := json.Marshal(map[string]string{"node-b": a.APIAddr(), "127.0.0.1": a.APIAddr()})
	nodesFile := filepath.Join(t.TempDir(), "nodes.json")
	if err := os.WriteFile(nodesFile, nodes, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHOAL_RSH_NODES", nodesFile)
	t.Setenv("SHOAL_SECRET_FILE", filepath.Join(a.DataDir(), agent.SecretFile))
	t.Setenv("SHOAL_JOB", job)
	return a, orted
}

// fakeOrted writes a script named orted that runs its first argument with sh:
// an agent runs it only when its Config.ExtraDaemons names it.
func fakeOrted(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "orted")
	if err := os.WriteFile(p, []byte("#!/bin/sh\neval \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRshHelpIsTrue(t *testing.T) {
	out := runCLI(t, exitOK, "rsh", "--help")
	for _, s := range []string{"plm_rsh_agent", "SHOAL_RSH_NODES", "SHOAL_SECRET_FILE", "SHOAL_JOB", "255", "128 + N", "orted"} {
		if !strings.Contains(out, s) {
			t.Errorf("shoal rsh --help does not mention %q", s)
		}
	}
}

func TestRsh(t *testing.T) {
	a, orted := rshAgent(t, "j1")
	if _, err := a.Launcher().Grant("j1", "node-b", 1, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	rsh := func(args ...string) (stdout, stderr string, code int) {
		var o, e bytes.Buffer
		code = run(append([]string{"rsh", "-n"}, args...), &o, &e)
		return o.String(), e.String(), code
	}
	// Output and exit codes pass through; the node is found by name or IP.
	for _, tt := range []struct {
		node, script, stdout string
		code                 int
	}{
		{"node-b", "echo hello; exit 7", "hello\n", 7},
		{"127.0.0.1", "echo $SHOAL_NODE_DATA", a.DataDir() + "\n", 0},
		{"user@node-b", "kill -9 $$", "", 137},
	} {
		stdout, stderr, code := rsh(tt.node, orted, "'"+tt.script+"'")
		if stdout != tt.stdout || code != tt.code {
			t.Errorf("shoal rsh %s %q: exit %d, stdout %q, stderr %q; want %d, %q", tt.node, tt.script, code, stdout, stderr, tt.code, tt.stdout)
		}
	}

	// Failures: 255 and one line.
	for _, tt := range []struct {
		name  string
		env   [2]string // variable to change for this case
		args  []string
		wants string
	}{
		{"unknown node", [2]string{}, []string{"node-z", orted}, `node "node-z" is not in $SHOAL_RSH_NODES`},
		{"no nodes file", [2]string{"SHOAL_RSH_NODES", ""}, []string{"node-b", orted}, "$SHOAL_RSH_NODES is not set"},
		{"bad nodes file", [2]string{"SHOAL_RSH_NODES", orted}, []string{"node-b", orted}, "want a JSON object"},
		{"no secret", [2]string{"SHOAL_SECRET_FILE", ""}, []string{"node-b", orted}, "neither $SHOAL_AGENT_SOCKET nor $SHOAL_SECRET_FILE is set"},
		{"no job", [2]string{"SHOAL_JOB", ""}, []string{"node-b", orted}, "$SHOAL_JOB"},
		{"job not granted", [2]string{"SHOAL_JOB", "j2"}, []string{"node-b", orted}, "job j2 has no live launch grant on node node-b"},
		{"not a daemon", [2]string{}, []string{"node-b", "cat", "/etc/passwd"}, "only launches MPI daemons"},
		{"no command", [2]string{}, []string{"node-b"}, "want NODE and a command"},
		{"unknown option", [2]string{}, []string{"-p", "22", "node-b", orted}, `unknown option "-p"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env[0] != "" {
				t.Setenv(tt.env[0], tt.env[1])
			}
			_, stderr, code := rsh(tt.args...)
			if code != 255 || !strings.Contains(stderr, tt.wants) || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "shoal rsh: ") {
				t.Errorf("exit %d, stderr %q; want 255 and one line containing %q", code, stderr, tt.wants)
			}
		})
	}
}

// buildShoal builds the shoal command into a temporary directory.
func buildShoal(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shoal")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// pidsWithEnv returns the processes whose environment has key=value with
// value satisfying match.
func pidsWithEnv(key string, match func(string) bool) []int {
	names, _ := filepath.Glob("/proc/[0-9]*/environ")
	var pids []int
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(kv, key+"="); ok && match(v) {
				var pid int
				fmt.Sscanf(n, "/proc/%d/environ", &pid)
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// mpiHello is an MPI program whose ranks agree on the sum of their ranks.
const mpiHello = `#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d: sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
`

// mpirun returns an mpirun command with 2 ranks, one on this host and one on
// node-b, launched on node-b through shoal rsh. Everything it starts on this
// host carries SHOAL_TEST_MARK=mark, for the cleanup.
func mpirun(t *testing.T, ctx context.Context, bin, mark string, prog ...string) *exec.Cmd {
	args := append([]string{"--allow-run-as-root", "--oversubscribe", "-n", "2",
		"--host", "localhost:1,node-b:1", "--mca", "plm_rsh_agent", bin + " rsh"}, prog...)
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	cmd.Env = append(os.Environ(), "SHOAL_TEST_MARK="+mark)
	t.Cleanup(func() {
		for _, pid := range pidsWithEnv("SHOAL_TEST_MARK", func(v string) bool { return v == mark }) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd
}

// TestRshUnderOpenMPI runs a 2-rank job with the real mpirun, whose second
// host, node-b, is reached through shoal rsh and the agent (on this machine:
// Open MPI never resolves node-b itself, it only hands the name to the rsh
// agent). Then it kills shoal rsh during a run and checks that the agent ends
// the remote daemon and its rank.
func TestRshUnderOpenMPI(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it): mpirun not found")
	}
	bin := buildShoal(t)
	job := fmt.Sprintf("rsh-test-%d", os.Getpid())
	a, _ := rshAgent(t, job)
	if _, err := a.Launcher().Grant(job, "node-b", 1, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	prog, want := []string{"hostname"}, ""
	if _, err := exec.LookPath("mpicc"); err == nil {
		dir := t.TempDir()
		src := filepath.Join(dir, "hello.c")
		os.WriteFile(src, []byte(mpiHello), 0o644)
		if out, err := exec.Command("mpicc", "-o", filepath.Join(dir, "hello"), src).CombinedOutput(); err != nil {
			t.Fatalf("mpicc: %v\n%s", err, out)
		}
		prog, want = []string{filepath.Join(dir, "hello")}, "rank 0 of 2: sum 1\nrank 1 of 2: sum 1\n"
	} else {
		t.Log("mpicc not found: running hostname instead of an MPI program")
	}
	var stdout, stderr bytes.Buffer
	cmd := mpirun(t, ctx, bin, job+"-1", prog...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mpirun: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	slices.Sort(lines)
	if got := strings.Join(lines, "\n") + "\n"; want != "" && got != want || len(lines) != 2 {
		t.Errorf("mpirun output:\n%s\nwant two ranks%s", &stdout, map[bool]string{true: ":\n" + want}[want != ""])
	}
	poll.Until(t, 5*time.Second, func() string {
		if n := a.Launcher().Running(job); n != 0 {
			return fmt.Sprintf("%d launches still running on node-b after mpirun ended", n)
		}
		return ""
	})

	// Kill shoal rsh while the job runs: the daemon and the rank it started
	// on node-b must go, and mpirun must notice.
	cmd = mpirun(t, ctx, bin, job+"-2", "sleep", "300")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mpirunDone := make(chan error, 1)
	go func() { mpirunDone <- cmd.Wait() }()
	launched := func(v string) bool { return strings.Contains(v, "/"+job+"/") }
	var remote []int
	poll.Until(t, 20*time.Second, func() string {
		remote = nil
		for _, pid := range pidsWithEnv(launch.MarkerVar, launched) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "sleep\n" {
				remote = append(remote, pid)
			}
		}
		if len(remote) != 1 {
			return fmt.Sprintf("%d ranks running on node-b, want 1", len(remote))
		}
		return ""
	})
	launchedPids := pidsWithEnv(launch.MarkerVar, launched)
	rsh := pidsWithEnv("SHOAL_TEST_MARK", func(v string) bool { return v == job+"-2" })
	killed := 0
	for _, pid := range rsh {
		if args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(args), "\x00rsh\x00node-b\x00") {
			syscall.Kill(pid, syscall.SIGKILL)
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("found %d shoal rsh processes, want 1", killed)
	}
	poll.Until(t, 5*time.Second, func() string {
		for _, pid := range launchedPids {
			if processAlive(pid) {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				return fmt.Sprintf("launched process %d (%s) still running after shoal rsh was killed", pid, strings.TrimSpace(string(comm)))
			}
		}
		if n := a.Launcher().Running(job); n != 0 {
			return fmt.Sprintf("%d launches still running on node-b", n)
		}
		return ""
	})
	select {
	case err := <-mpirunDone:
		if err == nil {
			t.Errorf("mpirun succeeded after its remote daemon was killed")
		}
	case <-time.After(20 * time.Second):
		t.Errorf("mpirun still running 20 s after its remote daemon was killed")
	}
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// buildShoalRsh compiles cmd/shoal-rsh into dir, where it looks for shoal.
func buildShoalRsh(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "shoal-rsh")
	out, err := exec.Command("cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, "../shoal-rsh/shoal-rsh.c").CombinedOutput()
	if err != nil {
		t.Fatalf("cc shoal-rsh.c: %v\n%s", err, out)
	}
	return bin
}

// rshSocketAgent is rshAgent reached as the coordinator sets shoal rsh up:
// through the agent's local socket, with no secret, for job j1, which the
// agent's job store holds and which is granted on it. The job is recorded as
// ended: the agent's coordinator would take over a running one, and fence it
// by revoking its grant. It returns the path of the fake orted the agent
// accepts.
func rshSocketAgent(t *testing.T) string {
	t.Helper()
	a, orted := rshAgent(t, "j1")
	if err := plugCoordinator(a, "openmpi", false); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHOAL_SECRET_FILE", "")
	t.Setenv("SHOAL_AGENT_SOCKET", a.SocketPath())
	deadline := time.Now().Add(10 * time.Second)
	for !a.Store().IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the agent does not lead its one-node cluster")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.Store().Submit(job.Job{ID: "j1", State: job.Succeeded, Ended: time.Now(), Spec: job.Spec{Ranks: 1, Argv: []string{"prog"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Launcher().Grant("j1", "node-b", 1, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	return orted
}

// hookRun runs a launcher hook with stdin; with signal, it sends the hook
// SIGTERM once the daemon printed "ready".
func hookRun(t *testing.T, hook []string, stdin string, signal bool, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(hook[0], append(slices.Clone(hook[1:]), args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e watch.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if signal {
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(o.String(), "ready") {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon did not start: stdout %q, stderr %q", o.String(), e.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGTERM)
	}
	cmd.Wait()
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// TestRshHooks: both launcher hooks, `shoal rsh` and shoal-rsh, keep the
// launch protocol the same way through the local agent's socket, as the
// coordinator sets them up: output, input and exit codes pass through, a
// signal reaches the daemon, and a launch that cannot be done is one line and
// exit status 255.
func TestRshHooks(t *testing.T) {
	orted := rshSocketAgent(t)
	bin := buildShoal(t)
	hooks := map[string][]string{"shoal rsh": {bin, "rsh"}, "shoal-rsh": {buildShoalRsh(t, filepath.Dir(bin))}}
	for name, hook := range hooks {
		t.Run(name, func(t *testing.T) {
			for _, tt := range []struct {
				args                  []string
				stdin, stdout, stderr string
				code                  int
			}{
				{[]string{"-n", "node-b", orted, "'echo hello; exit 7'"}, "", "hello\n", "", 7},
				{[]string{"-x", "127.0.0.1", orted, "'read l; echo got $l; echo warned >&2'"}, "line\n", "got line\n", "warned\n", 0},
				{[]string{"-n", "user@node-b", orted, "'kill -9 $$'"}, "", "", "", 137},
				{[]string{"-n", "node-b", orted, `'head -c 200000 /dev/zero | tr "\\0" a'`}, "", strings.Repeat("a", 200000), "", 0},
			} {
				stdout, stderr, code := hookRun(t, hook, tt.stdin, false, tt.args...)
				if stdout != tt.stdout || stderr != tt.stderr || code != tt.code {
					t.Errorf("%s %q: exit %d, stdout %.40q (%d bytes), stderr %q; want %d, %.40q, %q", name, tt.args, code, stdout, len(stdout), stderr, tt.code, tt.stdout, tt.stderr)
				}
			}
			stdout, _, code := hookRun(t, hook, "", true, "-n", "node-b", orted, `'trap "echo stopped; exit 42" TERM; echo ready; while :; do sleep 0.05; done'`)
			if code != 42 || !strings.Contains(stdout, "stopped") {
				t.Errorf("%s told to stop: exit %d, stdout %q; want the daemon's 42 after its trap", name, code, stdout)
			}
			for _, tt := range []struct {
				why   string
				args  []string
				wants string
			}{
				{"unknown node", []string{"-n", "node-z", orted}, `node "node-z" is not in $SHOAL_RSH_NODES`},
				{"not a daemon", []string{"-n", "node-b", "cat", "/etc/passwd"}, "only launches MPI daemons"},
				{"unknown option", []string{"-p", "22", "node-b", orted}, `unknown option "-p"`},
			} {
				_, stderr, code := hookRun(t, hook, "", false, tt.args...)
				if code != 255 || !strings.Contains(stderr, tt.wants) || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "shoal rsh: ") {
					t.Errorf("%s, %s: exit %d, stderr %q; want 255 and one line containing %q", name, tt.why, code, stderr, tt.wants)
				}
			}
		})
	}
}

// TestShoalRshAlone: shoal-rsh with no shoal beside it launches, relays and
// ends by itself, and shows where it would have handed over.
func TestShoalRshAlone(t *testing.T) {
	orted := rshSocketAgent(t)
	hook := []string{buildShoalRsh(t, t.TempDir())}
	if stdout, stderr, code := hookRun(t, hook, "in\n", false, "node-b", orted, "'cat; exit 3'"); stdout != "in\n" || code != 3 {
		t.Errorf("shoal-rsh alone: exit %d, stdout %q, stderr %q; want 3 and its input back", code, stdout, stderr)
	}
	if _, stderr, code := hookRun(t, hook, "", false, "-n", "node-b", "cat", "/etc/passwd"); code != 255 || !strings.Contains(stderr, "cannot run") {
		t.Errorf("shoal-rsh alone, a launch refused: exit %d, stderr %q; want 255 and that it cannot hand over to shoal", code, stderr)
	}
}
