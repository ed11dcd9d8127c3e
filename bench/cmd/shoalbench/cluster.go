package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"shoal/internal/api"
	"shoal/internal/job"
	"shoal/internal/jobstore"
	nodepkg "shoal/internal/node"
	"shoal/internal/testbed"
)

// cluster is a testbed whose hosts run Shoal agents, and the shoal command run
// inside its hosts. Every call is bounded: a command that does not end in time
// is killed and reported as an error.
type cluster struct {
	bed   *testbed.Bed
	shoal string // absolute path of bin/shoal
}

// errTimeout is a command inside a host that did not end in time.
var errTimeout = errors.New("timed out")

// up brings up a testbed of n hosts of cores cores each and waits until every
// host sees every other alive and one node leads the job store.
func up(ctx context.Context, inst, n, cores int, shoal string) (*cluster, error) {
	// Two minutes at a few hosts; a 128-host bring-up on 2 cores takes about that.
	ctx, cancel := context.WithTimeout(ctx, max(2*time.Minute, time.Duration(n)*2*time.Second))
	defer cancel()
	bed, err := testbed.Up(ctx, testbed.Config{Nodes: n, Cores: []int{cores}, Instance: inst, AgentBinary: shoal,
		Logf: func(format string, args ...any) { logf("testbed: "+format, args...) }})
	if err != nil {
		return nil, err
	}
	c := &cluster{bed: bed, shoal: shoal}
	hosts, _ := c.hosts()
	if problem := c.waitSettled(ctx, hosts, time.Minute); problem != "" {
		return c, fmt.Errorf("the new testbed did not settle: %s", problem)
	}
	return c, nil
}

// down removes the testbed, bounded by a minute.
func down(inst int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return testbed.Clean(ctx, inst)
}

// run runs the shoal command inside host and returns its stdout and exit code;
// err is set when it could not run or took longer than timeout.
func (c *cluster) run(host string, timeout time.Duration, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, err := c.bed.Command(ctx, host, append([]string{c.shoal}, args...)...)
	if err != nil {
		return "", -1, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return stdout.String(), -1, fmt.Errorf("shoal %s in %s: %w after %v", args[0], host, errTimeout, timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out := stdout.String()
		if s := strings.TrimSpace(stderr.String()); s != "" {
			out += s + "\n"
		}
		return out, ee.ExitCode(), nil
	}
	if err != nil {
		return "", -1, fmt.Errorf("shoal %s in %s: %w", args[0], host, err)
	}
	return stdout.String(), 0, nil
}

// nodes is `shoal nodes --json` in host.
func (c *cluster) nodes(host string) ([]nodepkg.Node, error) {
	out, code, err := c.run(host, 5*time.Second, "nodes", "--json")
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("shoal nodes in %s exited %d: %s", host, code, firstLine(out))
	}
	var list nodepkg.List
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("shoal nodes --json in %s: %v", host, err)
	}
	return list.Nodes, nil
}

// leaderOf is the node that leads the job store as nodes say, "" for none.
func leaderOf(nodes []nodepkg.Node) string {
	for _, n := range nodes {
		if n.Role == nodepkg.RoleLeader {
			return n.Name
		}
	}
	return ""
}

// events is `shoal events --json JOB` in host.
func (c *cluster) events(host, id string) ([]job.Event, error) {
	out, code, err := c.run(host, 10*time.Second, "events", "--json", id)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("shoal events %s in %s exited %d: %s", id, host, code, firstLine(out))
	}
	var evs []job.Event
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e job.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			evs = append(evs, e)
		}
	}
	return evs, nil
}

// jobs is `shoal jobs --json` in host.
func (c *cluster) jobs(host string) ([]job.Job, error) {
	out, code, err := c.run(host, 10*time.Second, "jobs", "--json")
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("shoal jobs in %s exited %d: %s", host, code, firstLine(out))
	}
	var list api.JobList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("shoal jobs --json in %s: %v", host, err)
	}
	return list.Jobs, nil
}

