package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
)

func init() {
	register("jobs", command{summary: "list the cluster's jobs and their state", run: jobsCmd})
	register("events", command{summary: "print a job's events (--follow to keep printing)", run: eventsCmd})
	register("rebalance", command{summary: "checkpoint a job and relaunch it over every live node", run: rebalanceCmd})
}

// agentCommand parses the flags shared by the commands that ask the local agent
// about jobs, and returns a client of the agent they designate and the
// positional arguments, or an exit code.
func agentCommand(name, usage string, nargs int, args []string, stdout, stderr io.Writer, extra func(*flag.FlagSet)) (*api.Client, []string, int) {
	af, rest, code := parseAgentCommand(name, usage, nargs, args, stdout, stderr, extra)
	if code >= 0 {
		return nil, nil, code
	}
	c, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "shoal %s: %s\n", name, errorLine(err))
		return nil, nil, exitFailure
	}
	return c, rest, -1
}

// parseAgentCommand is agentCommand's parsing: the agent flags and the
// arguments, or an exit code.
func parseAgentCommand(name, usage string, nargs int, args []string, stdout, stderr io.Writer, extra func(*flag.FlagSet)) (localAgentFlags, []string, int) {
	var af localAgentFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if extra != nil {
		extra(fs)
	}
	af.register(fs)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return af, nil, exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal %s: %v (see 'shoal %s --help')\n", name, err, name)
		return af, nil, exitUsage
	}
	if msg := jobArgsWrong(nargs, fs.Args()); msg != "" {
		fmt.Fprintf(stderr, "shoal %s: %s (see 'shoal %s --help')\n", name, msg, name)
		return af, nil, exitUsage
	}
	return af, fs.Args(), -1
}

// jobArgsWrong says what is wrong with the arguments args of a command whose
// only operand is a job's id: nargs is 0 for none, 1 for one JOB, -1 for an
// optional one. It returns "" when nothing is.
func jobArgsWrong(nargs int, args []string) string {
	switch {
	case nargs == 0 && len(args) > 0:
		return fmt.Sprintf("takes no arguments, got %q", args)
	case nargs == 1 && len(args) == 0:
		return "want JOB, the id of a job"
	case nargs != 0 && len(args) > 1:
		return fmt.Sprintf("want one JOB, got %d arguments", len(args))
	}
	return ""
}

const jobsUsage = `Usage: shoal jobs [flags] [JOB]

Lists the cluster's jobs, newest first, as the local agent's copy of the job
store holds them (every node keeps one): ID, OWNER (the user its ranks run as;
root for jobs submitted with the cluster secret), STATE (pending, staging,
running, moving, restarting, succeeded, failed, cancelled), SUBMITTED (how long
ago), DURATION (from its first start to its end, or to now while it runs; - when
it has not started), RANKS, the newest complete checkpoint EPOCH, RESTARTS, and
PLACEMENT (node: ranks; for a task farm, its tasks done out of all, and those
that failed). A user other than root, who submits through the agent's socket,
sees only their own jobs.

--state, --owner and --since select the jobs listed, and --limit N lists the N
newest of them (50 by default), then a line that says how many more there are,
with the command that lists the next N (--before CURSOR) and the one that lists
them all (--all, or --limit 0): the agent selects them, so only the page
travels, and a page stays right while jobs are submitted. --json prints the
agent's answer, every job unless --limit says otherwise: the jobs, with their
submitted, started and ended times, next, the cursor of the next page, and
more, how many jobs follow it.

shoal jobs JOB prints one job: its state and ranks, when it was submitted,
started and ended, the checkpoint interval in use and why (with --ckpt-interval
auto: the measured checkpoint cost and failure rate it was chosen from), and its
redundancy. shoal jobs JOB --placement prints where each of JOB's ranks runs, the
time of one iteration the planner predicted for that layout (split into compute
and communication, beside that of contiguous blocks in proportion to cores ×
speed), what it knew (the job's measured traffic or the assumption that
neighbouring ranks talk most; measured links or none), and why it chose the
layout, in one line. shoal jobs JOB --traffic prints the
traffic the job's ranks reported (libshoal counts what each rank sends): bytes
and messages per second between pairs of ranks, busiest first, and the share of
time in MPI calls.

Flags:
`

