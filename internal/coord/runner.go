package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/userdir"
)

// Config is how a node runs jobs.
type Config struct {
	// CkptRoot holds shards, one directory per job (fast local storage: tmpfs).
	CkptRoot string
	// RunRoot holds each job's launcher log and rank state files.
	RunRoot string
	// ShoalBin is the shoal executable, used as the rank wrapper.
	ShoalBin string
	// Workdir is where the ranks of a run on this node alone start (the
	// submitter's working directory); a cluster's start in each node's job
	// directory.
	Workdir string
	// Engine launches the runs; nil means Open MPI.
	Engine engine.Engine
	// Cores of this node; more ranks than cores means oversubscription.
	Cores int
	// PollInterval is how often the runner looks for new epochs and progress.
	PollInterval time.Duration
	// KillGrace is how long a launcher gets after SIGTERM before SIGKILL.
	KillGrace time.Duration
	// NodeLost, when set, hears of each node a run lost without being told
	// (see [ClusterConfig.NodeLost]).
	NodeLost func(name string)
}

// launcher is the configured engine, Open MPI when none is.
func (c Config) launcher() engine.Engine {
	if c.Engine == nil {
		return engine.OpenMPI{}
	}
	return c.Engine
}

// DefaultConfig returns a single-node configuration rooted at dir.
func DefaultConfig(ckptRoot, runRoot, shoalBin string) Config {
	return Config{
		CkptRoot: ckptRoot, RunRoot: runRoot, ShoalBin: shoalBin,
		Cores: runtime.NumCPU(), PollInterval: 200 * time.Millisecond, KillGrace: 3 * time.Second,
	}
}

// jobRun is the runner's view of one job while it runs.
type jobRun struct {
	cfg      Config
	spec     job.Spec
	out      Output
	be       backend
	lc       *job.Lifecycle
	restarts job.Restarts
	// ranks is the rank count of the current run (the launch prepare
	// readied): the spec's, or an elastic job's latest; 0 before the first.
	ranks  int
	resume *Resume // set: the loop begins by relaunching a job another coordinator ran
	// first is the first launch's relaunch: zero for a fresh start; a local
	// resume's (RunKept) starts from the epoch an earlier run kept.
	first    relaunch
	runDir   string
	progress int // last progress decile reported
	// progressFile is where rank 0 reports progress, when it runs on this node.
	progressFile string
	// interval is the automatic checkpoint interval last announced.
	interval *job.Interval
}

// Run runs spec on this node until it succeeds, fails or ctx is cancelled, relaunching
// from the newest complete epoch when a rank is lost. spec's ID must be set, and its
// program, Argv[0], be an absolute path; its ranks run in cfg.Workdir.
func Run(ctx context.Context, cfg Config, spec job.Spec, out Output) Result {
	return runLocal(ctx, cfg, spec, out, nil)
}

// runLocal is [Run], and [RunKept] when kept is set.
func runLocal(ctx context.Context, cfg Config, spec job.Spec, out Output, kept *Kept) Result {
	j := newJob(cfg, spec, out)
	if err := spec.Validate(); err != nil {
		return j.fail(err.Error())
	}
	if spec.ID == "" || spec.Farm != nil {
		return j.fail(fmt.Sprintf("job %q: a run on this node needs the job's id, and an MPI program", spec.ID))
	}
	lb := &localBackend{j: j, dir: jobdir.Dir{Root: cfg.CkptRoot, Job: spec.ID},
		complete: map[uint64]shard.Header{}, bad: map[uint64]bool{}}
	j.be = lb
	j.progressFile = filepath.Join(lb.dir.Path(), jobdir.Progress)
	for _, d := range []string{lb.dir.Path(), j.runDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return j.fail(fmt.Sprintf("create job directory: %v", err))
		}
	}
	if kept != nil {
		lb.adopt(ctx, *kept)
	}
	return j.loop(ctx)
}

