package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/membership"
)

// agentArgv is the one place that says how a testbed host runs its Shoal agent. The first
// host's agent creates the cluster (--init writes the secret file); every later one joins
// the agent at join with that secret. --cores is passed when the agent takes it, and so is
// --speed: the hosts share this machine, so a start-up measurement would read the load
// of the moment; a host's speed is its CPU share per core instead (equal for all hosts
// without quotas), in units of testbedSpeed per CPU.
func agentArgv(st *state, h *Host, join string) []string {
	argv := []string{st.agentBinary(h), "agent",
		"--bind", net.JoinHostPort(h.IP, strconv.Itoa(AgentPort)),
		"--data-dir", h.DataDir,
		"--name", h.Name,
	}
	if join == "" {
		argv = append(argv, "--init")
	} else {
		argv = append(argv, "--join", join)
	}
	argv = append(argv, "--secret-file", st.Secret)
	if strings.Contains(st.AgentHelp, "-cores") {
		argv = append(argv, "--cores", strconv.Itoa(h.Cores))
	}
	cpus := h.CPUQuota > 0 && strings.Contains(st.AgentHelp, "-cpus")
	if cpus {
		argv = append(argv, "--cpus", strconv.FormatFloat(h.CPUQuota, 'f', -1, 64))
	}
	if strings.Contains(st.AgentHelp, "-speed") {
		argv = append(argv, "--speed", strconv.FormatUint(hostSpeed(h, cpus), 10))
	}
	return append(argv, st.AgentArgs...)
}

// testbedSpeed is the speed a testbed host announces for one whole CPU per core.
const testbedSpeed = 100_000_000

// hostSpeed is the speed a host announces for each of its cores: a whole CPU's when
// its agent announces the quota itself (cpus: --cpus), else the CPU the quota gives
// each core when all are busy (an agent without --cpus).
func hostSpeed(h *Host, cpus bool) uint64 {
	if cpus || h.CPUQuota <= 0 || h.Cores < 1 {
		return testbedSpeed
	}
	return uint64(testbedSpeed * h.CPUQuota / float64(h.Cores))
}

// probeAgent runs `bin agent --help`: whether the agent command exists in bin, and its
// help text. A binary whose CLI does not know `agent` says "unknown command".
func probeAgent(ctx context.Context, bin string) (help string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "agent", "--help")
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	text := out.String()
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("%s agent --help: no answer in 10 s", bin)
	case strings.Contains(text, "unknown command"):
		return "", fmt.Errorf("%s has no agent command", bin)
	case runErr != nil && !isExit(runErr):
		return "", fmt.Errorf("%s agent --help: %w", bin, runErr)
	case runErr != nil && !strings.Contains(text, "-bind"):
		return "", fmt.Errorf("%s agent --help: %v: %s", bin, runErr, firstLine(text))
	}
	return text, nil
}

