package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/agent"
	"shoal/internal/node"
	"shoal/test/watch"
)

// cliAgent is `shoal agent` running in a goroutine of the test.
type cliAgent struct {
	dir    string
	stderr *watch.Buffer
	done   chan struct{} // closed when the command has returned
	code   int           // its exit code, once done is closed
}

// startCLIAgent runs `shoal agent --profile local --bind 127.0.0.1:0 ARGS` with
// its own data dir and waits until it publishes its API address.
func startCLIAgent(t *testing.T, name string, args ...string) *cliAgent {
	t.Helper()
	a := &cliAgent{dir: t.TempDir(), stderr: &watch.Buffer{}, done: make(chan struct{})}
	argv := append([]string{"agent", "--profile", "local", "--bind", "127.0.0.1:0",
		"--data-dir", a.dir, "--name", name}, args...)
	go func() {
		defer close(a.done)
		a.code = run(argv, &bytes.Buffer{}, a.stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(a.dir, agent.AddrFile)); err == nil {
			break
		}
		select {
		case <-a.done:
			t.Fatalf("shoal agent %s exited %d:\n%s", name, a.code, a.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("shoal agent %s did not publish its address:\n%s", name, a.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		select {
		case <-a.done:
		default:
			var stderr bytes.Buffer
			run([]string{"leave", "--data-dir", a.dir}, &bytes.Buffer{}, &stderr)
			select {
			case <-a.done:
			case <-time.After(10 * time.Second):
				t.Errorf("shoal agent %s still running 10 s after shoal leave (%s)", name, &stderr)
			}
		}
	})
	return a
}

func (a *cliAgent) gossipAddr(t *testing.T) string {
	t.Helper()
	out := runCLI(t, exitOK, "nodes", "--json", "--data-dir", a.dir)
	var l node.List
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("nodes --json: %v\n%s", err, out)
	}
	for _, n := range l.Nodes {
		if n.Local {
			return n.Addr
		}
	}
	t.Fatalf("nodes --json lists no local node:\n%s", out)
	return ""
}

// runCLI runs shoal with args, checks the exit code and returns stdout.
func runCLI(t *testing.T, want int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != want {
		t.Fatalf("shoal %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, &stdout, &stderr)
	}
	return stdout.String()
}

// runCLIError runs shoal with args, expects exit 1 and one line on stderr
// containing want, and returns that line.
func runCLIError(t *testing.T, want string, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	if code != exitFailure || !strings.Contains(last, want) {
		t.Errorf("shoal %s: exit %d, last stderr line %q; want exit 1 and a line containing %q",
			strings.Join(args, " "), code, last, want)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "time=") { // the agent's own log lines may precede it
			t.Errorf("shoal %s: error is not one line: %q", strings.Join(args, " "), stderr.String())
		}
	}
}

func TestAgentHelpIsTrue(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"agent": {"-init", "-join", "-secret-file", "-bind", "-api", "-data-dir", "-name", "-labels", "-profile", "-cores", "0.0.0.0:7946", "SHOAL_DATA_DIR", "-file-quota", "-conns-per-user"},
		"nodes": {"-json", "-data-dir", "-agent", "-secret-file", "alive", "suspect", "dead", "left", "RANKS"},
		"leave": {"-timeout", "-data-dir", "left"},
	} {
		out := runCLI(t, exitOK, cmd, "--help")
		for _, f := range flags {
			if !strings.Contains(out, f) {
				t.Errorf("shoal %s --help does not mention %q", cmd, f)
			}
		}
	}
	for _, args := range [][]string{
		{"agent", "--profile", "lte"},
		{"agent", "--engine", "lam"},
		{"agent", "--labels", "a b=c"},
		{"agent", "--labels", "novalue"},
		{"agent", "extra"},
		{"agent", "--file-quota", "10GB"},
		{"agent", "--file-quota", "-1"},
		{"agent", "--conns-per-user", "-1"},
		{"agent", "--store-lease", "10ms"},
		{"agent", "--store-lease", "2h"},
		{"nodes", "--bogus"},
		{"leave", "--timeout", "-1s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("shoal %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(args, " "), code, &stderr)
		}
	}
}