func newJob(cfg Config, spec job.Spec, out Output) *jobRun {
	return &jobRun{cfg: cfg, spec: spec, out: out, runDir: filepath.Join(cfg.RunRoot, spec.ID), progress: -1,
		lc: job.NewLifecycle(spec.ID, out.Events), restarts: job.Restarts{Policy: job.RestartPolicy{MaxRestarts: spec.MaxRestarts}}}
}

func (j *jobRun) event(kind string, e job.Event) {
	e.Time, e.Job, e.Type = time.Now(), j.spec.ID, kind
	if j.out.Events != nil {
		j.out.Events(e)
	}
}

// setState changes the job's state through its lifecycle. A refused transition is
// a bug in this package: it is reported as an event, and the job goes on.
func (j *jobRun) setState(to job.State, e job.Event) {
	if err := j.lc.UpdateState(to, e); err != nil {
		j.event(job.EventInternal, job.Event{Message: fmt.Sprintf("internal error: %v", err)})
	}
}

// fail ends a job that could not start.
func (j *jobRun) fail(reason string) Result {
	d := j.restarts.Decide(job.Outcome{Kind: job.StartFailed, Detail: reason}, false)
	j.setState(d.State, job.Event{Message: d.Reason})
	return Result{State: d.State, Reason: d.Reason}
}

// backend is what differs between a job on this node alone and a job spread over
// a cluster. Its methods are called from the job's goroutine only.
type backend interface {
	// prepare readies one launch: placement, for an elastic job its rank
	// count, staging. It returns the launch (NRanks is the run's count),
	// extra environment of the launcher process, and the layout in words
	// ("on 3 nodes (n1:0-1 n2:2-3)").
	prepare(ctx context.Context, req launchRequest) (engine.Launch, []string, string, error)
	// watch starts following the run prepare readied, once its launcher runs:
	// news (nil for none) receives when poll has something to do before its
	// next tick. stop ends the following when the run ends; what reads the
	// nodes' state after it (choose, the next watch) first waits for every
	// goroutine the watch started to end.
	watch(ctx context.Context) (news <-chan struct{}, stop func())
	// poll runs on every tick of a run and on news: it tracks epochs and returns
	// a loss when a node of the run is gone.
	poll(ctx context.Context) *nodeLoss
	// finish runs once the launcher has exited: the last epochs, the states of the
	// ranks on every node with what the launcher noticed (nil: nothing) applied,
	// and whether a node of the run was lost.
	finish(ctx context.Context, local []engine.RankState, failed bool, noticed *engine.Notice) ([]engine.RankState, *nodeLoss)
	// choose picks the epoch to restart from and names the epochs passed over.
	// Epoch 0 is a fresh start. An error means no epoch survives and the job
	// cannot go on (an [ErrEpochLost]).
	choose(ctx context.Context) (restartPoint, error)
	// epochBase is the lowest epoch number a new run from restart (0: fresh) may
	// write.
	epochBase(restart uint64) uint64
}

// restartPoint is the epoch a relaunch restarts from, as the backend chose it.
type restartPoint struct {
	epoch   uint64 // 0: a fresh start
	header  shard.Header
	skipped []epochs.Skipped // the newer complete epochs passed over
	// kept is where the epoch is kept outside the cluster when the restart
	// takes it from there, no node holding it or a newer one; "": the nodes
	// hold it.
	kept string
}

// launchRequest is what a run is prepared from.
type launchRequest struct {
	epoch    uint64   // the epoch to restart from; 0: fresh
	env      []string // the ranks' environment the runner sets
	ranksDir string   // where the local ranks write their states
	// cause says what ended the last run, for the line that announces a
	// resize ("node n3 lost (no answer for 80 ms)"); "" for the first.
	cause string
}

