// Package farmrun is a task farm's runtime on the node that coordinates it: a
// task runner per node (internal/taskrun, started through the node's agent),
// tasks handed out by [farm.Scheduler], each result stored on two nodes, and
// the ledger of stored results written with the farm's events into its record.
// The farm's rules are internal/farm's; this package does the I/O around them.
package farmrun

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/coord"
	"shoal/internal/farm"
	"shoal/internal/job"
	"shoal/internal/launch"
	"shoal/internal/node"
	"shoal/internal/results"
	"shoal/internal/staging"
)

// Timing of a farm's coordinator.
const (
	farmTick = 250 * time.Millisecond // membership looked at, ledger written
	// farmProgressEvery is how often a progress line is written.
	farmProgressEvery = 2 * time.Second
	// farmNodeBackoff is how long a node whose launch failed gets no tasks.
	farmNodeBackoff = 5 * time.Second
	// farmResultsDir is the results store in a data dir (agent.ResultsDir).
	farmResultsDir = "results"
)

// Config is what a farm's run needs of the node that coordinates it: the
// cluster backend's view of the node (its name, data dir, the live nodes, their
// agents as peers, the setting up of a node), and a client of a node's agent,
// which starts the node's task runner and stores results.
type Config struct {
	coord.ClusterConfig
	Agent func(n node.Node) *api.Client
}

// Record is a farm's record as its run keeps it: the job service writes it
// through to the job store. Its methods must be safe for concurrent use.
type Record interface {
	// Job returns a copy of the record.
	Job() job.Job
	// Event records an event of the farm's lifecycle, with what it says of
	// the job (its state).
	Event(e job.Event)
	// Change changes the record; the change is written with the next Write.
	Change(f func(*job.Job))
	// Write writes events, the record and ledger (the farm's, encoded) in one
	// entry.
	Write(events []job.Event, ledger json.RawMessage)
	// End writes the record, changed by f, and its last event in one entry.
	End(f func(*job.Job), last job.Event)
	// Lines returns a writer that records each line written to it as an
	// output event of type typ (a task runner's stderr).
	Lines(typ string) io.Writer
}

// farmRun is one run of a task farm by this node's coordinator. Its fields
// are the main loop's (Run), except where said.
type farmRun struct {
	cfg    Config
	j      Record
	lc     *job.Lifecycle // the farm's state, written into its record (j.Event)
	info   job.Job
	ledger farm.Ledger
	sched  *farm.Scheduler
	nodes  map[string]node.Node // in the scheduler: staged and granted
	// setting up: being staged and granted; benched: launch failed, until then
	settingUp map[string]bool
	benched   map[string]time.Time
	ends      chan taskEnd
	ready     chan nodeReady
	gone      chan runnerEnd
	runners   map[string]*runner      // by node: its task runner
	inFlight  map[string]map[int]bool // by node: the tasks its runner holds
	events    []job.Event             // written with the next flush
	dirty     bool
	started   time.Time
	doneHere  int // tasks done in this run
	perNode   map[string]int
	lastLine  time.Time
	results   results.Store // this node's
	// staticSet: a static schedule (FarmSpec.Dispatch) is fixed, over the
	// nodes set up at the start.
	staticSet bool
	liveKey   string // the live nodes the ledger's holders were last checked against
	// apis are the API addresses of the nodes in use, by name, for the
	// goroutines that store results (under mu).
	mu   sync.Mutex
	apis map[string]string
}

type nodeReady struct {
	node node.Node
	err  error
}

// runner is the task runner of one node (`shoal exec-task`, see
// internal/taskrun), started through the node's agent: tasks go to it as
// requests, and come back as replies read by its own goroutine.
type runner struct {
	node   node.Node
	reqs   chan farm.Request // written by the main loop; closed to let it finish
	cancel context.CancelFunc
}

// runnerEnd is a runner's connection ended: with an exit status when the
// runner exited, with err when the connection was lost.
type runnerEnd struct {
	r    *runner
	exit launch.Exit
	err  error
}

// taskEnd is how one run of a task ended, from its runner's reader.
type taskEnd struct {
	r       *runner
	task    int
	node    string
	exit    launch.Exit
	err     error // the result could not be stored: not the task's fault
	stored  farm.Result
	seconds float64
}

