package coord

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/engine"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
)

// fakeMpirun writes a launcher that, on its n-th start, does runs[n]:
//
//	ok     exit 0
//	205    exit 205 and say why on stderr, as mpirun does after a daemon died
//	kill   record rank 1 killed by signal 9, exit 137
//	app    record rank 1 exited with code 7, exit 7
//	sleep  sleep until stopped
func fakeMpirun(t *testing.T, runs ...string) string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "mpirun")
	body := `#!/bin/sh
dir=` + dir + `
n=$(cat $dir/count 2>/dev/null || echo 0)
echo $((n + 1)) > $dir/count
ranks=
prev=
for a in "$@"; do
	case "$prev=$a" in -x=SHOAL_RANKS_DIR=*) ranks=${a#SHOAL_RANKS_DIR=} ;; esac
	prev=$a
done
now=$(date +%s%N)
case $(sed -n "$((n + 1))p" $dir/plan) in
ok) exit 0 ;;
205) echo "ORTE has lost communication with a remote daemon." >&2; exit 205 ;;
kill) echo "pid=1 state=signaled time=$now signal=9" > $ranks/r000001; exit 137 ;;
app) echo "pid=1 state=exited time=$now code=7" > $ranks/r000001; exit 7 ;;
sleep) exec sleep 60 ;;
esac
echo "fake mpirun: no plan for start $((n + 1))" >&2
exit 99
`
	if err := os.WriteFile(filepath.Join(dir, "plan"), []byte(strings.Join(runs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// events records a job's events.
type events struct {
	mu   sync.Mutex
	list []job.Event
	seen chan job.Event
}

func (e *events) add(ev job.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
	select {
	case e.seen <- ev:
	default:
	}
}

// states returns the states the job went through, from pending.
func (e *events) states() []job.State {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []job.State{job.Pending}
	for _, ev := range e.list {
		if ev.State != "" {
			out = append(out, ev.State)
		}
	}
	return out
}

// restartCounts returns the restarts counted so far that each event into
// restarting carried.
func (e *events) restartCounts() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int
	for _, ev := range e.list {
		if ev.State == job.Restarting {
			out = append(out, ev.Restarts)
		}
	}
	return out
}

func (e *events) find(kind string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.list {
		if ev.Type == kind {
			out = append(out, ev.Message)
		}
	}
	return out
}

// localJob returns a job of 2 ranks on this node whose launcher is mpirun.
func localJob(t *testing.T, mpirun string, maxRestarts int) (*jobRun, *events) {
	t.Helper()
	root := t.TempDir()
	cfg := DefaultConfig(filepath.Join(root, "ckpt"), filepath.Join(root, "run"), "/bin/true")
	cfg.Engine = engine.OpenMPI{Mpirun: mpirun}
	cfg.PollInterval = 10 * time.Millisecond
	cfg.KillGrace = time.Second
	ev := &events{seen: make(chan job.Event, 100)}
	spec := job.Spec{ID: "j", Ranks: 2, Argv: []string{"/bin/true"}, MaxRestarts: maxRestarts}
	return newJob(cfg, spec, Output{Stdout: io.Discard, Stderr: io.Discard, Events: ev.add}), ev
}

func TestLoopOutcomes(t *testing.T) {
	var (
		P, S, R, RS = job.Pending, job.Staging, job.Running, job.Restarting
		OK, F       = job.Succeeded, job.Failed
	)
	tests := []struct {
		name        string
		runs        []string
		maxRestarts int
		want        Result
		states      []job.State
		restart     string // a restart line that must be there
	}{
		{"success", []string{"ok"}, 3,
			Result{State: OK, Reason: "every rank finished"},
			[]job.State{P, S, R, OK}, ""},
		{"mpirun failing with no rank saying why is a loss", []string{"205", "ok"}, 3,
			Result{State: OK, Restarts: 1, Reason: "every rank finished"},
			[]job.State{P, S, R, RS, S, R, OK},
			"mpirun exited with status 205 and no rank said why: ORTE has lost communication with a remote daemon.; restarting from the beginning: no complete checkpoint ("},
		{"mpirun failing until restarts run out", []string{"205", "205", "205"}, 2,
			Result{State: F, Restarts: 2, Exhausted: true,
				Reason: "mpirun exited with status 205 and no rank said why: ORTE has lost communication with a remote daemon.; giving up after 2 restarts (--max-restarts)"},
			[]job.State{P, S, R, RS, S, R, RS, S, R, F}, ""},
		{"a killed rank", []string{"kill", "ok"}, 3,
			Result{State: OK, Restarts: 1, Reason: "every rank finished"},
			[]job.State{P, S, R, RS, S, R, OK},
			"rank 1 killed by signal 9; restarting from the beginning: no complete checkpoint ("},
		{"the program's own failure", []string{"app"}, 3,
			Result{State: F, ExitCode: 7, Reason: "rank 1 exited with code 7; not restarting (the program failed by itself)"},
			[]job.State{P, S, R, F}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, ev := localJob(t, fakeMpirun(t, tt.runs...), tt.maxRestarts)
			got := Run(context.Background(), j.cfg, j.spec, j.out)
			if got != tt.want {
				t.Errorf("result\n got %+v\nwant %+v", got, tt.want)
			}
			if s := ev.states(); !slices.Equal(s, tt.states) {
				t.Errorf("states %v, want %v", s, tt.states)
			}
			if tt.restart != "" && !slices.ContainsFunc(ev.find(job.EventRestart), func(m string) bool { return strings.HasPrefix(m, tt.restart) }) {
				t.Errorf("restart lines %q, want one starting %q", ev.find(job.EventRestart), tt.restart)
			}
			if bugs := ev.find(job.EventInternal); len(bugs) > 0 {
				t.Errorf("refused transitions: %v", bugs)
			}
		})
	}
}

func TestLoopCancelled(t *testing.T) {
	j, ev := localJob(t, fakeMpirun(t, "sleep"), 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result)
	go func() { done <- Run(ctx, j.cfg, j.spec, j.out) }()
	for e := range ev.seen {
		if e.State == job.Running {
			break
		}
	}
	cancel()
	got := <-done
	if want := (Result{State: job.Cancelled, ExitCode: 130, Reason: "cancelled"}); got != want {
		t.Errorf("result %+v, want %+v", got, want)
	}
	want := []job.State{job.Pending, job.Staging, job.Running, job.Cancelled}
	if s := ev.states(); !slices.Equal(s, want) {
		t.Errorf("states %v, want %v", s, want)
	}
}

// A job resumed by a new coordinator begins by restarting, counted as a restart
// when its coordinator was lost and not when it only lost the lead, and its
// restart line says why.
func TestLoopResume(t *testing.T) {
	const lost, moved = "coordinator n1 lost", "coordinator n1 lost the lead and won it back"
	const durable = "resuming from epoch 4 kept in /shared/heat"
	tests := []struct {
		name     string
		why      string
		used     int
		max      int
		runs     []string
		want     Result
		states   []job.State
		restarts []string
		counted  []int // Restarts of the events into restarting
	}{
		{"within the restarts", lost, 1, 3, []string{"ok"},
			Result{State: job.Succeeded, Restarts: 2, Reason: "every rank finished"},
			[]job.State{job.Pending, job.Restarting, job.Staging, job.Running, job.Succeeded},
			[]string{"coordinator n1 lost; restarting 2 ranks from the beginning: no complete checkpoint on 1 node; 0 s of work lost"},
			[]int{2}},
		{"restarts used up", lost, 3, 3, nil,
			Result{State: job.Failed, Restarts: 3, Exhausted: true, Reason: "coordinator n1 lost; giving up after 3 restarts (--max-restarts)"},
			[]job.State{job.Pending, job.Failed}, nil, nil},
		{"the lead moved: not counted", moved, 1, 3, []string{"ok"},
			Result{State: job.Succeeded, Restarts: 1, Reason: "every rank finished"},
			[]job.State{job.Pending, job.Restarting, job.Staging, job.Running, job.Succeeded},
			[]string{moved + "; restarting 2 ranks from the beginning: no complete checkpoint on 1 node; 0 s of work lost"},
			[]int{1}},
		{"the lead moved with no restarts left", moved, 3, 3, []string{"kill"},
			Result{State: job.Failed, Restarts: 3, Exhausted: true, Reason: "rank 1 killed by signal 9; giving up after 3 restarts (--max-restarts)"},
			[]job.State{job.Pending, job.Restarting, job.Staging, job.Running, job.Failed},
			[]string{moved + "; restarting 2 ranks from the beginning: no complete checkpoint on 1 node; 0 s of work lost"},
			[]int{3}},
		{"from a durable epoch: not counted, no work lost said", durable, 0, 0, []string{"ok"},
			Result{State: job.Succeeded, Reason: "every rank finished"},
			[]job.State{job.Pending, job.Restarting, job.Staging, job.Running, job.Succeeded},
			[]string{durable + "; restarting 2 ranks from the beginning: no complete checkpoint on 1 node"},
			[]int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, ev := localJob(t, fakeMpirun(t, tt.runs...), tt.max)
			j.resume = &Resume{Restarts: tt.used, Why: tt.why, LeadMoved: tt.why == moved, Durable: tt.why == durable}
			j.be = &localBackend{j: j, dir: jobdir.Dir{Root: j.cfg.CkptRoot, Job: j.spec.ID},
				complete: map[uint64]shard.Header{}, bad: map[uint64]bool{}}
			if err := os.MkdirAll(j.runDir, 0o755); err != nil {
				t.Fatal(err)
			}
			got := j.loop(context.Background())
			if got != tt.want {
				t.Errorf("result\n got %+v\nwant %+v", got, tt.want)
			}
			if s := ev.states(); !slices.Equal(s, tt.states) {
				t.Errorf("states %v, want %v", s, tt.states)
			}
			if r := ev.find(job.EventRestart); !slices.Equal(r, tt.restarts) {
				t.Errorf("restart lines %q, want %q", r, tt.restarts)
			}
			if first := ev.find(job.EventState); len(first) == 0 || !strings.HasPrefix(first[0], tt.why+"; ") {
				t.Errorf("state events %q: the first must say %q", first, tt.why)
			}
			if c := ev.restartCounts(); !slices.Equal(c, tt.counted) {
				t.Errorf("restarts counted on entering restarting: %v, want %v", c, tt.counted)
			}
		})
	}
}