// nodeLoss says which nodes of a run are gone and why.
type nodeLoss struct {
	nodes   []string
	reason  string // "no answer for 4.1 s", "left", ...
	at      time.Time
	planned bool // a node leaving politely or a rebalance: checkpointed first
	// fault is set for nodes that are up but cannot do their part: their
	// checkpoint store fails (storeFaults). Their ranks move all the same.
	fault bool
	// left is set when every one of the nodes left the cluster (shoal leave)
	// before its ranks could be moved: the ranks are lost, the nodes did not fail.
	left bool
	// announced is set once its event was emitted (announceLoss).
	announced bool
	// corrupt is set when copies of shards the run was staged from failed
	// verification as they were read (corruptLoss): no node was
	// lost; the run is placed again from the newest epoch still whole.
	corrupt bool
	// failed, when set, is why the run could not go on though no node was
	// lost (a shard that could not be staged): the job fails as a run that
	// could not start does.
	failed error
	// staging is set when the nodes were lost while the run was staged,
	// before it launched.
	staging bool
	// hung, when set, ends a run whose ranks stopped making snapshot calls
	// (checkHung): no node was lost; nodes names the one of the rank blamed.
	hung *job.Hang
}

func (l *nodeLoss) String() string {
	switch {
	case l.failed != nil:
		return l.failed.Error()
	case l.planned, l.corrupt, l.hung != nil:
		return l.reason
	case l.fault:
		return fmt.Sprintf("node %s %s", strings.Join(l.nodes, ", "), l.reason)
	case l.left:
		return fmt.Sprintf("node %s left before its ranks could be moved", strings.Join(l.nodes, ", "))
	}
	return fmt.Sprintf("node %s lost (%s)", strings.Join(l.nodes, ", "), l.reason)
}

// ending is how a run of the job ended, or what interrupted the job.
type ending struct {
	job.Outcome
	at       time.Time // when the loss happened
	runStart time.Time // when the run began: work since then is lost without an epoch
	// wholeJob is set for a loss that moves ranks between nodes: the restart
	// line then names the new layout.
	wholeJob bool
	// unlaunched is set for a node lost while the run was staged, before it
	// launched: a relaunch that is tried again, not another restart.
	unlaunched bool
}

// relaunch is where the next launch starts: from epoch (0: fresh) and, after a
// loss or a move, with the restart line note gives once the count and layout
// are known; cause is what ended the last run.
type relaunch struct {
	epoch uint64
	note  func(ranks int, layout string, resized bool) string
	cause string
}

// loop runs the job until it ends: it launches, weighs how each run ended with the
// restart policy, and relaunches from the epoch the backend chooses.
func (j *jobRun) loop(ctx context.Context) Result {
	next := j.first
	started := time.Now()
	var resumed *ending
	if r := j.resume; r != nil {
		at := r.At
		if at.IsZero() {
			at = started
		}
		j.restarts.Used = r.Restarts
		kind := job.CoordinatorLost
		switch {
		case r.Durable:
			kind = job.Resumed
		case r.LeadMoved:
			kind = job.LeadMoved
		}
		resumed = &ending{Outcome: job.Outcome{Kind: kind, Detail: r.Why}, at: at, runStart: at, wholeJob: true}
	}
	for {
		var end ending
		if resumed != nil {
			end, resumed = *resumed, nil
		} else {
			end = j.run(ctx, next)
		}
		// Nodes lost while a relaunch was staged (two lost at once, found one
		// after the other) interrupt that relaunch: it is decided again.
		d := j.restarts.Decide(end.Outcome, end.unlaunched && next.note != nil)
		restarts := j.restarts.Used
		// A move entered moving when its checkpoint was asked for (startReconfig);
		// the run ending now is the relaunch it waited for.
		if !(end.Kind == job.Move && j.lc.State() == job.Moving) {
			j.setState(d.State, j.transitionEvent(end.Outcome, d, restarts, started))
		}
		if job.Terminal(d.State) {
			return Result{State: d.State, ExitCode: d.ExitCode, Restarts: restarts, Exhausted: d.Exhausted, Reason: d.Reason}
		}
		rp, err := j.be.choose(ctx)
		if err != nil { // no epoch survives: the error names the newest
			d := j.restarts.Decide(job.Outcome{Kind: job.StartFailed, Detail: err.Error()}, false)
			j.setState(d.State, job.Event{Message: d.Reason})
			return Result{State: d.State, Restarts: restarts, Reason: d.Reason}
		}
		for _, s := range rp.skipped {
			j.event(job.EventEpochBad, job.Event{Epoch: s.Epoch, Message: fmt.Sprintf("warning: epoch %d unusable (%v); falling back", s.Epoch, s.Err)})
		}
		since := end.runStart
		if rp.epoch > 0 {
			since = time.Unix(0, int64(rp.header.CreatedNs))
		}
		next = relaunch{epoch: rp.epoch, note: restartNote(end, rp, max(end.at.Sub(since), 0)), cause: end.Outcome.String()}
	}
}

