// Package coord runs jobs: it launches the real MPI through an engine, watches the
// job's checkpoint epochs, tells a lost rank from the program's own failure, and
// relaunches from the newest complete epoch when a rank is lost.
//
// The decisions are pure and tested on plain data, in the packages of what they
// decide about: a job's state changes only through its [job.Lifecycle]; what
// follows each outcome of a run is the [job.RestartPolicy]'s; which epochs are
// complete and which to restart from is the [epochs.Book]'s. The runner and the
// backends do the I/O around them.
//
// A job runs on one machine ([Run]) or over the cluster's nodes
// ([ClusterRun]); the job service of the node that leads the cluster
// (internal/jobservice) drives the latter, and keeps the job's [Record].
package coord

import (
	"context"
	"io"
	"time"

	"shoal/internal/job"
)

// Result is how a job ended.
type Result struct {
	State    job.State // succeeded, failed or cancelled
	ExitCode int       // the program's exit code when it ended by itself; 130 cancelled
	Restarts int
	// Exhausted is set when the job kept losing ranks, nodes, its launcher or its
	// coordinator and MaxRestarts ran out.
	Exhausted bool
	Reason    string // one line: why it ended
}

// Resume makes a job's loop begin as the relaunch of a job another coordinator
// ran, from the newest complete epoch of the book its backend was given. The
// relaunch counts as a restart (see [RestartPolicy]); the restart line begins
// with Why.
type Resume struct {
	Restarts int    // restarts the job had used before
	Why      string // "coordinator n1 lost"
	// At is when the job was lost, for the work lost since its epoch; zero: now.
	At time.Time
	// Lost is the node of the coordinator that was lost or left ("" when it was
	// this node): the job is not placed on it until membership declares it gone,
	// since a node that stopped leading is likely to be gone or cut off.
	Lost string
	// LeadMoved is set when the previous coordinator is alive and only lost the
	// lead (perhaps to this node and back): the relaunch does not count against
	// MaxRestarts.
	LeadMoved bool
	// Durable is set for a job that begins from an epoch kept outside the
	// cluster (job.Spec.ResumeEpoch): Why says where; no node was lost.
	Durable bool
	// Fenced, when not nil, is the fence of the job the new coordinator began
	// as its takeover began ([Fence]): the run waits for it, and fences only
	// the live nodes it did not ask.
	Fenced *Fencing
	// Fetched, when not nil, waits until the job's files the new coordinator
	// began fetching into its cache are there, or could not be, and says why
	// not: staging, which sends them from this node, calls it first.
	Fetched func(context.Context) error
}

// Output is where a job's rank output and events go. Events must be safe to call
// from several goroutines; it is never called after Run returns.
type Output struct {
	Stdout io.Writer // ranks' stdout, each line prefixed "[rank] "
	Stderr io.Writer // ranks' stderr, likewise
	Events func(job.Event)
}

// Done is how r ended, as the job's done event carries it: a job that did not
// succeed and has no exit code of its own gets 1.
func (r Result) Done() job.Done {
	code := r.ExitCode
	if r.State != job.Succeeded && code == 0 {
		code = 1
	}
	return job.Done{State: job.State(r.State), ExitCode: code, Reason: r.Reason, Exhausted: r.Exhausted}
}
