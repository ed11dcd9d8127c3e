// Package localfarm runs a task farm on this machine alone, without an agent
// (`shoal farm` where no agent runs, or with --local). It runs the cluster's
// task runner (`shoal exec-task`, internal/taskrun) as a child process, hands
// it the tasks in the order [farm.Scheduler] gives them for one node, and
// reports what happens as the events a cluster's coordinator writes, so that
// the caller shows them as it shows a cluster farm's. [Admit] decides, by the
// cluster's rule (job.Admit), whether a farm may start again under the id of
// an earlier one kept on this machine; [Run] then runs only the tasks without
// a result.
package localfarm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/farm"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/launch"
	"shoal/internal/localrun"
	"shoal/internal/results"
)

// ErrRunnerLost: the task runner ended while it held tasks.
var ErrRunnerLost = errors.New("localfarm: the task runner ended")

// progressEvery is how often a progress line is written, as on a cluster.
const progressEvery = 2 * time.Second

// Config is one run of a farm on this machine.
type Config struct {
	// Spec is the farm: its ID, Argv (Argv[0] the name of a staged file),
	// Files (in Cache), Env and Farm.
	Spec job.Spec
	// DataDir is the farm's data dir, as a node's is to its task runner: the
	// runner keeps the files in DataDir/files, runs the tasks in
	// DataDir/jobs/ID/work and stores results in DataDir/results/ID.
	DataDir string
	// Node names this machine in events.
	Node string
	// Slots is how many tasks run at once: the machine's cores.
	Slots int
	// ShoalBin is the shoal executable that runs the task runner.
	ShoalBin string
	// Events receives every event of the run, in order; never called
	// concurrently.
	Events func(job.Event)
}

// Cache is where the farm's files are kept, by content.
func (c Config) Cache() files.Cache { return files.Cache{Dir: filepath.Join(c.DataDir, "files")} }

// Results is where the farm's results are kept.
func (c Config) Results() results.Store {
	return results.Store{Dir: filepath.Join(c.DataDir, "results")}
}

// Admit says whether a farm of spec may run under its id, given the record an
// earlier run under that id left on this machine (nil: none). A record left
// running is of a shoal farm that was killed (the caller holds the id's lock):
// it counts as ended at its last change, at. A farm started again runs only
// the tasks without a result; the rules are a cluster's (job.Admit): the same
// program, files and tasks, or another command line with Rerun, by the same
// user; a `shoal run` job's id is taken.
func Admit(id string, old *localrun.Record, spec job.Spec, at time.Time) (again bool, err error) {
	if old == nil {
		return false, nil
	}
	if old.Farm == nil {
		return false, job.Taken(id)
	}
	was := job.Job{ID: id, Spec: *old.Farm, State: old.State, Ended: old.Ended}
	if was.Ended.IsZero() {
		was.Ended = at
	}
	return job.Admit(id, was, true, false, spec)
}

// Run runs the farm's tasks that have no good result in its store yet, until
// each has one or is given up, or ctx ends (the runner and its tasks are
// killed then). It returns how the farm ended, as a cluster's coordinator
// reports it: succeeded, failed naming the tasks given up (exit code 1), or
// cancelled (130).
func Run(ctx context.Context, cfg Config) job.Done {
	r := &run{cfg: cfg, id: cfg.Spec.ID, spec: cfg.Spec.Farm, started: time.Now(), store: cfg.Results()}
	total := len(r.spec.Tasks)
	done := r.stored()
	r.sched = farm.NewScheduler(total, func(t int) bool { return done[t] }, r.spec.Prefetch, r.spec.Retries)
	r.sched.AddNode(cfg.Node, max(cfg.Slots, 1))
	r.done = len(done)
	if r.done > 0 {
		r.emit(job.EventFarmProgress, fmt.Sprintf("%d of %d tasks done before; running the other %d", r.done, total, r.sched.Left()), nil)
	}
	r.emit(job.EventState, fmt.Sprintf("running %d tasks", r.sched.Left()), nil)
	var err error
	if r.sched.Left() > 0 {
		err = r.loop(ctx)
	}
	return r.finish(ctx, err)
}