// transitionEvent is the event of the transition d makes after o.
func (j *jobRun) transitionEvent(o job.Outcome, d job.Decision, restarts int, started time.Time) job.Event {
	switch {
	case d.State == job.Succeeded:
		return job.Event{Type: job.EventDone, Message: fmt.Sprintf("job %s finished in %s (%s)", j.spec.ID, job.Seconds(time.Since(started)), job.Plural(restarts, "restart"))}
	case d.State == job.Failed && o.Kind == job.AppFailed:
		return job.Event{Type: job.EventAppFailure, Rank: job.RankOf(o.Rank), Message: d.Reason}
	case d.State == job.Moving:
		return job.Event{Type: job.EventReconfig, Message: d.Reason}
	}
	e := job.Event{Message: d.Reason, Restarts: restarts}
	if d.State == job.Restarting {
		e.Data, _ = json.Marshal(job.RestartCause{Cause: o.Kind.Cause(), Counted: d.Restart})
	}
	return e
}

// restartNote returns the restart line of a relaunch from rp after end, once the
// count and layout are known. After a change of count, whose line said the
// cause (job.Resized), the restart line does not say it again.
func restartNote(end ending, rp restartPoint, lost time.Duration) func(nranks int, layout string, resized bool) string {
	return func(nranks int, layout string, resized bool) string {
		from := fmt.Sprintf("from epoch %d", rp.epoch)
		switch {
		case rp.epoch == 0:
			from = "from the beginning: no complete checkpoint"
		case rp.kept != "":
			from = fmt.Sprintf("from epoch %d kept in %s (no node holds a newer one)", rp.epoch, rp.kept)
		}
		cause := end.Outcome.String() + "; "
		if resized {
			cause = ""
		}
		switch {
		case end.Kind == job.Resumed:
			// The run that kept the epoch ended elsewhere, at a time this
			// coordinator does not know: what it lost is not said.
			return fmt.Sprintf("%srestarting %d ranks %s %s", cause, nranks, from, layout)
		case !end.wholeJob:
			return fmt.Sprintf("%srestarting %s (%s of work lost)", cause, from, job.Seconds(lost))
		}
		return fmt.Sprintf("%srestarting %d ranks %s %s; %s of work lost", cause, nranks, from, layout, job.Seconds(lost))
	}
}