func jobsCmd(args []string, stdout, stderr io.Writer) int {
	var asJSON, placement, traffic bool
	var filters jobFilters
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(append([]string(nil), args[1:]...), args[0]) // JOB before the flags
	}
	c, rest, code := agentCommand("jobs", jobsUsage, -1, args, stdout, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the agent's answer as JSON")
		fs.BoolVar(&placement, "placement", false, "with JOB: where its ranks run, and why")
		fs.BoolVar(&traffic, "traffic", false, "with JOB: the traffic its ranks reported, busiest pairs first")
		filters.register(fs)
	})
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(rest) == 1 && filters.given {
		fmt.Fprintln(stderr, "shoal jobs: --state, --owner, --since, --limit, --all and --before select jobs to list: not with JOB (see 'shoal jobs --help')")
		return exitUsage
	}
	if len(rest) == 1 {
		return showJob(ctx, c, rest[0], placement, traffic, asJSON, stdout, stderr)
	}
	if placement || traffic {
		fmt.Fprintln(stderr, "shoal jobs: --placement and --traffic need a JOB (see 'shoal jobs --help')")
		return exitUsage
	}
	list, err := c.ListJobs(ctx, filters.query(asJSON))
	if err != nil {
		fmt.Fprintf(stderr, "shoal jobs: %s\n", errorLine(err))
		return exitFailure
	}
	warnNoQuorum(ctx, c, stderr)
	if asJSON {
		json.NewEncoder(stdout).Encode(list)
		return exitOK
	}
	printJobs(stdout, list, args, time.Now())
	return exitOK
}

const eventsUsage = `Usage: shoal events [flags] JOB

Prints the events of JOB, one line each: time, type, message. The types:

  state          the job's state changed (staging, restarting and why, failed and why)
  stage          the job's files copied to the nodes that lacked them
  launch         ranks launched, and where
  epoch          a checkpoint epoch became complete (epoch-bad: its shards failed
                 verification)
  interval       the automatic checkpoint interval chosen, and what from
  durable        an epoch kept outside the cluster (shoal run --durable), and where
  progress       the program reported its progress
  rank-lost      a rank died; node-lost: a node of the run is gone; node-fault: a node
                 is up but cannot store checkpoints
  restart        relaunching from an epoch, on which nodes, and the work lost
  coordinator    another node coordinates the job from now on, and why
  reconfigure    a planned move: a node leaving, a rebalance
  rebalance      a rebalance weighed and not done, and why
  nodes          too few nodes: waiting for joins, or oversubscribing
  output         a line a rank wrote to stdout (output-err: to stderr)
  app-failure    the program failed by itself
  finished       the job succeeded
  done           the last event: how the job ended
  internal-error a fault in the coordinator, reported rather than fatal

A task farm's also: task-done, task-failed, node-joined and farm-progress
(docs/api.md says what each carries).

With --follow, a stream that breaks is picked up where it broke, as in
'shoal logs --follow'.

Exit codes: 0 printed; 1 shoal could not read the events; 2 usage error;
4 the agent knows no job JOB.

Flags:
`

func eventsCmd(args []string, stdout, stderr io.Writer) int {
	var follow, asJSON bool
	c, rest, code := agentCommand("events", eventsUsage, 1, args, stdout, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&follow, "follow", false, "keep printing new events until the job ends")
		fs.BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	})
	if code >= 0 {
		return code
	}
	enc := json.NewEncoder(stdout)
	_, err := newJobStream(c, rest[0], follow, stderr).each(func(e job.Event) {
		if asJSON {
			enc.Encode(e)
			return
		}
		fmt.Fprintf(stdout, "%s  %-11s %s\n", e.Time.Format("15:04:05.000"), e.Type, e.Message)
	})
	if err != nil {
		return followFailed("events", rest[0], c, err, stderr)
	}
	return exitOK
}

