package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/results"
)

func init() {
	register("farm", command{summary: "run a bag of independent tasks over the cluster's nodes", run: farmCmd})
}

const farmUsage = `Usage: shoal farm [flags] [--] PROGRAM [ARGS]

Runs PROGRAM once per task, each task a line of --tasks FILE (or of standard
input), over the nodes of the cluster the local agent belongs to: each task goes
to the node with the fewest tasks in hand per core, and every node holds
--prefetch tasks beyond its cores, waiting there to start the moment a core is
free. In ARGS, {} is replaced by the task's line and {#} by its number (the
first line is task 0); when no argument holds {}, the line is added as the last
argument, as xargs does. PROGRAM is staged to the nodes as shoal run stages it,
and runs in the node's job directory as a plain process (no MPI).

A task's standard output is its result: stored on two nodes as soon as the
task ends, then written to DIR/<task number> with --out, or else to standard
output, in task order. Standard error lines are shown prefixed "[task N] ", and
shoal's own lines ("shoal: ", progress among them) go to standard error too.

A task that exits non-zero runs again, up to --retries times, then is reported
and the farm goes on with the rest. A lost node's tasks run again elsewhere;
results already stored are kept. Started again by its owner with the same
--job-id after it ended, a farm runs only the tasks it has no result for; while
it runs, the same command follows it instead. An id that another user's job
holds is refused as taken, as is any other job's.

Where no agent runs, or with --local, the farm runs on this machine alone, as
many tasks at once as it has cores, with the same results, lines and exit
codes; run again under its --job-id, it runs the tasks without a result.

    seq 0 31 | shoal farm --out tiles -- mandelbrot --tile {} --of 32

Flags:
`

const farmExitCodes = `
Exit codes: 0 every task done (or no task to run); 1 some tasks failed every
time they ran (listed), or shoal could not run the farm; 2 usage error, a
program that cannot run, an --out that cannot be written, or a bad task list;
130 interrupted (the farm is cancelled).
`

type farmFlags struct {
	tasks    string
	out      string
	prefetch int
	retries  int
	jobID    string
	rerun    bool
	detach   bool
	quiet    bool
	dispatch string
	local    bool
	files    multiFlag
	env      multiFlag
	agent    localAgentFlags
}

func farmCmd(args []string, stdout, stderr io.Writer) int {
	var f farmFlags
	fs := flag.NewFlagSet("farm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.tasks, "tasks", "", "file of tasks, one per line (default: standard input)")
	fs.StringVar(&f.out, "out", "", "write each task's result to `DIR`/<task number> (default: standard output, in task order)")
	fs.IntVar(&f.prefetch, "prefetch", 2, fmt.Sprintf("tasks each node holds beyond its cores (0 to %d)", job.MaxPrefetch))
	fs.IntVar(&f.retries, "retries", 3, fmt.Sprintf("runs again of a task that exits non-zero, before it is given up (0 to %d)", job.MaxRetries))
	fs.StringVar(&f.jobID, "job-id", "", "the farm's id; the same id again runs only the tasks without a result")
	fs.BoolVar(&f.rerun, "rerun", false, "with --job-id of an ended farm of yours whose command line or files this one changes (a fixed program): run it again with this one, its tasks that stored a result keeping it, the others run (the tasks must be the same)")
	fs.BoolVar(&f.detach, "detach", false, "submit the farm, print its id and return (follow it with shoal wait ID)")
	fs.BoolVar(&f.quiet, "quiet", false, "print no progress lines")
	fs.StringVar(&f.dispatch, "dispatch", "", "cyclic or block: a static schedule instead of the least loaded node, to compare (bench/farm)")
	fs.BoolVar(&f.local, "local", false, "run on this machine only, even when an agent is running (without one, a farm runs here anyway)")
	fs.Var(&f.files, "file", "stage this input `FILE` to every node too (repeatable)")
	fs.Var(&f.env, "env", "set `KEY=VALUE` in every task's environment (repeatable)")
	f.agent.register(fs)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, farmUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprint(stdout, farmExitCodes)
		return exitOK
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shoal farm: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case err != nil:
		return usage("%v (see 'shoal farm --help')", err)
	case fs.NArg() == 0:
		return usage("no program given (see 'shoal farm --help')")
	case f.prefetch < 0 || f.prefetch > job.MaxPrefetch:
		return usage("--prefetch %d: want 0 to %d", f.prefetch, job.MaxPrefetch)
	case f.retries < 0 || f.retries > job.MaxRetries:
		return usage("--retries %d: want 0 to %d", f.retries, job.MaxRetries)
	case f.jobID != "" && !job.ValidID(f.jobID):
		return usage("--job-id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", f.jobID)
	case f.rerun && f.jobID == "":
		return usage("--rerun needs --job-id: the id of the farm to run again")
	case f.dispatch != "" && f.dispatch != "cyclic" && f.dispatch != "block":
		return usage("--dispatch %q: want cyclic or block", f.dispatch)
	case f.detach && f.out != "":
		return usage("--out and --detach: a detached farm's results are read with the API (GET /v1/results/ID/N)")
	}
	for _, kv := range f.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return usage("--env %q: want KEY=VALUE", kv)
		}
	}
	program, err := resolveProgram(fs.Arg(0))
	if err != nil {
		return usage("%v", err)
	}
	tasks, err := readTasks(f.tasks, os.Stdin)
	if err != nil {
		return usage("%v", err)
	}
	if len(tasks) == 0 {
		fmt.Fprintln(stderr, "shoal farm: the task list is empty; nothing to run")
		return exitOK
	}
	if f.out != "" {
		if err := writableDir(f.out); err != nil {
			return usage("--out %s: %v", f.out, err)
		}
	}
	if f.local {
		return runFarmHere(f, program, fs.Args()[1:], tasks, stdout, stderr)
	}
	if f.agent == (localAgentFlags{}) {
		c, _, err := localAgent(stderr)
		if err != nil {
			fmt.Fprintf(stderr, "shoal farm: %v\n", err)
			return exitFailure
		}
		if c == nil {
			return runFarmHere(f, program, fs.Args()[1:], tasks, stdout, stderr)
		}
		return runFarm(c, f, program, fs.Args()[1:], tasks, stdout, stderr)
	}
	c, err := f.agent.client()
	if errors.Is(err, agent.ErrNoAgent) {
		fmt.Fprintln(stderr, "shoal farm: no agent runs where --data-dir, --agent or --secret-file say")
		return exitFailure
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal farm: %s\n", errorLine(err))
		return exitFailure
	}
	return runFarm(c, f, program, fs.Args()[1:], tasks, stdout, stderr)
}