// run launches the job once, from next, and says how the run ended.
func (j *jobRun) run(ctx context.Context, next relaunch) ending {
	runStart := time.Now()
	code, states, loss, launcherTail, err := j.launch(ctx, next)
	switch {
	case ctx.Err() != nil:
		return ending{Outcome: job.Outcome{Kind: job.UserCancelled}}
	case err != nil:
		return ending{Outcome: job.Outcome{Kind: job.StartFailed, Detail: err.Error()}}
	case loss != nil && loss.failed != nil:
		return ending{Outcome: job.Outcome{Kind: job.StartFailed, Detail: loss.failed.Error()}}
	case loss != nil && loss.corrupt:
		return ending{Outcome: job.Outcome{Kind: job.CopyCorrupt, Detail: loss.String()}, at: loss.at, runStart: runStart, wholeJob: true}
	case loss != nil && loss.hung != nil:
		h := loss.hung
		j.event(job.EventHung, job.Event{Rank: job.RankOf(h.Rank), Message: h.String()})
		return ending{Outcome: job.Outcome{Kind: job.RanksHung, Rank: h.Rank, Detail: h.String()}, at: loss.at, runStart: runStart, wholeJob: true}
	case loss != nil && loss.planned:
		return ending{Outcome: job.Outcome{Kind: job.Move, Detail: loss.String()}, at: loss.at, runStart: runStart, wholeJob: true}
	case loss != nil && loss.fault:
		j.event(job.EventNodeFault, job.Event{Message: loss.String() + "; its ranks move"})
		return ending{Outcome: job.Outcome{Kind: job.NodeLost, Detail: loss.String()}, at: loss.at, runStart: runStart, wholeJob: true}
	case loss != nil:
		j.announceLoss(loss)
		return ending{Outcome: job.Outcome{Kind: job.NodeLost, Detail: loss.String()}, at: loss.at, runStart: runStart, wholeJob: true, unlaunched: loss.staging}
	}
	o := engine.Classify(states, j.ranks, code)
	switch o.Kind {
	case engine.Succeeded:
		return ending{Outcome: job.Outcome{Kind: job.RanksSucceeded}}
	case engine.AppFailed:
		return ending{Outcome: job.Outcome{Kind: job.AppFailed, Rank: o.Cause.Rank, Code: o.Cause.Code}}
	case engine.Unknown:
		return ending{Outcome: job.Outcome{Kind: job.LauncherFailed, Code: code, Detail: launcherTail}, at: time.Now(), runStart: runStart}
	}
	lost := job.Outcome{Kind: job.RankKilled, Rank: o.Cause.Rank, Signal: o.Cause.Signal}
	j.event(job.EventRankLost, job.Event{Rank: job.RankOf(lost.Rank), Message: lost.String()})
	return ending{Outcome: lost, at: time.Unix(0, o.Cause.TimeNs), runStart: runStart}
}

// announceLoss emits the event of a lost node, once, and has the node's
// failure recorded.
func (j *jobRun) announceLoss(loss *nodeLoss) {
	if loss.announced {
		return
	}
	loss.announced = true
	if loss.left {
		// Not a failure: neither a lost node's event nor the failure record.
		j.event(job.EventNodes, job.Event{Message: loss.String()})
		return
	}
	j.event(job.EventNodeLost, job.Event{Message: loss.String()})
	if j.cfg.NodeLost != nil {
		for _, n := range loss.nodes {
			j.cfg.NodeLost(n)
		}
	}
}

