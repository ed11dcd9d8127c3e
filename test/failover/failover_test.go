// Package failover takes the node that coordinates a job away while the job runs
// (its host killed, its link cut, its agent killed, or the node leaving with
// `shoal leave`) and checks that another node coordinates, that every node answers
// for the job, and that it finishes with the result of an uninterrupted run; and
// it takes two of the three voters away at once, for what a cluster without a
// quorum says and its recovery (quorum_test.go). The tests share one testbed of
// four 2-core hosts (instance 250), repaired between tests.
package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 250

var hosts = []string{"n1", "n2", "n3", "n4"}

var (
	bed   *testbed.Bed
	upErr error
	// want is heat's checksum from an uninterrupted run of heatArgs, once known.
	want string
)

// heatArgs make a run of about 8 s on the testbed: long enough to lose a node
// after its first epochs and still have work left.
var heatArgs = []string{"--size", "600", "--steps", "4000", "--pace", "2000"}

func TestMain(m *testing.M) {
	os.Unsetenv("SHOAL_AGENT")
	os.Unsetenv("SHOAL_TESTBED_INSTANCE")
	code := m.Run()
	if testbed.IsRoot() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := testbed.Clean(ctx, instance); err != nil {
			fmt.Fprintf(os.Stderr, "failover: clean testbed %d: %v\n", instance, err)
			code = 1
		}
		cancel()
	}
	os.Exit(code)
}

// cluster returns the shared testbed with every host up, its agent running and
// seeing the others alive, and one node leading the job store; it brings it up the
// first time and repairs what an earlier test did (a cut link, a killed host).
func cluster(t *testing.T) *testbed.Bed {
	t.Helper()
	bin := testenv.NeedTestbed(t)
	testenv.Built(t, "build/examples/heat")
	if upErr != nil {
		t.Fatalf("the testbed could not come up: %v", upErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range hosts {
				if log, err := os.ReadFile(filepath.Join(bed.Dir(), h, "agent.log")); err == nil {
					t.Logf("agent log of %s (tail):\n%s", h, tail(string(log), 25))
				}
			}
		}
	})
	if bed == nil {
		bed, upErr = testbed.Up(ctx, testbed.Config{Nodes: len(hosts), Cores: []int{2}, Instance: instance, AgentBinary: bin,
			Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testbed: "+format+"\n", args...) }})
		if upErr != nil {
			t.Fatalf("testbed up: %v", upErr)
		}
	}
	for _, h := range hosts {
		bed.Heal(ctx, h)
	}
	status, _, err := bed.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range status {
		if !s.AgentAlive {
			if err := bed.StartAgent(ctx, s.Name); err != nil {
				t.Fatalf("restart the agent of %s: %v", s.Name, err)
			}
		}
	}
	// The same leader, seen by every host, three times running: a test that
	// reads the leader once must not read it in the middle of an election an
	// agent's restart above set off.
	settled, last := 0, ""
	waitFor(t, "every node alive and one node leading the job store, the same to all", time.Minute, func() bool {
		lead := agreedLeader(t)
		if lead == "" || lead != last {
			settled, last = 0, lead
			return false
		}
		settled++
		return settled >= 3
	})
	return bed
}

// agreedLeader is the node every host sees alive with all the others and
// leading the job store, or "" while they do not agree.
func agreedLeader(t *testing.T) string {
	lead := ""
	for _, h := range hosts {
		alive, leaders := 0, []string{}
		for _, n := range nodes(t, h) {
			if n.State == "alive" {
				alive++
			}
			if n.Role == "leader" {
				leaders = append(leaders, n.Name)
			}
		}
		if alive != len(hosts) || len(leaders) != 1 || (lead != "" && leaders[0] != lead) {
			return ""
		}
		lead = leaders[0]
	}
	return lead
}

// node is a line of `shoal nodes --json`.
type node struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Role  string `json:"role"`
}