// Run drives the task farm rec holds until every task is done or given up,
// or until ctx ends: the farm is cancelled, or with [coord.ErrLostLead] as
// its cause, this node stops leading (the farm's end is not written then: the
// new leader goes on from the ledger). ledger is the farm's ledger of stored
// results as the job store holds it (empty: none yet).
func Run(ctx context.Context, cfg Config, rec Record, ledger json.RawMessage) {
	// The farm's own context: its end stops every goroutine it started, a
	// reply of a runner dropped meanwhile included.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	info := rec.Job()
	f := &farmRun{cfg: cfg, j: rec, lc: job.NewLifecycle(info.ID, rec.Event), info: info, nodes: map[string]node.Node{}, settingUp: map[string]bool{},
		benched: map[string]time.Time{}, ends: make(chan taskEnd), ready: make(chan nodeReady), gone: make(chan runnerEnd),
		runners: map[string]*runner{}, inFlight: map[string]map[int]bool{}, started: time.Now(), perNode: map[string]int{},
		results: results.Store{Dir: filepath.Join(cfg.DataDir, farmResultsDir)}}
	if len(ledger) > 0 {
		if err := json.Unmarshal(ledger, &f.ledger); err != nil {
			f.note(job.EventInternal, fmt.Sprintf("the farm's ledger does not decode (%v); running every task", err), nil)
			f.ledger = farm.Ledger{}
		}
	}
	spec := info.Spec.Farm
	total := len(spec.Tasks)
	f.checkLedger(ctx)
	gaveUp := map[int]bool{}
	for _, g := range f.ledger.GivenUp() {
		gaveUp[g.Task] = true
	}
	f.sched = farm.NewScheduler(total, func(t int) bool { return f.ledger.IsDone(t) || gaveUp[t] }, spec.Prefetch, spec.Retries)
	if n := f.ledger.Len(); n > 0 {
		f.note(job.EventFarmProgress, fmt.Sprintf("%d of %d tasks done before; running the other %d", n, total, f.sched.Left()), nil)
	}
	f.transition(job.Running, job.Event{Message: fmt.Sprintf("running %d tasks", f.sched.Left())})
	f.loop(ctx)
	if ctx.Err() == nil {
		f.stopRunners()
	}
	for _, r := range f.runners {
		r.cancel()
	}
	if errors.Is(context.Cause(ctx), coord.ErrLostLead) {
		return // the new leader takes the farm over from the ledger
	}
	f.revokeAll()
	f.finish(ctx)
}

// loop hands out tasks and collects their ends until none is left or ctx ends.
func (f *farmRun) loop(ctx context.Context) {
	tick := time.NewTicker(farmTick)
	defer tick.Stop()
	f.refreshNodes(ctx)
	for {
		if mode := f.info.Spec.Farm.Dispatch; mode != farm.Dynamic && !f.staticSet && len(f.settingUp) == 0 && len(f.nodes) > 0 {
			f.sched.SetStatic(mode, slices.Sorted(maps.Keys(f.nodes)))
			f.staticSet = true
			f.note(job.EventState, fmt.Sprintf("static %s schedule over %s", mode, strings.Join(slices.Sorted(maps.Keys(f.nodes)), ", ")), nil)
		}
		if f.info.Spec.Farm.Dispatch == farm.Dynamic || f.staticSet {
			f.dispatch()
		}
		if f.sched.Left() == 0 && f.running() == 0 {
			f.flush()
			return
		}
		select {
		case <-ctx.Done():
			return
		case e := <-f.ends:
			f.ended(e)
		case r := <-f.ready:
			f.nodeReady(ctx, r)
		case g := <-f.gone:
			f.runnerGone(g)
		case <-tick.C:
			f.refreshNodes(ctx)
			f.progress(false)
			f.flush()
		}
	}
}

func (f *farmRun) running() int {
	n := 0
	for _, byTask := range f.inFlight {
		n += len(byTask)
	}
	return n
}

// note queues an event for the next flush.
func (f *farmRun) note(typ, msg string, data any) {
	f.events = append(f.events, job.NewEvent(typ, msg, data))
	f.dirty = true
}