// launch runs the job once, from next, and returns mpirun's exit status, the
// ranks' states and the launcher's last lines.
func (j *jobRun) launch(ctx context.Context, next relaunch) (int, []engine.RankState, *nodeLoss, string, error) {
	restartEpoch, restartNote := next.epoch, next.note
	fail := func(err error) (int, []engine.RankState, *nodeLoss, string, error) { return 0, nil, nil, "", err }
	ranksDir := filepath.Join(j.runDir, "ranks")
	run := userdir.Tree{Base: j.cfg.RunRoot}
	run.RemoveAll(ranksDir)
	if err := run.Mkdir(ranksDir, 0o755); err != nil {
		return fail(err)
	}
	traffic := "0"
	if !j.spec.NoReplan {
		traffic = "1"
	}
	interval := strconv.FormatFloat(time.Duration(j.spec.CheckpointInterval).Seconds(), 'f', -1, 64)
	if j.spec.CheckpointAuto {
		interval = "auto" // and the backend adds SHOAL_MTBF for the nodes it places on
	}
	env := []string{
		"SHOAL_JOB=" + j.spec.ID,
		"SHOAL_CKPT_INTERVAL=" + interval,
		"SHOAL_RESTART_EPOCH=" + strconv.FormatUint(restartEpoch, 10),
		"SHOAL_EPOCH_BASE=" + strconv.FormatUint(j.be.epochBase(restartEpoch), 10),
		"SHOAL_TRAFFIC=" + traffic,
	}
	if stats := os.Getenv("SHOAL_STATS"); stats != "" {
		env = append(env, "SHOAL_STATS="+stats)
	}
	if j.spec.Elastic() {
		// libshoal refuses a region it could not hand to a run of another
		// count, at the first shoal_protect, rather than at a resize.
		env = append(env, "SHOAL_ELASTIC=1")
	}
	j.setState(job.Staging, job.Event{})
	before := j.ranks
	l, launcherEnv, where, err := j.be.prepare(ctx, launchRequest{epoch: restartEpoch, env: env, ranksDir: ranksDir, cause: next.cause})
	if err == nil {
		j.ranks = l.NRanks
	}
	var le *lossError
	if errors.As(err, &le) {
		le.loss.staging = true
		if restartNote != nil {
			// The restart being staged is said, though it never launched: the
			// next says why.
			j.event(job.EventRestart, job.Event{Epoch: restartEpoch, Message: restartNote(j.ranks, "on the nodes left", false)})
		}
		return 0, nil, le.loss, "", nil
	}
	if err != nil {
		return fail(err)
	}
	if restartNote != nil {
		j.event(job.EventRestart, job.Event{Epoch: restartEpoch, Message: restartNote(j.ranks, where, before > 0 && j.ranks != before)})
	}
	cmd := j.cfg.launcher().Command(l)
	cmd.Env = append(append(os.Environ(), launcherEnv...), engine.OpenFilesEnv())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Credential: l.RunAs}
	log, err := j.launcherLog(run, l.RunAs)
	if err != nil {
		return fail(err)
	}
	defer log.Close()
	tail := &tailBuffer{max: 4096}
	launcherOut := io.MultiWriter(log, tail)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fail(err)
	}
	if restartEpoch > 0 {
		where += fmt.Sprintf(", from epoch %d", restartEpoch)
	}
	j.setState(job.Running, job.Event{Type: job.EventLaunch, Epoch: restartEpoch, Message: fmt.Sprintf("launching %s %s", job.Plural(j.ranks, "rank"), where)})

	// Pdeathsig follows the thread that started the child: keep that thread until the
	// launcher has been waited for.
	done := make(chan launchExit, 1)
	started := make(chan error, 1)
	var copies sync.WaitGroup
	copies.Add(2)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			copies.Add(-2)
			started <- err
			return
		}
		engine.LowerOpenFiles(cmd.Process.Pid, engine.LauncherOpenFiles(l.Hosts, l.LocalRanks))
		started <- nil
		drain(cmd.Process.Pid, &copies, outputGrace, stdout, stderr)
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code, err = ee.ExitCode(), nil
			if code < 0 {
				code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
			}
		}
		done <- launchExit{code, err}
	}()
	if err := <-started; err != nil {
		return fail(fmt.Errorf("start mpirun: %w", err))
	}
	go func() { defer copies.Done(); engine.CopyTagged(stdout, j.out.Stdout, launcherOut) }()
	go func() { defer copies.Done(); engine.CopyTagged(stderr, j.out.Stderr, launcherOut) }()

	news, stopWatch := j.be.watch(ctx)
	defer stopWatch()
	tick := time.NewTicker(j.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case e := <-done:
			local, _ := engine.ReadRankStates(run, ranksDir)
			states, loss := j.be.finish(ctx, local, e.code != 0, engine.LauncherNotice(tail.String()))
			return e.code, states, loss, engine.FailureLine(tail.String()), e.err
		case <-news:
		case <-tick.C:
			j.scanProgress()
		case <-ctx.Done():
			grace := j.cfg.KillGrace
			if errors.Is(context.Cause(ctx), ErrHandedOver) {
				// As for a planned move: the ranks hold after the epoch the
				// next coordinator relaunches from; SIGTERM would cost a second.
				grace = 0
			}
			j.stop(cmd, done, grace, stdout, stderr)
			return fail(ctx.Err())
		}
		if loss := j.be.poll(ctx); loss != nil {
			// The loss is known now: it is said before the launcher is
			// stopped.
			if !loss.planned && !loss.fault && !loss.corrupt && loss.failed == nil && loss.hung == nil {
				j.announceLoss(loss)
			}
			// Nothing of this run is wanted any more: the relaunch starts from an
			// epoch, and fences every node before it stages anything. So the
			// launcher is killed at once. SIGTERM would cost a second: mpirun
			// passes it on and waits its odls_base_sigkill_timeout (1 s) before
			// it exits, however soon the ranks die, and a cut node's daemon
			// never answers at all.
			j.stop(cmd, done, 0, stdout, stderr)
			return 0, nil, loss, "", nil
		}
	}
}

