// Package cluster runs Shoal agents on several testbed hosts and checks membership the way
// a user sees it: the real `shoal` CLI run inside the hosts, real processes killed, real
// links cut. The tests share one testbed (instance 210), brought up by the first test
// that needs it and taken down by the last; they run one after the other.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
)

// instance is this package's testbed instance: others use 0 (the CLI), 201
// (internal/testbed), 202 (cmd/shoal) and 9.
const instance = 210

// hosts are the testbed's hosts with agents, and the cores each says it has.
var (
	hosts = []string{"n1", "n2", "n3"}
	cores = []int{2, 2, 3}
)

var (
	buildDir string        // where a bare `go test` builds shoal
	shoalBin string        // the shoal binary every host runs, once found or built
	buildErr string        // why it could not be built: later tests fail at once
	bed      *testbed.Bed  // the shared testbed, nil when down
	upErr    error         // why it could not come up: later tests fail at once
	upTook   time.Duration // how long testbed.Up took
)

func TestMain(m *testing.M) {
	// The CLI would talk to whatever agent these name instead of the host's own.
	os.Unsetenv("SHOAL_AGENT")
	os.Unsetenv("SHOAL_TESTBED_INSTANCE")
	code := m.Run()
	// Whatever the tests did, leave nothing (TestTeardown checks Down itself).
	if testbed.IsRoot() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := testbed.Clean(ctx, instance); err != nil {
			fmt.Fprintf(os.Stderr, "cluster: clean testbed %d: %v\n", instance, err)
			code = 1
		}
		cancel()
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// needTestbed skips the test when this machine cannot build testbed hosts.
func needTestbed(t *testing.T) {
	t.Helper()
	if !testbed.IsRoot() {
		t.Skip("needs root: the testbed makes network namespaces, a bridge and cgroups")
	}
	for _, tool := range []string{"ip", "tc", "nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (iproute2, util-linux): %v", tool, err)
		}
	}
}

// shoal returns the shoal binary: bin/shoal under make test (SHOAL_REQUIRE_BUILD, which
// must have built it), else one built from this tree into a temporary directory.
func shoal(t *testing.T) string {
	t.Helper()
	if shoalBin != "" {
		return shoalBin
	}
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
		p := filepath.Join(testenv.Root, "bin", "shoal")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("bin/shoal missing: make build did not produce it")
		}
		shoalBin = p
		return p
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("bin/shoal is only built here with the go command, which is not on PATH")
	}
	if buildDir == "" {
		if buildDir, err = os.MkdirTemp("", "shoal-cluster-test-"); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(buildDir, "shoal")
	build := exec.Command(gobin, "build", "-o", p, "./cmd/shoal")
	build.Dir = testenv.Root
	if out, err := build.CombinedOutput(); err != nil {
		buildErr = fmt.Sprintf("go build ./cmd/shoal: %v\n%s", err, out)
		t.Fatal(buildErr)
	}
	shoalBin = p
	return p
}