// A launcher that exits while a process it started still holds its output (Hydra,
// when its launcher could not be run) must not hold the job: its output is read
// until it exits and a grace period more, then the pipes are closed.
func TestDrainLauncherLeftOutputOpen(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & echo last words")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	var copies sync.WaitGroup
	copies.Add(1)
	var out strings.Builder
	go func() { defer copies.Done(); io.Copy(&out, stdout) }()
	start := time.Now()
	drain(cmd.Process.Pid, &copies, 200*time.Millisecond, stdout)
	if err := cmd.Wait(); err != nil {
		t.Errorf("the launcher's exit: %v", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("drain took %v: it waited for the process left behind", took)
	}
	if out.String() != "last words\n" {
		t.Errorf("output read = %q, want the launcher's last words", out.String())
	}
}

// An automatic interval is announced once its cost is known, and again only
// when it changes by a quarter or more; the message says why.
func TestReportInterval(t *testing.T) {
	var got []string
	j := &jobRun{spec: job.Spec{ID: "heat"}, out: Output{Events: func(e job.Event) {
		if e.Type == job.EventInterval {
			got = append(got, e.Message)
		}
	}}}
	record := "no node failed in 2h0m0s of node time"
	iv := func(every, cost time.Duration) *job.Interval {
		return &job.Interval{Every: job.Duration(every), Auto: true, Cost: job.Duration(cost), MTBF: job.Duration(15 * time.Minute), Record: record}
	}
	for _, c := range []struct {
		iv   *job.Interval
		want bool
	}{
		{nil, false},
		{&job.Interval{Every: job.Duration(30 * time.Second)}, false}, // fixed: the user chose it
		{iv(8*time.Second, 0), false},                                 // cost not known yet
		{iv(4500*time.Millisecond, 12*time.Millisecond), true},
		{iv(5*time.Second, 14*time.Millisecond), false}, // 11 % longer
		{iv(6*time.Second, 20*time.Millisecond), true},  // 33 % longer
		{iv(4*time.Second, 9*time.Millisecond), true},   // 33 % shorter
	} {
		if announced := j.reportInterval(c.iv); announced != c.want {
			t.Errorf("interval %+v: announced %v, want %v", c.iv, announced, c.want)
		}
	}
	want := "checkpoints every 4.5 s (auto: a checkpoint costs the run 12 ms; their nodes lose one every 15m0s: no node failed in 2h0m0s of node time)"
	if len(got) != 3 || got[0] != want {
		t.Errorf("events %q, want 3, the first %q", got, want)
	}
}

// stagingLosses is the local backend on which the prepare calls named in
// lostOn (from 1) find a node lost while the run is staged.
type stagingLosses struct {
	*localBackend
	calls  int
	lostOn map[int]bool
}

func (b *stagingLosses) prepare(ctx context.Context, req launchRequest) (engine.Launch, []string, string, error) {
	b.calls++
	if b.lostOn[b.calls] {
		return engine.Launch{}, nil, "", &lossError{&nodeLoss{nodes: []string{"n5"}, reason: "its agent did not answer while the run was staged", at: time.Now()}}
	}
	return b.localBackend.prepare(ctx, req)
}

// A node lost while a relaunch is staged (the second of two lost at once)
// interrupts that relaunch, which is decided again as the same restart; on
// the first launch it is a restart like any other; and nodes that keep being
// lost while staged count again after job.MaxUnlaunched relaunches in a row.
func TestLossWhileStaged(t *testing.T) {
	var (
		P, S, R, RS = job.Pending, job.Staging, job.Running, job.Restarting
		OK, F       = job.Succeeded, job.Failed
	)
	endless := map[int]bool{}
	for i := 2; i <= job.MaxUnlaunched+3; i++ {
		endless[i] = true
	}
	tests := []struct {
		name     string
		runs     []string
		lostOn   map[int]bool
		state    job.State
		restarts int
		states   []job.State
	}{
		{"during a relaunch", []string{"kill", "ok"}, map[int]bool{2: true}, OK, 1,
			[]job.State{P, S, R, RS, S, RS, S, R, OK}},
		{"during the first launch", []string{"ok"}, map[int]bool{1: true}, OK, 1,
			[]job.State{P, S, RS, S, R, OK}},
		{"again and again", []string{"kill"}, endless, F, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, ev := localJob(t, fakeMpirun(t, tt.runs...), 1)
			lb := &localBackend{j: j, dir: jobdir.Dir{Root: j.cfg.CkptRoot, Job: j.spec.ID},
				complete: map[uint64]shard.Header{}, bad: map[uint64]bool{}}
			j.be = &stagingLosses{localBackend: lb, lostOn: tt.lostOn}
			for _, d := range []string{lb.dir.Path(), j.runDir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got := j.loop(context.Background())
			if got.State != tt.state || got.Restarts != tt.restarts {
				t.Errorf("result %+v, want %s after %d restarts", got, tt.state, tt.restarts)
			}
			if s := ev.states(); tt.states != nil && !slices.Equal(s, tt.states) {
				t.Errorf("states %v, want %v", s, tt.states)
			}
			if tt.state == F && !got.Exhausted {
				t.Errorf("result %+v: want restarts exhausted", got)
			}
		})
	}
}

// The restart line of a relaunch on another count leaves the cause to the
// resize line before it ("node n3 lost (…): shrinking from 6 to 4 ranks"),
// and keeps the layout and the work lost; on the same count it says the cause.
func TestRestartNoteAfterResize(t *testing.T) {
	end := ending{Outcome: job.Outcome{Kind: job.NodeLost, Detail: "node n3 lost (its agent is gone: connection refused)"}, wholeJob: true}
	note := restartNote(end, restartPoint{epoch: 2}, 300*time.Millisecond)
	if got, want := note(4, "on 3 nodes (n1:0-1 n4:2 n5:3)", true), "restarting 4 ranks from epoch 2 on 3 nodes (n1:0-1 n4:2 n5:3); 0.3 s of work lost"; got != want {
		t.Errorf("after a resize: %q, want %q", got, want)
	}
	if got, want := note(6, "on n1, n4", false), "node n3 lost (its agent is gone: connection refused); restarting 6 ranks from epoch 2 on n1, n4; 0.3 s of work lost"; got != want {
		t.Errorf("on the same count: %q, want %q", got, want)
	}
}