// outputGrace is how long a launcher's output is read after it exited.
const outputGrace = 2 * time.Second

// drain returns once the process pid has exited (it is left to be reaped) and
// its output copies are done, closing the pipes after grace if something the
// launcher started still holds them open (Hydra's daemon, when its launcher
// failed): cmd.Wait must not run before the copies end, and they must not wait
// for processes the launcher left behind.
func drain(pid int, copies *sync.WaitGroup, grace time.Duration, pipes ...io.Closer) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	copied := make(chan struct{})
	go func() { copies.Wait(); close(copied) }()
	select {
	case <-copied:
		return
	case <-time.After(grace):
	}
	for _, p := range pipes {
		p.Close()
	}
	<-copied
}

// stop ends a run: SIGTERM to the launcher's process group, SIGKILL after the grace
// period (a launcher waiting on an unreachable daemon ignores SIGTERM); with no
// grace, SIGKILL alone.
func (j *jobRun) stop(cmd *exec.Cmd, done <-chan launchExit, grace time.Duration, pipes ...io.Closer) {
	pgid := cmd.Process.Pid
	if grace > 0 {
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-done:
			return
		case <-time.After(grace):
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		// Something the launcher started outside its process group still holds its
		// output open; stop reading so the launcher can be reaped now.
		for _, p := range pipes {
			p.Close()
		}
		<-done
	}
}

// launcherLog creates a new launcher log in the run's directory (j.runDir, in
// run), in place of the last run's: the launcher's output, a file of the user the
// launcher runs as (nil: the agent's own), readable by that user only.
func (j *jobRun) launcherLog(run userdir.Tree, as *syscall.Credential) (*os.File, error) {
	f, err := run.CreateTemp(j.runDir, "launcher.log.*")
	if err != nil {
		return nil, err
	}
	if as != nil {
		err = f.Chown(int(as.Uid), int(as.Gid))
	}
	if err == nil {
		err = run.Rename(f.Name(), filepath.Join(j.runDir, "launcher.log"))
	}
	if err != nil {
		f.Close()
		run.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

type launchExit struct {
	code int
	err  error
}

// scanProgress reads the progress file rank 0 writes on this node, if the backend
// named one.
func (j *jobRun) scanProgress() {
	if j.progressFile == "" {
		return
	}
	b, err := os.ReadFile(j.progressFile)
	if err != nil {
		return
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || f < 0 || f > 1 {
		return
	}
	j.reportProgress(f)
}

// reportProgress reports the program's progress in steps of 10%.
func (j *jobRun) reportProgress(f float64) {
	if d := int(f * 10); d > j.progress {
		j.progress = d
		j.event(job.EventProgress, job.Event{Message: fmt.Sprintf("progress %d%%", d*10)})
	}
}

// reportInterval announces the checkpoint interval libshoal's rank 0 chose
// (auto): once it knows what a checkpoint costs, and again when the interval
// changes by a quarter or more. It reports whether it announced.
func (j *jobRun) reportInterval(iv *job.Interval) bool {
	if iv == nil || !iv.Auto || iv.Cost <= 0 {
		return false
	}
	if last := j.interval; last != nil && math.Abs(float64(iv.Every-last.Every)) < 0.25*float64(last.Every) {
		return false
	}
	j.interval = iv
	j.event(job.EventInterval, job.Event{Message: "checkpoints " + iv.Describe()})
	return true
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
