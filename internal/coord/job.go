// Package coord runs jobs: it launches the real MPI through an engine, watches the
// job's checkpoint epochs, tells a lost rank from the program's own failure, and
// relaunches from the newest complete epoch when a rank is lost.
//
// The decisions are pure and tested on plain data: a job's state changes only
// through its [Lifecycle]; what follows each outcome of a run is the
// [RestartPolicy]'s; which epochs are complete and which to restart from is the
// [EpochBook]'s. The runner and the backends do the I/O around them.
package coord

import (
	"errors"
	"fmt"
	"io"
	"time"

	"shoal/internal/api"
)

// Errors a job spec can fail validation with.
var (
	ErrBadSpec = errors.New("coord: invalid job")
)

// Spec is what the user asked to run.
type Spec struct {
	// ID names the job in paths and shards: see [api.ValidJobID].
	ID      string
	NRanks  int
	Program string   // absolute path of an executable file
	Args    []string // the program's arguments
	Workdir string   // where ranks run
	Env     []string // extra KEY=VALUE for every rank
	// CkptInterval is the time between checkpoints libshoal takes; 0 turns interval
	// checkpoints off (the program may still call shoal_checkpoint).
	CkptInterval time.Duration
	// CkptAuto has libshoal choose the interval (SHOAL_CKPT_INTERVAL=auto) from
	// the checkpoints' cost and the job's mean time between failures, which the
	// backend gives it (SHOAL_MTBF); CkptInterval is then 0.
	CkptAuto bool
	// NodeMTBF is each node's mean time between failures as the user gives it
	// (--mtbf), for CkptAuto; 0 takes the cluster's failure record's estimate.
	NodeMTBF time.Duration
	// MaxRestarts bounds how often a job is relaunched after losing ranks.
	MaxRestarts int
	// Traffic has libshoal count what the ranks send (docs/traffic.md); jobs
	// kept out of the planner (--no-replan) do not, as nothing reads it.
	Traffic bool
}

// Validate reports the first problem with s, naming the field and the value.
func (s Spec) Validate() error {
	switch {
	case !api.ValidJobID(s.ID):
		return fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadSpec, s.ID)
	case s.NRanks < 1:
		return fmt.Errorf("%w: ranks = %d: need at least 1", ErrBadSpec, s.NRanks)
	case s.NRanks > api.MaxRanks:
		return fmt.Errorf("%w: ranks = %d: at most %d", ErrBadSpec, s.NRanks, api.MaxRanks)
	case s.Program == "":
		return fmt.Errorf("%w: no program", ErrBadSpec)
	case s.CkptInterval < 0:
		return fmt.Errorf("%w: checkpoint interval %v is negative", ErrBadSpec, s.CkptInterval)
	case s.CkptAuto && s.CkptInterval != 0:
		return fmt.Errorf("%w: checkpoint interval %v and auto: want one of them", ErrBadSpec, s.CkptInterval)
	case s.MaxRestarts < 0:
		return fmt.Errorf("%w: max restarts = %d is negative", ErrBadSpec, s.MaxRestarts)
	case s.NodeMTBF < 0:
		return fmt.Errorf("%w: mtbf %v is negative", ErrBadSpec, s.NodeMTBF)
	case s.NodeMTBF > 0 && !s.CkptAuto:
		return fmt.Errorf("%w: mtbf %v is for an automatic checkpoint interval, not %v", ErrBadSpec, s.NodeMTBF, s.CkptInterval)
	}
	return nil
}

// Event is one step of a job, for `shoal run`'s output and the job's event stream.
type Event struct {
	Time time.Time `json:"time"`
	Job  string    `json:"job"`
	Kind string    `json:"kind"` // see the Event* constants
	// State is set on the event of a transition (see [Lifecycle]): the job's
	// new state.
	State   api.JobState `json:"state,omitempty"`
	Epoch   uint64       `json:"epoch,omitempty"`
	Rank    int          `json:"rank,omitempty"`
	Message string       `json:"message"`
	// Restarts is set on the event of a transition into restarting: the
	// restarts counted against MaxRestarts so far, this one included.
	Restarts int `json:"restarts,omitempty"`
}

// Event kinds.
const (
	EventState      = "state" // a transition no other kind says more about
	EventStage      = "stage" // the job's files copied to the nodes lacking them
	EventLaunch     = "launch"
	EventEpoch      = "epoch"       // an epoch became complete
	EventEpochBad   = "epoch-bad"   // an epoch's shards failed verification
	EventRankLost   = "rank-lost"   // a rank died of a signal
	EventNodeLost   = "node-lost"   // a node of the run is gone
	EventNodeFault  = "node-fault"  // a node of the run is up but cannot store checkpoints
	EventReconfig   = "reconfigure" // a planned relaunch begins: a node leaving, a rebalance
	EventRestart    = "restart"     // relaunching from an epoch
	EventProgress   = "progress"    // the program reported progress
	EventAppFailure = "app-failure" // the program failed by itself
	EventNodes      = "nodes"       // too few nodes: waiting for joins, or oversubscribing
	EventRebalance  = "rebalance"   // a rebalance weighed and not done
	EventInterval   = "interval"    // libshoal chose a new checkpoint interval (auto)
	EventDone       = "finished"
	EventInternal   = "internal-error" // a bug in the coordinator, reported rather than fatal
)

// Result is how a job ended.
type Result struct {
	State    api.JobState // succeeded, failed or cancelled
	ExitCode int          // the program's exit code when it ended by itself; 130 cancelled
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
	// Lost is the node of the coordinator that was lost ("" when it was this
	// node): the job is not placed on it until membership declares it gone, since
	// a node that stopped leading is likely to be gone or cut off.
	Lost string
	// LeadMoved is set when the previous coordinator is alive and only lost the
	// lead (perhaps to this node and back): the relaunch does not count against
	// MaxRestarts.
	LeadMoved bool
	// Durable is set for a job that begins from an epoch kept outside the
	// cluster (api.JobSpec.ResumeEpoch): Why says where; no node was lost.
	Durable bool
}

// Output is where a job's rank output and events go. Events must be safe to call
// from several goroutines; it is never called after Run returns.
type Output struct {
	Stdout io.Writer // ranks' stdout, each line prefixed "[rank] "
	Stderr io.Writer // ranks' stderr, likewise
	Events func(Event)
}