// checkLedger drops from the ledger the results no live node holds any more:
// their tasks run again.
func (f *farmRun) checkLedger(ctx context.Context) {
	if f.ledger.Len() == 0 {
		return
	}
	nodes, err := f.cfg.Nodes(ctx)
	if err != nil {
		return
	}
	held := map[string]map[int]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.State != "alive" && n.State != "suspect" {
			continue
		}
		wg.Add(1)
		go func(n node.Node) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			tasks, err := f.cfg.Agent(n).Results(cctx, f.info.ID)
			if err != nil {
				return
			}
			set := map[int]bool{}
			for _, t := range tasks {
				set[t] = true
			}
			mu.Lock()
			held[n.Name] = set
			mu.Unlock()
		}(n)
	}
	wg.Wait()
	lost := 0
	for _, r := range f.ledger.Results() {
		var still []string
		for _, h := range r.Holders {
			if held[h][r.Task] {
				still = append(still, h)
			}
		}
		if len(still) == 0 {
			f.ledger.Forget(r.Task)
			lost++
			continue
		}
		r.Holders = still
		f.ledger.Done(r)
	}
	if lost > 0 {
		f.note(job.EventState, fmt.Sprintf("%s no live node holds any more: run again", job.Plural(lost, "result")), nil)
	}
}

// refreshNodes starts using the live nodes the farm does not use yet, and stops
// using the nodes that are gone or leaving: their tasks go back to the queue.
func (f *farmRun) refreshNodes(ctx context.Context) {
	nodes, err := f.cfg.Nodes(ctx)
	if err != nil {
		return
	}
	live := map[string]node.Node{}
	for _, n := range nodes {
		if n.Live() {
			live[n.Name] = n
		}
	}
	for name := range f.nodes {
		if _, ok := live[name]; !ok {
			why := "is gone"
			for _, n := range nodes {
				if n.Name == name {
					why = node.GoneWord(n.State)
					if n.Leaving {
						why = "is leaving"
					}
				}
			}
			f.dropNode(name, fmt.Sprintf("node %s %s", name, why))
		}
	}
	now := time.Now()
	for name, n := range live {
		if _, used := f.nodes[name]; used || f.settingUp[name] || now.Before(f.benched[name]) {
			continue
		}
		f.settingUp[name] = true
		go func() {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err := f.setUp(cctx, n)
			select {
			case f.ready <- nodeReady{node: n, err: err}:
			case <-ctx.Done():
			}
		}()
	}
	// Results whose every holder is gone are lost: their tasks run again. The
	// ledger is looked through only when the live nodes changed.
	key := node.LiveKey(nodes)
	if key == f.liveKey {
		return
	}
	f.liveKey = key
	for _, r := range f.ledger.Results() {
		alive := false
		for _, h := range r.Holders {
			if _, ok := live[h]; ok {
				alive = true
			}
		}
		if !alive {
			f.ledger.Forget(r.Task)
			f.sched.Redo(r.Task)
			f.doneHere--
			f.note(job.EventState, fmt.Sprintf("the result of task %d was only on %s: running it again", r.Task, strings.Join(r.Holders, ", ")), nil)
		}
	}
}

// setUp grants a node the farm and stages the farm's files there.
func (f *farmRun) setUp(ctx context.Context, n node.Node) error {
	ranks := min(max(n.Cores, 1), len(f.info.Spec.Farm.Tasks))
	_, err := f.cfg.SetUp(ctx, n, f.info, ranks)
	return err
}

func (f *farmRun) nodeReady(ctx context.Context, r nodeReady) {
	delete(f.settingUp, r.node.Name)
	if r.err != nil {
		f.benched[r.node.Name] = time.Now().Add(farmNodeBackoff)
		f.note(job.EventNodeFault, fmt.Sprintf("node %s cannot take tasks: %v", r.node.Name, r.err), nil)
		return
	}
	f.nodes[r.node.Name] = r.node
	f.runners[r.node.Name] = f.startRunner(ctx, r.node)
	f.sched.AddNode(r.node.Name, r.node.Cores)
	f.inFlight[r.node.Name] = map[int]bool{}
	f.publishNodes()
	f.note(job.EventNodeJoined, fmt.Sprintf("node %s takes tasks (%s)", r.node.Name, job.Plural(max(r.node.Cores, 1), "core")), nil)
}