// readTasks reads the task lines of path, or of stdin when path is empty: every
// line is a task, an empty one included; a last line without a newline too.
func readTasks(path string, stdin io.Reader) ([]string, error) {
	r := stdin
	name := "standard input"
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--tasks: %v", err)
		}
		defer f.Close()
		r, name = f, path
	}
	var tasks []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), job.MaxTaskBytes+2)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if len(line) > job.MaxTaskBytes || strings.ContainsRune(line, 0) {
			return nil, fmt.Errorf("task %d (line %d of %s): want at most %d bytes and no NUL", len(tasks), len(tasks)+1, name, job.MaxTaskBytes)
		}
		tasks = append(tasks, line)
		if len(tasks) > job.MaxTasks {
			return nil, fmt.Errorf("%s: more than %d tasks", name, job.MaxTasks)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("task %d (line %d of %s): want at most %d bytes", len(tasks), len(tasks)+1, name, job.MaxTaskBytes)
		}
		return nil, fmt.Errorf("reading %s: %v", name, err)
	}
	return tasks, nil
}

// writableDir makes dir if need be and checks that a file can be written in it.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".shoal-farm-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// runFarm submits the farm (or finds it running) and collects its results
// until it ends.
func runFarm(c *api.Client, f farmFlags, program string, args []string, tasks []string, stdout, stderr io.Writer) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	name := filepath.Base(program)
	prog, err := upload(ctx, c, program, name, 0o755)
	if err != nil {
		fmt.Fprintf(stderr, "shoal farm: upload %s to the agent: %s\n", program, errorLine(err))
		return exitFailure
	}
	spec := job.Spec{ID: f.jobID, Argv: append([]string{name}, args...), Files: []job.File{prog},
		Farm: &job.FarmSpec{Tasks: tasks, Prefetch: f.prefetch, Retries: f.retries, Dispatch: f.dispatch, Rerun: f.rerun}}
	spec.Env = envMap(f.env)
	if code := addInputs(ctx, c, &spec, f.files, "farm", stderr); code >= 0 {
		return code
	}
	farmJob, err := c.Submit(ctx, spec)
	if errors.Is(err, errkind.Conflict) && f.jobID != "" {
		// The same farm may be running: follow it rather than fail. Another
		// user's job under the id is not found, and the refusal stands.
		if running, jerr := c.Job(ctx, f.jobID); jerr == nil && running.Spec.Farm != nil && running.Ended.IsZero() {
			farmJob, err = running, nil
			fmt.Fprintf(stderr, "shoal: farm %s is running; following it\n", farmJob.ID)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal farm: %s\n", errorLine(err))
		return exitFailure
	}
	warnRoot(ctx, c, farmJob, f.quiet, stderr)
	if !f.quiet {
		fmt.Fprintf(stderr, "shoal: farm %s: %s of %s, coordinated by %s\n", farmJob.ID, taskCount(len(tasks)), name, farmJob.Coordinator)
	}
	if f.detach {
		fmt.Fprintln(stdout, farmJob.ID)
		return exitOK
	}
	defer cancelOnInterrupt(ctx, cancel, c, farmJob.ID)()
	col := &collector{c: c, job: farmJob.ID, out: f.out, total: len(tasks), stdout: stdout, stderr: stderr,
		quiet: f.quiet, done: map[int]bool{}, skip: map[int]bool{}}
	d, err := newJobStream(c, farmJob.ID, true, stderr).each(col.event)
	if err != nil {
		return followFailed("farm", farmJob.ID, c, err, stderr)
	}
	if col.err == nil && d.State != job.Cancelled {
		col.collectRest()
	}
	if col.err != nil {
		fmt.Fprintf(stderr, "shoal farm: %v\n", col.err)
		return exitFailure
	}
	return reportEnd("farm", farmJob.ID, *d, stderr)
}