func TestAgentCommands(t *testing.T) {
	a := startCLIAgent(t, "cli1", "--init", "--labels", "room=lab")
	secret := filepath.Join(a.dir, agent.SecretFile)
	b := startCLIAgent(t, "cli2", "--join", a.gossipAddr(t), "--secret-file", secret)

	// `shoal nodes` finds the local agent through SHOAL_DATA_DIR alone.
	t.Setenv("SHOAL_DATA_DIR", b.dir)
	deadline := time.Now().Add(5 * time.Second)
	var out string
	for {
		out = runCLI(t, exitOK, "nodes")
		if strings.Count(out, " alive ") == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.HasPrefix(out, "NAME ") || !strings.Contains(out, "cli1 ") || strings.Count(out, " alive ") != 2 {
		t.Fatalf("shoal nodes on cli2 =\n%s\nwant cli1 and cli2 alive", out)
	}
	var l node.List
	if err := json.Unmarshal([]byte(runCLI(t, exitOK, "nodes", "--json")), &l); err != nil || len(l.Nodes) != 2 || l.Nodes[0].Labels["room"] != "lab" {
		t.Errorf("shoal nodes --json = %+v, %v; want two nodes, cli1 labelled room=lab", l, err)
	}

	// Refusals: a second agent on the same data dir, a wrong secret, an
	// unreachable join address, a wrong secret on the API.
	runCLIError(t, fmt.Sprintf("shoal agent: data dir %s is in use by pid %d", a.dir, os.Getpid()),
		"agent", "--data-dir", a.dir, "--bind", "127.0.0.1:0", "--profile", "local")
	intruder := t.TempDir()
	runCLIError(t, "shoal agent: join refused by "+a.gossipAddr(t)+": wrong cluster secret?",
		"agent", "--init", "--data-dir", intruder, "--name", "x", "--bind", "127.0.0.1:0", "--profile", "local", "--join", a.gossipAddr(t))
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l2.Addr().String()
	l2.Close()
	runCLIError(t, "shoal agent: cannot reach "+closed+" to join",
		"agent", "--data-dir", t.TempDir(), "--secret-file", secret, "--bind", "127.0.0.1:0", "--profile", "local", "--join", closed)
	runCLIError(t, "and this client have certificates of different clusters (wrong cluster secret?)",
		"nodes", "--secret-file", filepath.Join(intruder, agent.SecretFile))
	runCLIError(t, "shoal nodes: no local agent: none is running with data dir",
		"nodes", "--data-dir", t.TempDir())

	// `shoal run` submits to the local agent; one that refuses it is an error, not a
	// reason to run the job elsewhere. An agent.addr nobody answers at is a leftover
	// of an agent that is gone: the job runs on this machine, and says so.
	refused := t.TempDir()
	copyFile(t, filepath.Join(a.dir, agent.AddrFile), filepath.Join(refused, agent.AddrFile))
	copyFile(t, filepath.Join(intruder, agent.SecretFile), filepath.Join(refused, agent.SecretFile))
	t.Setenv("SHOAL_DATA_DIR", refused)
	runCLIError(t, "shoal run: agent at "+readLine(t, filepath.Join(a.dir, agent.AddrFile))+": TLS: the agent at "+readLine(t, filepath.Join(a.dir, agent.AddrFile))+" and this client have certificates of different clusters (wrong cluster secret?)",
		"run", "-n", "1", "--", "/bin/true")
	if _, err := exec.LookPath("mpirun"); err == nil {
		stale := t.TempDir()
		os.WriteFile(filepath.Join(stale, agent.AddrFile), []byte(closed+"\n"), 0o644)
		copyFile(t, secret, filepath.Join(stale, agent.SecretFile))
		t.Setenv("SHOAL_DATA_DIR", stale)
		// (Only the note matters here; test/e2e checks local jobs themselves.)
		var stdout, stderr bytes.Buffer
		run([]string{"run", "-n", "1", "--", "/bin/true"}, &stdout, &stderr)
		want := "shoal: the local agent at " + closed + " does not answer; running on this machine only\n"
		if !strings.HasPrefix(stderr.String(), want) {
			t.Errorf("shoal run with a stale agent.addr: stderr %q; want it to start with %q", &stderr, want)
		}
	}
	t.Setenv("SHOAL_DATA_DIR", b.dir)

	// `shoal leave` on cli2: it stops, and cli1 shows it left.
	if got := runCLI(t, exitOK, "leave"); got != "node cli2 left the cluster\n" {
		t.Errorf("shoal leave printed %q", got)
	}
	select {
	case <-b.done:
		if b.code != exitOK {
			t.Errorf("shoal agent exited %d after leave, want 0", b.code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shoal agent still running 10 s after shoal leave")
	}
	t.Setenv("SHOAL_DATA_DIR", a.dir)
	deadline = time.Now().Add(5 * time.Second)
	for out = runCLI(t, exitOK, "nodes"); !strings.Contains(out, " left "); out = runCLI(t, exitOK, "nodes") {
		if time.Now().After(deadline) {
			t.Fatalf("shoal nodes on cli1 =\n%s\nwant cli2 left", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