// startRunner starts the task runner of node n: it launches `shoal exec-task`
// there and feeds it requests, and reads its replies, each into a taskEnd.
func (f *farmRun) startRunner(ctx context.Context, n node.Node) *runner {
	rctx, cancel := context.WithCancel(ctx)
	spec := f.info.Spec
	r := &runner{node: n, reqs: make(chan farm.Request, max(n.Cores, 1)+spec.Farm.Prefetch+1), cancel: cancel}
	// The agent reads the command line as sh would: a file name may need quotes.
	argv := []string{"shoal", "exec-task", "--slots", strconv.Itoa(max(n.Cores, 1))}
	for _, a := range staging.StageArgs(spec, n.Arch) {
		argv = append(argv, launch.QuoteWord(a))
	}
	env := map[string]string{"SHOAL_JOB": f.info.ID}
	for k, v := range spec.Env {
		env[k] = v
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { // requests, one line each
		for req := range r.reqs {
			if farm.WriteRequest(inW, req) != nil {
				break
			}
		}
		inW.Close()
		for range r.reqs { // a runner gone takes nothing more
		}
	}()
	go func() { // replies
		br := bufio.NewReader(outR)
		for {
			rep, out, err := farm.ReadReply(br, results.MaxSize)
			if err != nil {
				outR.CloseWithError(err)
				return
			}
			// Stored in parallel: the writes' syncs then share the file
			// system's commits instead of queueing one after another.
			go func() {
				e := f.replied(rctx, r, rep, out)
				select {
				case f.ends <- e:
				case <-ctx.Done():
				}
			}()
		}
	}()
	go func() { // the connection
		var end runnerEnd
		end.r = r
		conn, err := f.cfg.Agent(n).Launch(rctx, api.LaunchRequest{Job: f.info.ID, Argv: argv, Env: env})
		if err == nil {
			relay := launch.Relay{Stdin: inR, Stdout: outW, Stderr: f.j.Lines(job.EventOutputErr)}
			end.exit, err = relay.Run(conn)
		}
		end.err = err
		outW.Close()
		inR.CloseWithError(errors.New("runner gone"))
		select {
		case f.gone <- end:
		case <-ctx.Done():
		}
	}()
	return r
}

// replied turns a runner's reply into a taskEnd, storing the result first.
func (f *farmRun) replied(ctx context.Context, r *runner, rep farm.Reply, out []byte) taskEnd {
	e := taskEnd{r: r, task: rep.Task, node: r.node.Name, seconds: rep.Seconds,
		exit: launch.Exit{Code: rep.ExitCode, Signal: rep.Signal}}
	if rep.Signal != 0 {
		e.exit.Code = 0
	}
	if e.exit.ExitCode() != 0 {
		return e
	}
	h := sha256.Sum256(out)
	if hex.EncodeToString(h[:]) != rep.SHA256 {
		e.err = fmt.Errorf("the result of task %d does not match its sha256", rep.Task)
		return e
	}
	var held []string
	if rep.Stored {
		held = []string{r.node.Name}
	}
	e.stored, e.err = f.store(ctx, r.node, rep.Task, out, held)
	return e
}

// runnerGone takes in the end of a runner's connection: the tasks it held go
// back to the queue.
func (f *farmRun) runnerGone(g runnerEnd) {
	name := g.r.node.Name
	if f.runners[name] != g.r {
		return // dropped already
	}
	why := fmt.Sprintf("node %s's task runner ended (%s)", name, g.exit)
	if g.err != nil {
		why = fmt.Sprintf("node %s lost: %v", name, g.err)
	}
	if f.sched.Left() > 0 || len(f.inFlight[name]) > 0 {
		f.benched[name] = time.Now().Add(farmNodeBackoff)
		f.dropNode(name, why)
	}
}

// dropNode stops using a node: its runner and tasks are killed, and the tasks
// go back to the queue.
func (f *farmRun) dropNode(name, why string) {
	tasks := f.sched.RemoveNode(name)
	n := f.nodes[name]
	if r := f.runners[name]; r != nil {
		r.cancel()
		close(r.reqs)
	}
	delete(f.runners, name)
	delete(f.inFlight, name)
	delete(f.nodes, name)
	f.publishNodes()
	msg := why
	if len(tasks) > 0 {
		msg += fmt.Sprintf("; its %s run again elsewhere", job.Plural(len(tasks), "task"))
	}
	f.note(job.EventNodeLost, msg, nil)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.cfg.Peer(n).Revoke(ctx, f.info.ID)
	}()
}

// stopRunners lets every runner finish (it has no task left) and waits a
// moment for them to exit.
func (f *farmRun) stopRunners() {
	for _, r := range f.runners {
		close(r.reqs)
	}
	deadline := time.After(5 * time.Second)
	for left := len(f.runners); left > 0; {
		select {
		case <-f.gone:
			left--
		case <-f.ends:
		case <-deadline:
			return
		}
	}
}