func nodes(t *testing.T, host string) []node {
	t.Helper()
	out, err := bed.Exec(context.Background(), host, filepath.Join(testenv.Root, "bin/shoal"), "nodes", "--json")
	if err != nil {
		return nil
	}
	var list struct{ Nodes []node }
	json.Unmarshal(out, &list)
	return list.Nodes
}

// leaderAndOther returns the node that leads the job store and the last other
// host. It waits for a leader: there may be none for a moment after the test
// before it (an election under way, a node back from the dead).
func leaderAndOther(t *testing.T) (lead, other string) {
	t.Helper()
	waitFor(t, "a leader of the job store", time.Minute, func() bool {
		lead = leader(t, "n1")
		return lead != ""
	})
	for _, h := range hosts {
		if h != lead {
			other = h
		}
	}
	return lead, other
}

// leader is the node that leads the job store, as host sees it ("" if none).
func leader(t *testing.T, host string) string {
	for _, n := range nodes(t, host) {
		if n.Role == "leader" {
			return n.Name
		}
	}
	return ""
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// shoal runs the shoal command in host and returns its output and exit code; it
// fails the test if the command takes longer than three minutes.
func shoal(t *testing.T, host string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, err := bed.Command(ctx, host, append([]string{filepath.Join(testenv.Root, "bin/shoal")}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = testenv.Root
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("shoal %s in %s did not end within 3 minutes:\n%s", strings.Join(args, " "), host, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("shoal %s in %s: %v", strings.Join(args, " "), host, err)
	}
	return string(out), code
}

// start runs a watched command in host.
func start(t *testing.T, host string, args ...string) *watch.Proc {
	t.Helper()
	cmd, err := bed.Command(context.Background(), host, append([]string{filepath.Join(testenv.Root, "bin/shoal")}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = testenv.Root
	return watch.Start(t, cmd)
}

// reference is heat's checksum from an uninterrupted run with plain mpirun.
func reference(t *testing.T) string {
	t.Helper()
	if want != "" {
		return want
	}
	args := []string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", "6", "-x", "SHOAL_DIR",
		filepath.Join(testenv.Root, "build/examples/heat-plain"), "--size", "600", "--steps", "4000"}
	cmd := exec.Command("mpirun", args...)
	cmd.Env = append(os.Environ(), "SHOAL_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	if want = watch.Field(string(out), "checksum"); want == "" {
		t.Fatalf("reference run printed no checksum:\n%s", out)
	}
	return want
}

// detach submits heat from host and returns the job id.
func detach(t *testing.T, host string) string {
	t.Helper()
	args := append([]string{"run", "--detach", "-n", "6", "--ckpt-interval", "1s", "--max-oversubscribe", "3", "--",
		filepath.Join(testenv.Root, "build/examples/heat")}, heatArgs...)
	out, code := shoal(t, host, args...)
	if code != 0 {
		t.Fatalf("shoal run --detach exited %d:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// waitEpoch waits until host reports an epoch of job id complete.
func waitEpoch(t *testing.T, host, id string) {
	t.Helper()
	waitFor(t, "a complete epoch of "+id, time.Minute, func() bool {
		out, _ := shoal(t, host, "events", id)
		return regexp.MustCompile(`epoch \d+ complete`).MatchString(out)
	})
}

// finishes waits for job id from host and checks its result against an
// uninterrupted run's.
func finishes(t *testing.T, host, id string) string {
	t.Helper()
	if out, code := shoal(t, host, "wait", id); code != 0 {
		t.Fatalf("shoal wait %s in %s exited %d:\n%s", id, host, code, out)
	}
	logs, code := shoal(t, host, "logs", id)
	if code != 0 {
		t.Fatalf("shoal logs %s in %s exited %d:\n%s", id, host, code, logs)
	}
	if got := watch.Field(logs, "checksum"); got != reference(t) {
		t.Errorf("checksum in shoal logs on %s = %q, want %q (uninterrupted run)\n%s", host, got, reference(t), tail(logs, 10))
	}
	events, _ := shoal(t, host, "events", id)
	return events
}

// The node that coordinates a job is killed mid-run: another node coordinates,
// the job restarts from its newest complete epoch, and every node answers for it.
func TestCoordinatorKilled(t *testing.T) {
	b := cluster(t)
	lead, other := leaderAndOther(t)
	id := detach(t, lead)
	waitEpoch(t, other, id)
	if _, err := b.Kill(context.Background(), lead); err != nil {
		t.Fatal(err)
	}
	// A job submitted at once, while other still names the lost node leader, waits
	// for the election and goes to the new leader.
	out, code := shoal(t, other, "run", "--detach", "-n", "2", "--", "/bin/true")
	if code != 0 {
		t.Fatalf("shoal run --detach in %s right after the leader %s was killed exited %d:\n%s", other, lead, code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if out, code := shoal(t, other, "wait", lines[len(lines)-1]); code != 0 {
		t.Errorf("shoal wait for the job submitted during the election exited %d:\n%s", code, out)
	}
	events := finishes(t, other, id)
	re := regexp.MustCompile(fmt.Sprintf(`coordinator %s lost; (n\d) coordinates from epoch (\d+)`, lead))
	m := re.FindStringSubmatch(events)
	if m == nil {
		t.Fatalf("no event says the coordinator %s was lost and who took over:\n%s", lead, events)
	}
	if m[1] == lead {
		t.Errorf("the lost node %s still coordinates", lead)
	}
	// Every surviving node answers the same.
	for _, h := range hosts {
		if h == lead {
			continue
		}
		if out, code := shoal(t, h, "jobs"); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "succeeded") {
			t.Errorf("shoal jobs on %s (exit %d) does not list %s as succeeded:\n%s", h, code, id, out)
		}
	}
}

// `shoal run` on a node that does not coordinate the job survives the
// coordinator's loss: it re-attaches and ends with the job.
func TestRunSurvivesCoordinatorLoss(t *testing.T) {
	b := cluster(t)
	lead, other := leaderAndOther(t)
	args := append([]string{"run", "-n", "6", "--ckpt-interval", "1s", "--max-oversubscribe", "3", "--",
		filepath.Join(testenv.Root, "build/examples/heat")}, heatArgs...)
	run := start(t, other, args...)
	run.WaitLine(`epoch \d+ complete`, time.Minute)
	if _, err := b.Kill(context.Background(), lead); err != nil {
		t.Fatal(err)
	}
	if code := run.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("shoal run on %s exited %d", other, code)
	}
	out := run.Output()
	if got := watch.Field(out, "checksum"); got != reference(t) {
		t.Errorf("checksum = %q, want %q", got, reference(t))
	}
	if !strings.Contains(out, fmt.Sprintf("coordinator %s lost", lead)) {
		t.Errorf("shoal run's output does not say the coordinator %s was lost", lead)
	}
}

// The coordinator's link is cut: the majority carries the job on, the cut node's
// ranks are fenced, and after the heal one node leads and the old one follows.
func TestCoordinatorCut(t *testing.T) {
	b := cluster(t)
	lead, other := leaderAndOther(t)
	id := detach(t, lead)
	waitEpoch(t, other, id)
	ctx := context.Background()
	if err := b.Cut(ctx, lead); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new leader on the majority side", 30*time.Second, func() bool {
		l := leader(t, other)
		return l != "" && l != lead
	})
	// The cut node stops its run: no rank of the job lives on there.
	waitFor(t, "the cut node's ranks fenced", 30*time.Second, func() bool {
		return len(hostProcs(t, b, lead, "examples/heat")) == 0
	})
	events := finishes(t, other, id)
	if !strings.Contains(events, fmt.Sprintf("coordinator %s lost", lead)) {
		t.Errorf("no event says the coordinator %s was lost:\n%s", lead, events)
	}
	if err := b.Heal(ctx, lead); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one leader after the heal, the old one following", time.Minute, func() bool {
		l1, l2 := leader(t, lead), leader(t, other)
		return l1 != "" && l1 == l2 && l1 != lead
	})
	// The healed node caught up: it answers for the job too.
	waitFor(t, "the healed node to know the job ended", 30*time.Second, func() bool {
		out, _ := shoal(t, lead, "jobs")
		return strings.Contains(out, id) && strings.Contains(out, "succeeded")
	})
}

// The coordinating agent stops answering for a few seconds (paused, as a node
// under heavy load or swapping may be) while its run goes on: another node takes
// over, fences the old run and restarts from an epoch every rank's shard still
// has; the paused node, back, follows.
func TestCoordinatorPaused(t *testing.T) {
	b := cluster(t)
	lead, other := leaderAndOther(t)
	id := detach(t, other)
	waitEpoch(t, other, id)
	pid := agentPID(t, b, lead)
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGSTOP)
	waitFor(t, "another node to lead", 30*time.Second, func() bool {
		l := leader(t, other)
		return l != "" && l != lead
	})
	time.Sleep(2 * time.Second) // the old run writes on meanwhile
	p.Signal(syscall.SIGCONT)
	events := finishes(t, other, id)
	if !strings.Contains(events, fmt.Sprintf("coordinator %s lost", lead)) {
		t.Errorf("no event says the coordinator %s was lost:\n%s", lead, events)
	}
}

func agentPID(t *testing.T, b *testbed.Bed, host string) int {
	t.Helper()
	status, _, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range status {
		if s.Name == host {
			return s.AgentPID
		}
	}
	t.Fatalf("no agent pid for %s", host)
	return 0
}

// An agent killed (SIGKILL, its host otherwise untouched) and started again
// forgets none of its jobs.
func TestAgentRestartForgetsNothing(t *testing.T) {
	b := cluster(t)
	id := detach(t, "n2")
	finishes(t, "n3", id)
	if err := syscallKill(agentPID(t, b, "n2")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, "the agent of n2 to be gone", 10*time.Second, func() bool {
		_, code := shoal(t, "n2", "jobs")
		return code != 0
	})
	if err := b.StartAgent(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n2's agent to list the job again", 30*time.Second, func() bool {
		out, code := shoal(t, "n2", "jobs")
		return code == 0 && strings.Contains(out, id)
	})
	if logs, code := shoal(t, "n2", "logs", id); code != 0 || watch.Field(logs, "checksum") != reference(t) {
		t.Errorf("shoal logs on the restarted n2 (exit %d) lacks the checksum:\n%s", code, tail(logs, 5))
	}
}

// Unknown jobs get one line naming them.
func TestUnknownJob(t *testing.T) {
	cluster(t)
	for _, cmd := range []string{"wait", "logs"} {
		out, code := shoal(t, "n3", cmd, "no-such-job")
		if code == 0 || !strings.Contains(out, "no-such-job") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("shoal %s no-such-job: exit %d, output %q; want one line naming the job and a non-zero exit", cmd, code, out)
		}
	}
}