type run struct {
	cfg      Config
	id       string
	spec     *job.FarmSpec
	sched    *farm.Scheduler
	store    results.Store
	mu       sync.Mutex // Events, from the loop and the runner's standard error
	started  time.Time
	lastLine time.Time
	done     int // tasks with a result, those of earlier runs included
	doneHere int
	gaveUp   []farm.GaveUp
}

// stored returns the tasks whose result is in the store and whole; a result
// that is not (a crash while the runner wrote it unsynced) runs again.
func (r *run) stored() map[int]bool {
	done := map[int]bool{}
	tasks, _ := r.store.List(r.id)
	for _, t := range tasks {
		if t >= len(r.spec.Tasks) {
			continue
		}
		if rc, _, _, err := r.store.Open(r.id, t); err == nil {
			rc.Close()
			done[t] = true
		}
	}
	return done
}

func (r *run) emit(typ, msg string, data any) {
	e := job.NewEvent(typ, msg, data)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Events != nil {
		r.cfg.Events(e)
	}
}

// reply is one reply of the runner, or the end of its output (err set).
type reply struct {
	rep farm.Reply
	out []byte
	err error
}

// loop starts the runner, feeds it tasks as it has room and takes in their
// ends, until none is left or ctx ends.
func (r *run) loop(ctx context.Context) error {
	argv := []string{"exec-task", "--slots", strconv.Itoa(max(r.cfg.Slots, 1))}
	for _, f := range r.spec0().Files {
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
			if f.Name == r.spec0().Argv[0] {
				mode = 0o755
			}
		}
		argv = append(argv, "--stage", files.Stage{Name: f.Name, Sum: f.SHA256, Mode: mode}.String())
	}
	cmd := exec.Command(r.cfg.ShoalBin, argv...)
	cmd.Env = append(os.Environ(), "SHOAL_NODE_DATA="+r.cfg.DataDir, "SHOAL_JOB="+r.id)
	for k, v := range r.spec0().Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// The runner and its tasks are one process group, killed together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errLines := &lineEvents{emit: func(line string) { r.emit(job.EventOutputErr, line, nil) }}
	cmd.Stderr = errLines
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the task runner: %w", err)
	}
	replies := make(chan reply)
	stop := make(chan struct{})
	go func() {
		br := bufio.NewReader(outR)
		for {
			rep, out, err := farm.ReadReply(br, results.MaxSize)
			select {
			case replies <- reply{rep, out, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	finished := false
	defer func() {
		close(stop)
		if !finished {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cmd.Wait()
		errLines.Close()
	}()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	inFlight := map[int]bool{}
	for {
		for {
			task, _, ok := r.sched.Next()
			if !ok {
				break
			}
			inFlight[task] = true
			req := farm.Request{Task: task, Argv: farm.Expand(r.spec0().Argv, r.spec.Tasks[task], task)}
			if err := farm.WriteRequest(in, req); err != nil {
				return fmt.Errorf("%w: %v", ErrRunnerLost, err)
			}
		}
		if r.sched.Left() == 0 {
			in.Close() // the runner exits once its queue is empty
			finished = true
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.progress(false)
		case rp := <-replies:
			if rp.err != nil {
				return fmt.Errorf("%w with %s in hand: %v", ErrRunnerLost, job.Plural(len(inFlight), "task"), rp.err)
			}
			delete(inFlight, rp.rep.Task)
			r.ended(rp.rep, rp.out)
		}
	}
}

// spec0 is the farm's job spec.
func (r *run) spec0() *job.Spec { return &r.cfg.Spec }

// ended takes in how a run of a task ended, storing its result if the runner
// could not.
func (r *run) ended(rep farm.Reply, out []byte) {
	node := r.cfg.Node
	exit := launch.Exit{Code: rep.ExitCode, Signal: rep.Signal}
	if rep.Signal != 0 {
		exit.Code = 0
	}
	if exit.ExitCode() == 0 && !rep.Stored {
		if err := r.store.Put(r.id, rep.Task, rep.SHA256, bytes.NewReader(out)); err != nil {
			r.sched.Requeue(node, rep.Task)
			r.emit(job.EventNodeFault, fmt.Sprintf("task %d ran, but its result could not be stored (%v); running it again", rep.Task, err), nil)
			return
		}
	}
	if exit.ExitCode() == 0 {
		r.sched.Done(node, rep.Task, rep.Seconds)
		r.done++
		r.doneHere++
		r.emit(job.EventTaskDone, fmt.Sprintf("task %d done on %s in %s", rep.Task, node, job.Seconds(time.Duration(rep.Seconds*float64(time.Second)))),
			job.TaskDone{Task: rep.Task, Node: node, Size: rep.Size, SHA256: rep.SHA256, Holders: []string{node}, Seconds: rep.Seconds})
		return
	}
	again, _ := r.sched.Failed(node, rep.Task)
	attempts := r.sched.Attempts(rep.Task)
	msg := fmt.Sprintf("task %d ended with %s on %s", rep.Task, exit, node)
	if again {
		msg += fmt.Sprintf("; running it again (%d of %d retries)", attempts, r.spec.Retries)
	} else {
		msg += fmt.Sprintf("; giving it up after %s", job.Plural(attempts, "run"))
		r.gaveUp = append(r.gaveUp, farm.GaveUp{Task: rep.Task, ExitCode: exit.ExitCode(), Attempts: attempts})
	}
	r.emit(job.EventTaskFailed, msg, job.TaskFailed{Task: rep.Task, Node: node, ExitCode: exit.ExitCode(), Attempts: attempts, Again: again})
}

// progress writes a progress line every progressEvery, or now when final.
func (r *run) progress(final bool) {
	now := time.Now()
	if !final && now.Sub(r.lastLine) < progressEvery {
		return
	}
	r.lastLine = now
	total := len(r.spec.Tasks)
	rate := 0.0
	if elapsed := now.Sub(r.started).Seconds(); elapsed > 0 {
		rate = float64(r.doneHere) / elapsed
	}
	line := fmt.Sprintf("%d/%d tasks done", r.done, total)
	if len(r.gaveUp) > 0 {
		line += fmt.Sprintf(", %d failed", len(r.gaveUp))
	}
	line += fmt.Sprintf(", %.1f/s", rate)
	if left := r.sched.Left(); left > 0 && rate > 0 {
		line += ", about " + job.Seconds(time.Duration(float64(left)/rate*float64(time.Second))) + " left"
	}
	r.emit(job.EventFarmProgress, line, &job.FarmProgress{Total: total, Done: r.done, Failed: len(r.gaveUp), Rate: rate,
		PerNode: map[string]int{r.cfg.Node: r.doneHere}})
}

// finish says how the farm ended, in the words of a cluster's coordinator.
func (r *run) finish(ctx context.Context, err error) job.Done {
	r.progress(true)
	total := len(r.spec.Tasks)
	d := job.Done{State: job.Succeeded, Reason: fmt.Sprintf("%d tasks done", total)}
	switch {
	case err != nil:
		d = job.Done{State: job.Failed, ExitCode: 1, Reason: fmt.Sprintf("%v (%d of %d tasks done)", err, r.done, total)}
	case ctx.Err() != nil && r.sched.Left() > 0:
		d = job.Done{State: job.Cancelled, ExitCode: 130, Reason: fmt.Sprintf("cancelled with %d of %d tasks done", r.done, total)}
	case len(r.gaveUp) > 0:
		var list []string
		for i, g := range r.gaveUp {
			if i == 10 {
				list = append(list, "…")
				break
			}
			list = append(list, fmt.Sprintf("%d (exit %d)", g.Task, g.ExitCode))
		}
		d = job.Done{State: job.Failed, ExitCode: 1, Reason: fmt.Sprintf("%d of %d tasks failed: %s", len(r.gaveUp), total, strings.Join(list, ", "))}
	}
	r.emit(job.EventEnd, d.Reason, d)
	return d
}

// lineEvents hands on whole lines written to it.
type lineEvents struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (l *lineEvents) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.emit(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

// Close hands on an unfinished last line.
func (l *lineEvents) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(string(l.buf))
		l.buf = nil
	}
	return nil
}

var _ io.WriteCloser = (*lineEvents)(nil)