// dispatch sends every task the scheduler hands out now to its node's runner.
func (f *farmRun) dispatch() {
	spec := f.info.Spec
	for {
		task, name, ok := f.sched.Next()
		if !ok {
			return
		}
		f.inFlight[name][task] = true
		f.runners[name].reqs <- farm.Request{Task: task, Argv: farm.Expand(spec.Argv, spec.Farm.Tasks[task], task)}
	}
}

// ended takes in how a run of a task ended.
func (f *farmRun) ended(e taskEnd) {
	if f.runners[e.node] != e.r || !f.inFlight[e.node][e.task] {
		return // its node was dropped: the task is queued again already
	}
	delete(f.inFlight[e.node], e.task)
	switch {
	case e.err != nil:
		f.sched.Requeue(e.node, e.task)
		f.note(job.EventNodeFault, fmt.Sprintf("task %d ran on %s, but %v; running it again", e.task, e.node, e.err), nil)
	case e.exit.ExitCode() == 0:
		f.sched.Done(e.node, e.task, e.seconds)
		f.ledger.Done(e.stored)
		f.doneHere++
		f.perNode[e.node]++
		f.note(job.EventTaskDone, fmt.Sprintf("task %d done on %s in %s", e.task, e.node, job.Seconds(time.Duration(e.seconds*float64(time.Second)))),
			job.TaskDone{Task: e.task, Node: e.node, Size: e.stored.Size, SHA256: e.stored.SHA256, Holders: e.stored.Holders, Seconds: e.seconds})
	default:
		again, _ := f.sched.Failed(e.node, e.task)
		attempts := f.sched.Attempts(e.task)
		msg := fmt.Sprintf("task %d ended with %s on %s", e.task, e.exit, e.node)
		if again {
			msg += fmt.Sprintf("; running it again (%d of %d retries)", attempts, f.info.Spec.Farm.Retries)
		} else {
			msg += fmt.Sprintf("; giving it up after %s", job.Plural(attempts, "run"))
			f.ledger.GiveUp(farm.GaveUp{Task: e.task, ExitCode: e.exit.ExitCode(), Attempts: attempts})
		}
		f.note(job.EventTaskFailed, msg, job.TaskFailed{Task: e.task, Node: e.node, ExitCode: e.exit.ExitCode(), Attempts: attempts, Again: again})
	}
}

// store keeps a result on two nodes: held are those that have it already (the
// node that ran the task, whose runner writes it without waiting for the
// disk), and the others are, in this order, this one (synced), the node that
// ran it, and any other in use.
func (f *farmRun) store(ctx context.Context, ran node.Node, task int, b []byte, held []string) (farm.Result, error) {
	h := sha256.Sum256(b)
	r := farm.Result{Task: task, Size: int64(len(b)), SHA256: hex.EncodeToString(h[:]), Node: ran.Name, Holders: held}
	apis := f.nodesSnapshot()
	apis[ran.Name] = ran.API
	candidates := []string{f.cfg.Node}
	if ran.Name != f.cfg.Node {
		candidates = append(candidates, ran.Name)
	}
	var others []string
	for name := range apis {
		if name != f.cfg.Node && name != ran.Name {
			others = append(others, name)
		}
	}
	sort.Strings(others)
	candidates = append(candidates, others...)
	want := min(2, len(candidates)) // two copies, or one on a lone node
	var errs []error
	for _, name := range candidates {
		if len(r.Holders) >= want {
			break
		}
		if slices.Contains(r.Holders, name) {
			continue
		}
		var err error
		if name == f.cfg.Node {
			err = f.results.Put(f.info.ID, task, r.SHA256, bytes.NewReader(b))
		} else {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			err = f.cfg.Agent(node.Node{Name: name, API: apis[name]}).PutResult(cctx, f.info.ID, task, r.SHA256, b)
			cancel()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		r.Holders = append(r.Holders, name)
	}
	if len(r.Holders) == 0 {
		return r, fmt.Errorf("no node stored the result: %w", errors.Join(errs...))
	}
	return r, nil
}

// nodesSnapshot returns a copy of the API addresses of the nodes in use, for
// a task's goroutine.
func (f *farmRun) nodesSnapshot() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.apis))
	for k, v := range f.apis {
		out[k] = v
	}
	return out
}