// collector writes a farm's results as their tasks end: to files in out, or to
// stdout in task order.
type collector struct {
	c              *api.Client
	local          *results.Store // a farm run on this machine alone: its results, read here
	job            string
	out            string
	total          int
	stdout, stderr io.Writer
	quiet          bool
	done           map[int]bool // results known to be stored
	empty          map[int]bool // of those, the empty ones: nothing to fetch
	skip           map[int]bool // given up
	written        map[int]bool // in out
	next           int          // the next task stdout waits for
	err            error        // the first result that could not be read or written
}

func (col *collector) event(e job.Event) {
	switch e.Type {
	case job.EventOutputErr:
		fmt.Fprintln(col.stderr, e.Message)
		return
	case job.EventOutput:
		fmt.Fprintln(col.stderr, e.Message)
		return
	case job.EventTaskDone:
		var td job.TaskDone
		if json.Unmarshal(e.Data, &td) == nil {
			col.done[td.Task] = true
			if td.Size == 0 {
				if col.empty == nil {
					col.empty = map[int]bool{}
				}
				col.empty[td.Task] = true
			}
			col.write(td.Task)
		}
		return
	case job.EventTaskFailed:
		var tf job.TaskFailed
		if json.Unmarshal(e.Data, &tf) == nil && !tf.Again {
			col.skip[tf.Task] = true
			col.write(-1)
		}
		fmt.Fprintf(col.stderr, "shoal: %s\n", e.Message)
		return
	case job.EventEnd, job.EventState:
		return
	}
	if !col.quiet {
		fmt.Fprintf(col.stderr, "shoal: %s\n", e.Message)
	}
}

// write stores task's result in out, or prints every result stdout can take
// now, in order (task -1: only those).
func (col *collector) write(task int) {
	if col.err != nil {
		return
	}
	if col.out != "" {
		if task >= 0 {
			col.err = col.toFile(task)
		}
		return
	}
	for col.next < col.total && (col.done[col.next] || col.skip[col.next]) {
		if col.done[col.next] {
			if col.err = col.fetch(col.next, col.stdout); col.err != nil {
				return
			}
		}
		col.next++
	}
}

// collectRest fetches, once the farm has ended, every result not yet written:
// those done before a restart, and any whose event the stream skipped.
func (col *collector) collectRest() {
	for t := 0; t < col.total && col.err == nil; t++ {
		if col.skip[t] || (col.out != "" && col.written[t]) || (col.out == "" && t < col.next) {
			continue
		}
		if col.out != "" {
			col.err = col.toFile(t)
		} else {
			col.err = col.fetch(t, col.stdout)
			col.next = t + 1
		}
		if errors.Is(col.err, errkind.NotFound) || errors.Is(col.err, results.ErrNotFound) {
			col.err = nil // no result: given up in an earlier run, or never run
		}
	}
}

// toFile writes task's result to out/<task>, through a temporary file, so
// that a file there is always a whole result.
func (col *collector) toFile(task int) error {
	if col.written == nil {
		col.written = map[int]bool{}
	}
	tmp, err := os.CreateTemp(col.out, fmt.Sprintf(".%d-*", task))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := col.fetch(task, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(col.out, strconv.Itoa(task))); err != nil {
		return err
	}
	col.written[task] = true
	return nil
}

// fetch copies task's result to w, checking it against its hash.
func (col *collector) fetch(task int, w io.Writer) error {
	if col.empty[task] {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rc io.ReadCloser
	var sum string
	var err error
	if col.local != nil {
		rc, _, sum, err = col.local.Open(col.job, task)
	} else {
		rc, _, sum, err = col.c.GetResult(ctx, col.job, task)
	}
	if err != nil {
		return fmt.Errorf("result of task %d: %w", task, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("result of task %d: %w", task, err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
		return fmt.Errorf("result of task %d does not match its sha256 %s", task, sum)
	}
	_, err = w.Write(b)
	return err
}

func taskCount(n int) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}