func isExit(err error) bool {
	_, ok := err.(*exec.ExitError)
	return ok
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// agentAddrFile is the file in its data dir where an agent publishes its API address once
// it is up and has joined the cluster (agent.AddrFile of shoal/internal/agent).
const agentAddrFile = "agent.addr"

// agentTimeout bounds the wait for one agent to publish its address.
const agentTimeout = 15 * time.Second

// clusterTimeout bounds how long the wait for the agents to see each other alive may go
// without getting closer ([Bed.waitCluster]). Gossip usually
// gets every join everywhere within a second or two, but with tens of agents joining at
// once on two cores a node can miss one (seen at 32 hosts: n27 knew nothing of n13 after
// 15 s); memberlist's full state exchange with a random member, every PushPullInterval
// of the LAN preset the agents use (30 s, which memberlist stretches past 32 nodes:
// 90 s at 128), repairs that. So the bound is that interval past agentTimeout. (At 128
// hosts a node that held another dead was still so after 45 s: the repair takes the
// stretched interval.)
func clusterTimeout(hosts int) time.Duration {
	return agentTimeout + pushPullInterval(membership.DefaultLANConfig().PushPullInterval, hosts)
}

// pushPullInterval is memberlist's full state exchange interval in a cluster of n
// nodes: base up to 32 nodes, then one more base for each doubling (memberlist's
// pushPullScale).
func pushPullInterval(base time.Duration, n int) time.Duration {
	const threshold = 32
	if n <= threshold {
		return base
	}
	mult := int(math.Ceil(math.Log2(float64(n))-math.Log2(threshold))) + 1
	return time.Duration(mult) * base
}

// startAgent starts host h's agent in the background, in its own session, with its output
// appended to h.AgentLog, and records its pid in h. The agent's previous run (killed, so it
// could not clean up) may have left its address file: it goes first, so that [Bed.waitAgent]
// waits for the new one.
func (b *Bed) startAgent(ctx context.Context, st *state, h *Host, join string) error {
	if err := os.Remove(filepath.Join(h.DataDir, agentAddrFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("testbed: start agent of %s: %w", h.Name, err)
	}
	logf, err := os.OpenFile(h.AgentLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	argv := append(prefix(st, h), agentArgv(st, h, join)...)
	fmt.Fprintf(logf, "# %s shoal testbed: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = h.DataDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testbed: start agent of %s: %w", h.Name, err)
	}
	h.AgentPID = cmd.Process.Pid
	// Reap it if it dies while this process lives (a test); otherwise init does.
	go cmd.Wait()
	return nil
}

// waitAgent waits until h's agent has written its address file, which it does once it is
// up and has joined the cluster (the first agent: once it has written the secret and
// listens). It fails with [ErrAgentNotReady] when the agent exits or takes longer than
// agentTimeout.
func (b *Bed) waitAgent(ctx context.Context, h *Host) error {
	addrFile := filepath.Join(h.DataDir, agentAddrFile)
	deadline := time.Now().Add(agentTimeout)
	for {
		if _, err := os.Stat(addrFile); err == nil {
			return nil
		}
		// Not alive(): until nsenter has run, the agent's pid is in the machine's namespace.
		if !running(h.AgentPID) {
			return fmt.Errorf("%w: the agent of %s exited; last lines of %s:\n%s", ErrAgentNotReady, h.Name, h.AgentLog, tail(h.AgentLog, 5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the agent of %s has not written %s after %v; last lines of %s:\n%s",
				ErrAgentNotReady, h.Name, addrFile, agentTimeout, h.AgentLog, tail(h.AgentLog, 5))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitCluster waits until the agents see each other alive: for every pair of hosts whose
// agents run and whose links are up, with at least one of the pair in focus (nil: every
// host), `shoal nodes --json` run in the first has listed the second as alive. Each pass
// asks, up to clusterAskers at once, the hosts whose view was not complete yet
// ([convergence]). It fails with [ErrAgentNotReady] naming what is still wrong when no
// pass has got closer for clusterTimeout: at 128 hosts on two cores a pass over every
// host takes tens of seconds, so a bound on the whole wait would grow with the hosts.
func (b *Bed) waitCluster(ctx context.Context, st *state, focus []string) error {
	c := newConvergence(focus)
	start := time.Now()
	lastCloser, lastLog := start, start
	for {
		hosts := map[string]*Host{}
		var up []string
		for i := range st.Hosts {
			h := &st.Hosts[i]
			if id, err := nsID(h.netnsPath()); err == nil && !h.Cut && alive(h.AgentPID, id) {
				up = append(up, h.Name)
				hosts[h.Name] = h
			}
		}
		ask := c.toAsk(up)
		views := make(map[string]view, len(ask))
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, clusterAskers)
		for _, name := range ask {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				seen, err := agentView(ctx, st, hosts[name])
				<-sem
				mu.Lock()
				views[name] = view{seen, err}
				mu.Unlock()
			}()
		}
		wg.Wait()
		problem, missing, closer := c.record(up, views)
		if problem == "" {
			return nil
		}
		if closer {
			lastCloser = time.Now()
		}
		if time.Since(lastLog) >= 10*time.Second {
			b.logf("after %v, %d pairs of agents still to see each other alive (%s)", time.Since(start).Round(time.Second), missing, problem)
			lastLog = time.Now()
		}
		if time.Since(lastCloser) > clusterTimeout(len(up)) {
			return fmt.Errorf("%w: for %v the agents got no closer to seeing each other alive (%d pairs to go): %s",
				ErrAgentNotReady, clusterTimeout(len(up)), missing, problem)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterAskers is how many hosts [Bed.waitCluster] asks at once. Each answer starts a
// shoal process in the host's namespaces and cgroup, which takes a fraction of a second
// of the machine's CPU; a few at once overlap the agents' latency without crowding out
// the gossip being waited for.
const clusterAskers = 4

// agentView runs `shoal nodes --json` in h (which finds h's agent through SHOAL_DATA_DIR)
// and returns the state of every node it lists, by name.
func agentView(ctx context.Context, st *state, h *Host) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	argv := append(prefix(st, h), st.agentBinary(h), "nodes", "--json")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("shoal nodes in %s: %v: %s", h.Name, err, firstLine(stderr.String()))
	}
	var list struct {
		Nodes []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		return nil, fmt.Errorf("shoal nodes --json in %s: %v", h.Name, err)
	}
	seen := map[string]string{}
	for _, n := range list.Nodes {
		seen[n.Name] = n.State
	}
	return seen, nil
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

func (h *Host) netnsPath() string { return "/run/netns/" + h.Netns }