// publishNodes makes the nodes in use known to the tasks' goroutines.
func (f *farmRun) publishNodes() {
	names := make(map[string]string, len(f.nodes))
	for name, n := range f.nodes {
		names[name] = n.API
	}
	f.mu.Lock()
	f.apis = names
	f.mu.Unlock()
}

// progress writes a progress line every farmProgressEvery, or now when final.
func (f *farmRun) progress(final bool) {
	now := time.Now()
	if !final && now.Sub(f.lastLine) < farmProgressEvery {
		return
	}
	f.lastLine = now
	total := len(f.info.Spec.Farm.Tasks)
	done := f.ledger.Len()
	failed := len(f.ledger.GivenUp())
	elapsed := now.Sub(f.started).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(f.doneHere) / elapsed
	}
	line := fmt.Sprintf("%d/%d tasks done", done, total)
	if failed > 0 {
		line += fmt.Sprintf(", %d failed", failed)
	}
	line += fmt.Sprintf(", %.1f/s", rate)
	if left := f.sched.Left(); left > 0 && rate > 0 {
		line += ", about " + job.Seconds(time.Duration(float64(left)/rate*float64(time.Second))) + " left"
	}
	var per []string
	for _, name := range slices.Sorted(maps.Keys(f.perNode)) {
		per = append(per, fmt.Sprintf("%s %d", name, f.perNode[name]))
	}
	if len(per) > 0 {
		line += "; done per node: " + strings.Join(per, ", ")
	}
	perNode := map[string]int{}
	for k, v := range f.perNode {
		perNode[k] = v
	}
	fp := &job.FarmProgress{Total: total, Done: done, Failed: failed, Running: f.running(), PerNode: perNode, Rate: rate}
	f.j.Change(func(a *job.Job) {
		a.Farm = fp
		a.Progress = float64(done+failed) / float64(max(total, 1))
	})
	f.note(job.EventFarmProgress, line, f.j.Job().Farm)
}

// flush writes the queued events, the job's info and the ledger in one entry.
func (f *farmRun) flush() {
	if !f.dirty {
		return
	}
	book, err := json.Marshal(&f.ledger)
	if err != nil {
		return
	}
	f.j.Write(f.events, book)
	f.events, f.dirty = nil, false
}

// finish writes how the farm ended.
func (f *farmRun) finish(ctx context.Context) {
	f.progress(true)
	f.flush()
	total := len(f.info.Spec.Farm.Tasks)
	gave := f.ledger.GivenUp()
	res := coord.Result{State: job.Succeeded}
	switch {
	case context.Cause(ctx) != nil && f.sched.Left() > 0:
		res = coord.Result{State: job.Cancelled, ExitCode: 130,
			Reason: fmt.Sprintf("cancelled with %d of %d tasks done", f.ledger.Len(), total)}
	case len(gave) > 0:
		var list []string
		for i, g := range gave {
			if i == 10 {
				list = append(list, "…")
				break
			}
			list = append(list, fmt.Sprintf("%d (exit %d)", g.Task, g.ExitCode))
		}
		res = coord.Result{State: job.Failed, ExitCode: 1,
			Reason: fmt.Sprintf("%d of %d tasks failed: %s", len(gave), total, strings.Join(list, ", "))}
	default:
		res.Reason = fmt.Sprintf("%d tasks done", total)
	}
	f.transition(res.State, job.Event{Message: res.Reason})
	done := res.Done()
	f.j.End(func(a *job.Job) {
		a.Ended, a.Reason, a.ExitCode = time.Now(), done.Reason, &done.ExitCode
	}, job.NewEvent(job.EventEnd, res.Reason, done))
}

// transition moves the farm to state to through its lifecycle; a refused
// transition is a bug here, reported as an event.
func (f *farmRun) transition(to job.State, e job.Event) {
	if err := f.lc.UpdateState(to, e); err != nil {
		f.note(job.EventInternal, fmt.Sprintf("internal error: %v", err), nil)
	}
}

// revokeAll withdraws the farm's grants from every node it used.
func (f *farmRun) revokeAll() {
	var wg sync.WaitGroup
	for _, n := range f.nodes {
		wg.Add(1)
		go func(n node.Node) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			f.cfg.Peer(n).Revoke(ctx, f.info.ID)
		}(n)
	}
	wg.Wait()
}