const rebalanceUsage = `Usage: shoal rebalance [flags] JOB

Takes a checkpoint of JOB now and relaunches it from that checkpoint over every
live node, so that nodes that joined since its launch get ranks. No work is lost.
Returns once the job runs on the new layout.

The coordinator first weighs the rebalance: it refuses (exit status 1, saying why)
when the live nodes would not run the job faster, or when the time the new layout
would save over the rest of the run (estimated from the job's progress reports) is
less than a checkpoint plus a restart cost, as measured on this job. --force skips
that. To have joins used without asking, see 'shoal run --auto-rebalance'.

Exit codes: 0 the job runs on the new layout; 1 it does not (refused, saying
why, or the agent did not answer); 2 usage error; 4 the agent knows no job JOB;
5 JOB has ended already.

Flags:
`

func rebalanceCmd(args []string, stdout, stderr io.Writer) int {
	var timeout time.Duration
	var req api.RebalanceRequest
	c, rest, code := agentCommand("rebalance", rebalanceUsage, 1, args, stdout, stderr, func(fs *flag.FlagSet) {
		fs.DurationVar(&timeout, "timeout", 5*time.Minute, "give up waiting after this long")
		fs.BoolVar(&req.Force, "force", false, "rebalance even when it is estimated not to pay")
	})
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	j, err := c.Rebalance(ctx, rest[0], req)
	if err != nil {
		return jobRefused(ctx, c, "rebalance", rest[0], err, stderr)
	}
	var nodes []string
	for n, ranks := range j.Placement {
		nodes = append(nodes, fmt.Sprintf("%s:%d", n, len(ranks)))
	}
	sort.Strings(nodes)
	fmt.Fprintf(stdout, "job %s now runs on %s\n", j.ID, strings.Join(nodes, " "))
	return exitOK
}

// ownerName is how shoal jobs names a job's owner: the login name, else the uid;
// root for a job run as the agents' user.
func ownerName(o *job.Owner) string {
	switch {
	case o == nil:
		return "root"
	case o.Name != "":
		return o.Name
	}
	return strconv.Itoa(o.UID)
}

// describeRedundancy says how the job's checkpoints survive lost nodes, as
// --redundancy gives it.
func describeRedundancy(spec job.Spec) string {
	switch {
	case spec.Parity != nil:
		return fmt.Sprintf("rs:%d+%d (one copy of each shard, Reed–Solomon parity over groups of %d on %d other nodes)", spec.Parity.K, spec.Parity.M, spec.Parity.K, spec.Parity.M)
	case spec.Redundancy > 0:
		return fmt.Sprintf("copy:%d (each shard on %d nodes)", spec.Redundancy, spec.Redundancy)
	}
	return "copy (each shard on 2 nodes)"
}