// hostProcs returns the command lines of host's processes that contain substr.
func hostProcs(t *testing.T, b *testbed.Bed, host, substr string) []string {
	t.Helper()
	pids, err := b.Procs(host)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), substr) {
			out = append(out, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

func syscallKill(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("no agent pid")
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// The node that leads, and so coordinates the job, leaves with `shoal leave`:
// as for any node that leaves politely, the job goes on from a checkpoint taken
// for the leave, and no work is lost. The leader hands the job over at that
// checkpoint before it passes the lead on; the new coordinator relaunches from
// it. The job is submitted from the leader, which runs ranks of it too (6 ranks
// on four 2-core hosts): they move off it as for any node that leaves.
func TestLeaderLeaves(t *testing.T) {
	b := cluster(t)
	lead, other := leaderAndOther(t)
	id := detach(t, lead)
	// The node that leaves is the one the job names its coordinator, should the
	// lead have moved since it was read.
	if c := coordinatorOf(t, other, id); c != lead {
		t.Logf("the leader read was %s; the job's coordinator is %s", lead, c)
		lead, other = c, lead
	}
	waitEpoch(t, other, id)
	leaveStart := time.Now()
	if out, err := b.Exec(context.Background(), lead, filepath.Join(testenv.Root, "bin/shoal"), "leave"); err != nil {
		t.Fatalf("shoal leave on the leader %s: %v\n%s", lead, err, out)
	}
	t.Logf("shoal leave on %s took %s", lead, time.Since(leaveStart).Round(100*time.Millisecond))
	finishes(t, other, id)
	evs := jsonEvents(t, other, id)
	// The restart looked at is the first after the new coordinator's event:
	// the lead that moved, not one a loaded machine caused earlier.
	took := regexp.MustCompile(`coordinates from epoch (\d+)$`)
	var coordMsg, restartMsg, from string
	for _, e := range evs {
		switch {
		case e.Type == "coordinator" && strings.Contains(e.Message, lead) && took.MatchString(e.Message) && coordMsg == "":
			coordMsg, from = e.Message, took.FindStringSubmatch(e.Message)[1]
		case e.Type == "restart" && coordMsg != "" && restartMsg == "":
			restartMsg = e.Message
		case e.Type == "node-lost":
			t.Errorf("a polite leave of the leader was treated as a loss: %s", e.Message)
		}
	}
	if coordMsg == "" || restartMsg == "" {
		t.Fatalf("no event of another node coordinating after %s, followed by a restart:\n%s", lead, eventLines(evs))
	}
	t.Logf("%s\n%s", coordMsg, restartMsg)
	if want := fmt.Sprintf("coordinator %s left, handing the job over at epoch %s;", lead, from); !strings.HasPrefix(coordMsg, want) {
		t.Errorf("the new coordinator says %q, want it to begin %q", coordMsg, want)
	}
	if !strings.Contains(restartMsg, " from epoch "+from+" ") || !strings.HasSuffix(restartMsg, "; 0 s of work lost") {
		t.Errorf("the leader's leave lost work: %q, want a restart from epoch %s with 0 s lost", restartMsg, from)
	}
	if regexp.MustCompile(`[ (]` + lead + `:\d`).MatchString(restartMsg) {
		t.Errorf("the job relaunched on the node that left: %q", restartMsg)
	}
}

// coordinatorOf is the node job id's first event names its coordinator.
func coordinatorOf(t *testing.T, host, id string) string {
	t.Helper()
	evs := jsonEvents(t, host, id)
	if len(evs) > 0 {
		if m := regexp.MustCompile(`; (n\d+) coordinates$`).FindStringSubmatch(evs[0].Message); m != nil {
			return m[1]
		}
	}
	t.Fatalf("job %s's first event names no coordinator:\n%s", id, eventLines(evs))
	return ""
}

// event is a line of `shoal events --json`.
type event struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func jsonEvents(t *testing.T, host, id string) []event {
	t.Helper()
	out, code := shoal(t, host, "events", "--json", id)
	if code != 0 {
		t.Fatalf("shoal events --json %s in %s exited %d:\n%s", id, host, code, out)
	}
	var evs []event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e event
		if err := json.Unmarshal([]byte(l), &e); err == nil {
			evs = append(evs, e)
		}
	}
	return evs
}

func eventLines(evs []event) string {
	var sb strings.Builder
	for _, e := range evs {
		if e.Type != "output" && e.Type != "output-err" {
			fmt.Fprintf(&sb, "%s: %s\n", e.Type, e.Message)
		}
	}
	return sb.String()
}
