// Package farm runs task farms (`shoal farm`) on testbed hosts: the Mandelbrot
// tiles joined into the image a single process computes, retries and tasks
// given up, a farm started again that skips what it has done, another user
// refused that farm and everything of it, and a host killed while its tasks
// run. The tests share one testbed (instance 246),
// brought up by the first and cleaned at the end; they run one after the
// other, the host kill last.
package farm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/agent"
	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 246

var hosts = []string{"n1", "n2", "n3"}

var bed = &testenv.Shared{Config: testbed.Config{Nodes: len(hosts), Cores: []int{2}, Instance: instance}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// up returns the shared testbed: three hosts of two cores.
func up(t *testing.T) *testbed.Bed { return bed.Up(t) }

// farmCmd is `shoal farm ARGS` in host n1, its tasks read from tasks.
func farmCmd(t *testing.T, b *testbed.Bed, tasks string, args ...string) *exec.Cmd {
	t.Helper()
	cmd, err := b.Command(context.Background(), "n1", append([]string{filepath.Join(testenv.Root, "bin/shoal"), "farm"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = testenv.Root
	cmd.Stdin = strings.NewReader(tasks)
	return cmd
}

// runFarm runs a farm to its end and returns its stdout, stderr and exit code.
func runFarm(t *testing.T, b *testbed.Bed, tasks string, args ...string) (string, string, int) {
	t.Helper()
	cmd := farmCmd(t, b, tasks, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	go func() {
		<-ctx.Done()
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	}()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("shoal farm: %v", err)
	}
	return stdout.String(), stderr.String(), code
}

func lines(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "%d\n", i)
	}
	return sb.String()
}

// The Mandelbrot tiles, farmed out, join into the image one process computes,
// and every result is stored on two hosts.
func TestMandelbrotTiles(t *testing.T) {
	b := up(t)
	mandel := testenv.Built(t, "build/examples/mandelbrot")
	out := t.TempDir()
	size := []string{"--width", "600", "--height", "450"}
	_, stderr, code := runFarm(t, b, lines(16), append([]string{"--job-id", "mandel", "--out", out, "--", mandel, "--tile", "{}", "--of", "16"}, size...)...)
	if code != 0 {
		t.Fatalf("shoal farm exited %d, want 0; stderr:\n%s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^shoal: 16/16 tasks done, [0-9.]+/s; done per node: n\d \d+`).MatchString(stderr) {
		t.Errorf("no final progress line with the hosts' tasks in:\n%s", stderr)
	}
	join, err := exec.Command(mandel, append([]string{"--join", out, "--of", "16"}, size...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("mandelbrot --join: %v\n%s", err, join)
	}
	serial, err := exec.Command(mandel, append([]string{"--serial"}, size...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("mandelbrot --serial: %v\n%s", err, serial)
	}
	if string(join) != string(serial) {
		t.Errorf("joined tiles: %q, want the serial run's %q", join, serial)
	}
	for task := 0; task < 16; task++ {
		var holders []string
		for _, h := range hosts {
			host, _ := b.Host(h)
			if _, err := os.Stat(filepath.Join(host.DataDir, agent.ResultsDir, "mandel", strconv.Itoa(task))); err == nil {
				holders = append(holders, h)
			}
		}
		if len(holders) != 2 {
			t.Errorf("result of task %d is on %v, want two hosts", task, holders)
		}
	}
}

// flaky writes a task program: task 1 fails its first two runs, task 2 every
// run; each run counts itself in dir (the hosts share the file system).
func flaky(t *testing.T) (prog, dir string) {
	dir = t.TempDir()
	prog = filepath.Join(dir, "flaky.sh")
	script := `#!/bin/sh
f=` + dir + `/count-$1; n=$(cat $f 2>/dev/null || echo 0); n=$((n+1)); echo $n > $f
if [ "$1" = 2 ] && [ "$2" != fixed ]; then echo "task 2 always fails" >&2; exit 3; fi
if [ "$1" = 1 ] && [ $n -le 2 ]; then echo "flaky run $n" >&2; exit 1; fi
echo "result $1"
`
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, dir
}

func runs(t *testing.T, dir string, task int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("count-%d", task)))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// A task that fails twice succeeds on its third run; one that always fails is
// given up after its retries and reported, and the farm finishes the rest and
// exits 1. Started again with the same id, the farm runs only the task it has
// no result for, and prints every result in task order.
func TestRetriesGiveUpAndRestart(t *testing.T) {
	b := up(t)
	prog, dir := flaky(t)
	stdout, stderr, code := runFarm(t, b, lines(5), "--job-id", "flaky", "--retries", "2", "--", prog)
	if code != 1 {
		t.Errorf("exit code %d, want 1 (a task given up)", code)
	}
	if want := "result 0\nresult 1\nresult 3\nresult 4\n"; stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	for _, want := range []string{
		"[task 1] flaky run 2",
		"task 2 ended with exit code 3 on ",
		"; giving it up after 3 runs",
		"shoal farm: job flaky failed: 1 of 5 tasks failed: 2 (exit 3)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for task, want := range []int{1, 3, 3, 1, 1} {
		if got := runs(t, dir, task); got != want {
			t.Errorf("task %d ran %d times, want %d", task, got, want)
		}
	}

	stdout, stderr, code = runFarm(t, b, lines(5), "--job-id", "flaky", "--retries", "0", "--", prog)
	if code != 1 {
		t.Errorf("started again: exit code %d, want 1", code)
	}
	if want := "result 0\nresult 1\nresult 3\nresult 4\n"; stdout != want {
		t.Errorf("started again: stdout = %q, want %q (the stored results)", stdout, want)
	}
	if !strings.Contains(stderr, "4 of 5 tasks done before; running the other 1") {
		t.Errorf("started again: stderr does not say what was done before:\n%s", stderr)
	}
	for task, want := range []int{1, 3, 4, 1, 1} {
		if got := runs(t, dir, task); got != want {
			t.Errorf("started again: task %d has run %d times, want %d", task, got, want)
		}
	}

	// Fixed (task 2 succeeds given "fixed"), the same id with the new command
	// line is refused, saying what changed; with --rerun it runs task 2 alone.
	_, stderr, code = runFarm(t, b, lines(5), "--job-id", "flaky", "--", prog, "{}", "fixed")
	if want := `shoal farm: job id "flaky" is your ended farm, and this one changes its command line: --rerun runs the tasks it has no result for with this one; or choose another id`; code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("changed, without --rerun: exit %d, stderr %q; want a failure saying %q", code, stderr, want)
	}
	stdout, stderr, code = runFarm(t, b, lines(5), "--job-id", "flaky", "--rerun", "--", prog, "{}", "fixed")
	if want := "result 0\nresult 1\nresult 2\nresult 3\nresult 4\n"; code != 0 || stdout != want {
		t.Errorf("changed, --rerun: exit %d, stdout %q; want 0 and %q\n%s", code, stdout, want, stderr)
	}
	for task, want := range []int{1, 3, 5, 1, 1} {
		if got := runs(t, dir, task); got != want {
			t.Errorf("changed, --rerun: task %d has run %d times, want %d", task, got, want)
		}
	}
}

// Ownership is part of a farm's identity. User A runs a farm with --job-id to
// its end; user B runs the very same command line and is refused: the id is
// taken, in the words any held id gets (A, its owner, is told what its other
// farm changes). Every way B
// could read, follow or reach the farm, through the CLI or the agent's socket,
// on every host, answers as for an id no job has. A still owns the farm and
// reads every result again, its directories on every host are still A's, and
// B cannot list the hosts' job directories to learn of it either.
func TestAnotherUsersFarm(t *testing.T) {
	b := up(t)
	uidA := localUser(t, "shoal-test-a")
	localUser(t, "shoal-test-b")
	const id, none = "owned", "no-such-farm"
	prog := filepath.Join(sharedDir(t), "whose.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"task $1 by $(id -u)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	farm := []string{"farm", "--job-id", id, "--", prog}
	var want strings.Builder
	for task := 0; task < 4; task++ {
		fmt.Fprintf(&want, "task %d by %s\n", task, uidA)
	}
	stdout, stderr, code := shoalAs(t, b, "n1", "shoal-test-a", lines(4), farm...)
	if code != 0 || stdout != want.String() {
		t.Fatalf("A's farm: exit %d, stdout %q; want 0 and %q; stderr:\n%s", code, stdout, want.String(), stderr)
	}

	// B, the same command line: refused, nothing run, nothing read.
	stdout, stderrB, code := shoalAs(t, b, "n1", "shoal-test-b", lines(4), farm...)
	if wantErr := "shoal farm: job id \"owned\" is taken; choose another id\n"; code != 1 || stdout != "" || stderrB != wantErr {
		t.Errorf("B's farm under A's id: exit %d, stdout %q, stderr %q; want 1, nothing and %q", code, stdout, stderrB, wantErr)
	}
	// A, another farm under the id: refused too, and A, its owner, is told why;
	// what B is told is the same whoever holds the id.
	wantA := "shoal farm: job id \"owned\" is your ended farm, and this one changes its tasks: the results it stored are of other tasks; choose another id\n"
	if _, stderrA, code := shoalAs(t, b, "n1", "shoal-test-a", lines(5), farm...); code != 1 || stderrA != wantA {
		t.Errorf("A's other farm under its own id: exit %d, stderr %q; want 1 and %q", code, stderrA, wantA)
	}

	// Everything B may ask of the farm answers as for an id no job has.
	commands := [][]string{{"wait", "ID"}, {"logs", "ID"}, {"events", "ID"}, {"events", "--follow", "ID"}, {"jobs", "ID"},
		{"jobs", "--placement", "ID"}, {"jobs", "--traffic", "ID"}, {"cancel", "ID"}, {"rebalance", "ID"}}
	paths := []string{"/v1/jobs/ID", "/v1/jobs/ID/events", "/v1/jobs/ID/events?follow=true", "/v1/results/ID/0", "/v1/results/ID/3", "/v1/results/ID"}
	with := func(args []string, id string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = strings.ReplaceAll(a, "ID", id)
		}
		return out
	}
	for _, host := range hosts {
		for _, args := range commands {
			outN, errN, codeN := shoalAs(t, b, host, "shoal-test-b", "", with(args, none)...)
			out, errOut, code := shoalAs(t, b, host, "shoal-test-b", "", with(args, id)...)
			out, errOut = strings.ReplaceAll(out, id, "ID"), strings.ReplaceAll(errOut, id, "ID")
			outN, errN = strings.ReplaceAll(outN, none, "ID"), strings.ReplaceAll(errN, none, "ID")
			if code != codeN || out != outN || errOut != errN || codeN == 0 {
				t.Errorf("shoal %s as B in %s: exit %d, %q, %q; want an id no job has gets (not 0): %d, %q, %q",
					strings.Join(with(args, id), " "), host, code, out, errOut, codeN, outN, errN)
			}
		}
		for _, p := range paths {
			gotN := strings.ReplaceAll(socketGet(t, b, host, "shoal-test-b", strings.ReplaceAll(p, "ID", none)), none, "ID")
			got := strings.ReplaceAll(socketGet(t, b, host, "shoal-test-b", strings.ReplaceAll(p, "ID", id)), id, "ID")
			if got != gotN || strings.HasPrefix(gotN, "200") || strings.Contains(got, "task ") {
				t.Errorf("GET %s as B on %s's socket: %q; want what an id no job has gets: %q", p, host, got, gotN)
			}
		}
		if list, _, _ := shoalAs(t, b, host, "shoal-test-b", "", "jobs"); strings.Contains(list, id) {
			t.Errorf("shoal jobs as B in %s lists A's farm:\n%s", host, list)
		}
	}

	// A still owns the farm and reads every result, on the CLI and the socket.
	table, err := b.Exec(context.Background(), "n2", filepath.Join(testenv.Root, "bin/shoal"), "jobs")
	if err != nil || !regexp.MustCompile(`(?m)^owned\s+shoal-test-a\s+succeeded\s`).Match(table) {
		t.Errorf("shoal jobs as root: %v\n%s\nwant owned by shoal-test-a, succeeded", err, table)
	}
	stdout, stderr, code = shoalAs(t, b, "n1", "shoal-test-a", lines(4), farm...)
	if code != 0 || stdout != want.String() || !strings.Contains(stderr, "4 of 4 tasks done before; running the other 0") {
		t.Errorf("A's farm again: exit %d, stdout %q; want 0, %q and every task done before; stderr:\n%s", code, stdout, want.String(), stderr)
	}
	if got, want := socketGet(t, b, "n3", "shoal-test-a", "/v1/results/owned/2"), "200 application/octet-stream\ntask 2 by "+uidA+"\n"; got != want {
		t.Errorf("GET /v1/results/owned/2 as A: %q, want %q", got, want)
	}

	// Its directories on every host are A's, and no host lists them to B.
	found := map[string]int{}
	for _, host := range hosts {
		h, err := b.Host(host)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{agent.JobsDir, agent.CkptDir, agent.ResultsDir} {
			st, err := os.Stat(filepath.Join(h.DataDir, d, id))
			if err != nil {
				continue
			}
			found[d]++
			if owner := strconv.Itoa(int(st.Sys().(*syscall.Stat_t).Uid)); owner != uidA {
				t.Errorf("%s: DATA/%s/%s is uid %s's, want A's %s", host, d, id, owner, uidA)
			}
		}
		for _, d := range []string{agent.JobsDir, agent.CkptDir, agent.ResultsDir, agent.CoordDir} {
			if out, _, code := asUser(t, b, host, "shoal-test-b", "", "ls", filepath.Join(h.DataDir, d)); code == 0 {
				t.Errorf("%s: B lists DATA/%s:\n%s", host, d, out)
			}
		}
	}
	if found[agent.JobsDir] == 0 || found[agent.ResultsDir] == 0 {
		t.Errorf("the farm's directories found on the hosts: %v; want its job and results directories somewhere", found)
	}
}

// A host killed while it runs tasks loses none of the farm's results: its
// tasks run again on the others, and the farm succeeds.
func TestHostKilled(t *testing.T) {
	b := up(t)
	dir := t.TempDir()
	prog := filepath.Join(dir, "slow.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nsleep 0.3\necho \"task $1 on $(hostname)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	p := watch.Start(t, farmCmd(t, b, lines(40), "--job-id", "killed", "--out", out, "--", prog))
	p.WaitLine(`^shoal: \d+/40 tasks done`, time.Minute)
	// Kill n3 once it has finished a task of its own.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(readAll(out), "on n3") {
		if time.Now().After(deadline) {
			t.Fatal("n3 finished no task in a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := b.Kill(context.Background(), "n3"); err != nil {
		t.Fatal(err)
	}
	p.WaitLine(`^shoal: node n3 .*run again elsewhere`, time.Minute)
	if code := p.Wait(2 * time.Minute); code != 0 {
		t.Fatalf("shoal farm exited %d after n3 was killed, want 0", code)
	}
	for task := 0; task < 40; task++ {
		b, err := os.ReadFile(filepath.Join(out, strconv.Itoa(task)))
		if err != nil || !strings.HasPrefix(string(b), fmt.Sprintf("task %d on n", task)) {
			t.Errorf("result of task %d: %q, %v", task, b, err)
		}
	}
}

// readAll is the concatenated content of the files in dir.
func readAll(dir string) string {
	ents, _ := os.ReadDir(dir)
	var sb strings.Builder
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		sb.Write(b)
	}
	return sb.String()
}

// The node that coordinates the farm is killed: the next leader takes the
// farm over from its ledger, runs only the tasks without a result, and the
// caller, following through another node, gets every result.
func TestCoordinatorKilled(t *testing.T) {
	b := up(t)
	ctx := context.Background()
	if pids, _ := b.Procs("n3"); len(pids) == 0 { // TestHostKilled's victim
		if err := b.StartAgent(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "slow.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nsleep 0.2\necho \"task $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd, err := b.Command(ctx, "n2", filepath.Join(testenv.Root, "bin/shoal"), "farm", "--job-id", "coord-killed", "--out", out, "--", prog)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = strings.NewReader(lines(60))
	p := watch.Start(t, cmd)
	m := p.WaitLine(`^shoal: farm coord-killed: 60 tasks of slow.sh, coordinated by (n\d)`, time.Minute)
	coordinator := m[1]
	deadline := time.Now().Add(time.Minute)
	for len(readAll(out)) < len("task 0\n")*8 {
		if time.Now().After(deadline) {
			t.Fatal("no result in a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := b.Kill(ctx, coordinator); err != nil {
		t.Fatal(err)
	}
	p.WaitLine(`^shoal: coordinator `+coordinator+` lost; n\d coordinates the farm`, time.Minute)
	if code := p.Wait(2 * time.Minute); code != 0 {
		t.Fatalf("shoal farm exited %d after its coordinator %s was killed, want 0", code, coordinator)
	}
	for task := 0; task < 60; task++ {
		got, err := os.ReadFile(filepath.Join(out, strconv.Itoa(task)))
		if want := fmt.Sprintf("task %d\n", task); string(got) != want {
			t.Errorf("result of task %d: %q, %v; want %q", task, got, err, want)
		}
	}
}