// submit runs `shoal run --detach` with args in host and returns the job id.
func (c *cluster) submit(host string, args ...string) (string, error) {
	out, code, err := c.run(host, 60*time.Second, append([]string{"run", "--detach"}, args...)...)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) == 0 || lines[len(lines)-1] == "" {
		return "", fmt.Errorf("shoal run --detach in %s exited %d: %s", host, code, lastLine(out))
	}
	return lines[len(lines)-1], nil
}

// hosts is the testbed's hosts now, by name.
func (c *cluster) hosts() (map[string]testbed.HostStatus, error) {
	st, _, err := c.bed.Status()
	if err != nil {
		return nil, err
	}
	m := map[string]testbed.HostStatus{}
	for _, h := range st {
		m[h.Name] = h
	}
	return m, nil
}

// settled says what keeps the cluster from being whole, "" when it is: every
// host of want whose link is up and whose agent runs sees all of them alive,
// all agree on one leader, and the job store has as many voters as the
// autopilot aims at ([jobstore.VoterTarget]).
func (c *cluster) settled(want map[string]testbed.HostStatus) string {
	var names []string
	for name, h := range want {
		if h.State == "up" && h.AgentAlive {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	leader := ""
	for _, h := range names {
		nodes, err := c.nodes(h)
		if err != nil {
			return err.Error()
		}
		seen := map[string]nodepkg.Node{}
		voters := 0
		for _, n := range nodes {
			seen[n.Name] = n
			if n.Role == nodepkg.RoleLeader || n.Role == nodepkg.RoleVoter {
				voters++
			}
		}
		for _, o := range names {
			if s := seen[o].State; s != "alive" || seen[o].Leaving {
				if s == "" {
					s = "nothing"
				}
				return fmt.Sprintf("%s sees %s %s", h, o, s)
			}
		}
		l := leaderOf(nodes)
		switch {
		case l == "":
			return fmt.Sprintf("%s knows no leader", h)
		case leader != "" && l != leader:
			return fmt.Sprintf("%s follows %s, another node %s", h, l, leader)
		case voters != jobstore.VoterTarget(len(names)):
			return fmt.Sprintf("%s counts %d voters, want %d", h, voters, jobstore.VoterTarget(len(names)))
		}
		leader = l
	}
	return ""
}

// waitSettled waits up to timeout for [cluster.settled]; it returns what is
// still wrong then, or "".
func (c *cluster) waitSettled(ctx context.Context, want map[string]testbed.HostStatus, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		problem := c.settled(want)
		if problem == "" {
			return ""
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return problem
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// logLine is one line of an agent's log.
type logLine struct {
	Time time.Time
	Msg  string
	Text string
}

var logTime = regexp.MustCompile(`^time=(\S+) level=\S+ msg="((?:[^"\\]|\\.)*)"`)

// agentLog reads host's agent log (DIR/nK/agent.log): the lines with a time.
func (c *cluster) agentLog(host string) []logLine {
	f, err := os.Open(filepath.Join(c.bed.Dir(), host, "agent.log"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := logTime.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		out = append(out, logLine{Time: t, Msg: m[2], Text: sc.Text()})
	}
	return out
}

// field is the value after the last "key: " in a job's output, as the
// examples print their results ("checksum: …", "solutions: …").
func field(out, key string) string {
	v := ""
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, key+": "); i >= 0 {
			v = strings.TrimSpace(l[i+len(key)+2:])
		}
	}
	return v
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// logf prints a progress line on stderr, with the time.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// reference runs PROGRAM-plain (the example built without Shoal) with plain
// mpirun on this machine and returns the value of key in its output: the
// result of an uninterrupted run.
func reference(root string, nranks int, key, program string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "shoal-reference-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	argv := append([]string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", fmt.Sprint(nranks),
		"-x", "SHOAL_DIR", filepath.Join(root, "build/examples", program+"-plain")}, args...)
	cmd := exec.CommandContext(ctx, "mpirun", argv...)
	cmd.Env = append(os.Environ(), "SHOAL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("reference run of %s: %v\n%s", program, err, out)
	}
	v := field(string(out), key)
	if v == "" {
		return "", fmt.Errorf("the reference run of %s printed no %q:\n%s", program, key, out)
	}
	return v, nil
}