// cluster returns the shared testbed with n1, n2 and n3 all running agents that see each
// other alive, bringing it up first if need be and repairing what an earlier test left
// (a cut link, a stopped agent).
func cluster(t *testing.T) *testbed.Bed {
	t.Helper()
	needTestbed(t)
	bin := shoal(t)
	if upErr != nil {
		t.Fatalf("the testbed could not come up: %v", upErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() { logAgents(t) })
	if bed == nil {
		start := time.Now()
		bed, upErr = testbed.Up(ctx, testbed.Config{
			Nodes: len(hosts), Cores: cores, Instance: instance, AgentBinary: bin,
			// Not t.Logf: later tests use the testbed after this one has ended.
			Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testbed: "+format+"\n", args...) },
		})
		upTook = time.Since(start)
		if upErr != nil {
			bed = nil
			t.Fatalf("testbed.Up: %v", upErr)
		}
		t.Logf("testbed %d up with agents in %v", instance, upTook.Round(time.Millisecond))
		return bed
	}
	st, _, err := bed.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range st {
		if h.State == "cut" {
			if err := bed.Heal(ctx, h.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, h := range st {
		if isAgentHost(h.Name) && !h.AgentAlive {
			if err := bed.StartAgent(ctx, h.Name); err != nil {
				t.Fatalf("restart the agent of %s: %v", h.Name, err)
			}
		}
	}
	if converged(bed, 10*time.Second) {
		return bed
	}
	// A partition the agents did not repair after the heal (see TestCutHeal): restart
	// the agents some host sees dead; a restarted agent rejoins.
	for _, h := range hosts {
		if !seenDead(bed, h) {
			continue
		}
		t.Logf("restarting the agent of %s: another host still sees it dead", h)
		if _, err := bed.Kill(ctx, h); err != nil {
			t.Fatal(err)
		}
		if err := bed.StartAgent(ctx, h); err != nil {
			t.Fatalf("restart the agent of %s: %v", h, err)
		}
	}
	waitViews(t, bed, 30*time.Second, hosts, allAlive())
	return bed
}

// logAgents logs the end of every agent's log when the test failed.
func logAgents(t *testing.T) {
	if !t.Failed() || bed == nil {
		return
	}
	hs, err := bed.Hosts()
	if err != nil {
		return
	}
	for _, h := range hs {
		b, _ := os.ReadFile(h.AgentLog)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		t.Logf("end of %s:\n%s", h.AgentLog, strings.Join(lines, "\n"))
	}
}

// converged reports whether every host shows n1, n2 and n3 alive within timeout.
func converged(b *testbed.Bed, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		ok := true
		for _, h := range hosts {
			ns, err := nodes(b, h)
			ok = ok && err == nil && view(ns) == allAlive()
		}
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// seenDead reports whether some other host shows host dead or suspect.
func seenDead(b *testbed.Bed, host string) bool {
	for _, o := range others(host) {
		ns, _ := nodes(b, o)
		for _, n := range ns {
			if n.Name == host && n.State != "alive" {
				return true
			}
		}
	}
	return false
}

func isAgentHost(name string) bool {
	for _, h := range hosts {
		if h == name {
			return true
		}
	}
	return false
}

// node is a node as `shoal nodes --json` shows it (docs/api.md, GET /v1/nodes).
type node struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	API   string `json:"api"`
	Cores int    `json:"cores"`
	Speed uint64 `json:"speed"`
	Arch  string `json:"arch"`
	State string `json:"state"`
	Local bool   `json:"local"`
	Ranks int    `json:"ranks"`
	Role  string `json:"role"`
}

// result is how a command run in a host ended.
type result struct {
	stdout, stderr string
	code           int // exit code; -1 if a signal ended it
}

// run runs argv in host and returns its output and exit code; it fails the test only when
// the command cannot be started or outlives timeout.
func run(t *testing.T, b *testbed.Bed, host string, timeout time.Duration, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, err := b.Command(ctx, host, argv...)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s in %s: still running after %v; stderr:\n%s", strings.Join(argv, " "), host, timeout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s in %s: %v", strings.Join(argv, " "), host, err)
	}
	return r
}

// nodes runs `shoal nodes --json` in host, with no flags: the CLI finds host's agent
// through SHOAL_DATA_DIR, which the testbed sets.
func nodes(b *testbed.Bed, host string) ([]node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.Exec(ctx, host, shoalBin, "nodes", "--json")
	if err != nil {
		return nil, err
	}
	var l struct {
		Nodes []node `json:"nodes"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("shoal nodes --json in %s: %v: %q", host, err, out)
	}
	return l.Nodes, nil
}

// view is what one host's agent says of every node: "n1=alive n2=alive n3=dead".
func view(ns []node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name+"="+n.State)
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// states builds a view from name=state pairs: states("n1", "alive", "n2", "left").
func states(pairs ...string) string {
	var s []string
	for i := 0; i+1 < len(pairs); i += 2 {
		s = append(s, pairs[i]+"="+pairs[i+1])
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func allAlive() string {
	var pairs []string
	for _, h := range hosts {
		pairs = append(pairs, h, "alive")
	}
	return states(pairs...)
}

// waitViews polls `shoal nodes --json` in every observer until each shows exactly want,
// and returns how long that took; after timeout it fails with what each observer last
// showed.
func waitViews(t *testing.T, b *testbed.Bed, timeout time.Duration, observers []string, want string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var wrong []string
		for _, o := range observers {
			ns, err := nodes(b, o)
			if err != nil {
				wrong = append(wrong, err.Error())
			} else if got := view(ns); got != want {
				wrong = append(wrong, fmt.Sprintf("%s shows %q", o, got))
			}
		}
		if len(wrong) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("after %v, want every one of %v to show %q, but: %s", timeout, observers, want, strings.Join(wrong, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// holdViews checks that every observer keeps showing want for d.
func holdViews(t *testing.T, b *testbed.Bed, d time.Duration, observers []string, want string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, o := range observers {
			ns, err := nodes(b, o)
			if err != nil {
				t.Fatal(err)
			}
			if got := view(ns); got != want {
				t.Fatalf("%s shows %q, want %q to hold for %v", o, got, want, d)
			}
		}
	}
}

// others returns hosts without the given ones.
func others(without ...string) []string {
	var out []string
	for _, h := range hosts {
		skip := false
		for _, w := range without {
			skip = skip || h == w
		}
		if !skip {
			out = append(out, h)
		}
	}
	return out
}

// errorLine checks that a command failed with exit code 1 and one error line: stderr's
// last line must start with want, and any line before it must be one of the agent's own
// log lines (time=…). It returns that line.
func errorLine(t *testing.T, what string, r result, want string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if r.code != 1 || !strings.HasPrefix(last, want) {
		t.Errorf("%s: exit %d, last line of stderr %q; want exit 1 and a line starting %q\nstderr:\n%s", what, r.code, last, want, r.stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "time=") {
			t.Errorf("%s: the error is not one line:\n%s", what, r.stderr)
			break
		}
	}
	return last
}

// leftovers lists what testbed instance left on the machine: network namespaces and
// links named after it, processes started in its hosts (their environment names the
// instance) or working in its directory. Names of other instances are not looked at:
// other packages' tests and demos may run their own testbeds at the same time.
func leftovers(t *testing.T) []string {
	t.Helper()
	var out []string
	prefix := "shoal" + strconv.Itoa(instance) + "-"
	netns, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, l := range strings.Split(string(netns), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			out = append(out, "netns "+f[0])
		}
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip link: %v", err)
	}
	for _, l := range strings.Split(string(links), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if name == "shoalbr"+strconv.Itoa(instance) || strings.HasPrefix(name, prefix) {
			out = append(out, "link "+name)
		}
	}
	dir := fmt.Sprintf("/tmp/shoal-testbed-%d", instance)
	envMark := []byte("SHOAL_TESTBED_INSTANCE=" + strconv.Itoa(instance) + "\x00")
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.Contains(env, envMark) || bytes.Contains(cmdline, []byte(dir+"/")) {
			out = append(out, fmt.Sprintf("process %d: %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})))
		}
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "dir "+dir)
	}
	return out
}