// showJob prints one job: as JSON, or its placement and the planner's account.
func showJob(ctx context.Context, c *api.Client, id string, placement, traffic, asJSON bool, stdout, stderr io.Writer) int {
	j, err := c.Job(ctx, id)
	if errors.Is(err, errkind.NotFound) {
		fmt.Fprintf(stderr, "shoal jobs: no job %q known to the agent at %s\n", id, c.Addr())
		return exitNoJob
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal jobs: %s\n", errorLine(err))
		return exitFailure
	}
	if asJSON {
		json.NewEncoder(stdout).Encode(j)
		return exitOK
	}
	n := j.Ranks
	if n == 0 {
		n = j.Spec.Ranks
	}
	switch {
	case !j.Spec.Elastic():
		fmt.Fprintf(stdout, "job %s: %s, %d ranks\n", j.ID, j.State, n)
	case n == 0:
		fmt.Fprintf(stdout, "job %s: %s, elastic: %s\n", j.ID, j.State, j.Spec.RangeString())
	default:
		fmt.Fprintf(stdout, "job %s: %s, %d ranks (elastic: %s)\n", j.ID, j.State, n, j.Spec.RangeString())
	}
	fmt.Fprintln(stdout, jobTimes(j, time.Now()))
	switch {
	case j.Interval != nil:
		fmt.Fprintf(stdout, "checkpoints: %s\n", j.Interval.Describe())
	case j.Spec.CheckpointAuto:
		fmt.Fprintln(stdout, "checkpoints: auto, none reported yet")
	case j.Spec.Farm == nil:
		fmt.Fprintf(stdout, "checkpoints: %s\n", job.Interval{Every: j.Spec.CheckpointInterval}.Describe())
	}
	if j.Spec.Farm == nil {
		fmt.Fprintf(stdout, "redundancy: %s\n", describeRedundancy(j.Spec))
	}
	if d := j.Durable; d != nil {
		fmt.Fprintf(stdout, "durable: epoch %d kept in %s %s ago\n", d.Epoch, d.Location, elapsed(time.Since(d.At)))
	}
	if traffic {
		showTraffic(j, stdout)
	}
	if !placement {
		return exitOK
	}
	if len(j.Placement) == 0 {
		fmt.Fprintln(stdout, "not placed yet")
		return exitOK
	}
	names := make([]string, 0, len(j.Placement))
	for n := range j.Placement {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(stdout, "  %s: ranks %s\n", n, rankList(j.Placement[n]))
	}
	p := j.Plan
	if p == nil {
		return exitOK
	}
	knewTraffic, knewLinks := "assumed: neighbouring ranks talk most", "none measured: all taken as alike"
	if p.Traffic {
		knewTraffic = "the job's, measured while it ran (shoal jobs JOB --traffic)"
	}
	if p.Links {
		knewLinks = "measured (shoal nodes --links)"
	}
	fmt.Fprintf(stdout, "predicted per iteration: %.3g s (compute %.3g s, communication %.3g s); contiguous blocks: %.3g s\n",
		p.Compute+p.Comm, p.Compute, p.Comm, p.Blocks)
	fmt.Fprintf(stdout, "traffic: %s; links: %s\n", knewTraffic, knewLinks)
	fmt.Fprintf(stdout, "why: %s\n", p.Reason)
	return exitOK
}

// rankList renders sorted ranks as "0-3, 8, 10-11".
func rankList(ranks []int) string {
	rs := append([]int(nil), ranks...)
	sort.Ints(rs)
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(rs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// showTraffic prints a job's traffic profile, the busiest pairs first.
func showTraffic(j job.Job, stdout io.Writer) {
	t := j.Traffic
	if t == nil {
		fmt.Fprintln(stdout, "no traffic reported yet: every rank reports at each checkpoint (libshoal counts what it sends)")
		return
	}
	fmt.Fprintf(stdout, "traffic as of %s: %.0f%% of the ranks' time in MPI calls\n", t.Measured.Format("15:04:05"), 100*t.MPIFraction)
	if len(t.Flows) == 0 {
		fmt.Fprintln(stdout, "no rank sent another anything (point to point)")
		return
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANKS\tBYTES/S\tMESSAGES/S")
	for i, f := range t.Flows {
		if i == 20 {
			fmt.Fprintf(tw, "… %d more pairs\t\t\n", len(t.Flows)-i)
			break
		}
		fmt.Fprintf(tw, "%d-%d\t%s\t%.1f\n", f.From, f.To, job.Bytes(int64(f.Bytes))+"/s", f.Messages)
	}
	tw.Flush()
}

// rankCount is a job's rank count for people: its current run's, an elastic
// job's with its range ("4 of 2-16"), "-" for an elastic job not yet launched.
func rankCount(j job.Job) string {
	n := j.Ranks
	if n == 0 {
		n = j.Spec.Ranks
	}
	if !j.Spec.Elastic() {
		return strconv.Itoa(n)
	}
	lo, hi := j.Spec.Range()
	if n == 0 {
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	return fmt.Sprintf("%d of %d-%d", n, lo, hi)
}
