package coord

import (
	"fmt"

	"shoal/internal/api"
)

// OutcomeKind is what ended a run of a job, or interrupted the job.
type OutcomeKind int

const (
	// RanksSucceeded: the launcher and every rank exited 0.
	RanksSucceeded OutcomeKind = iota + 1
	// AppFailed: a rank exited non-zero by itself; the program failed, and would
	// fail again.
	AppFailed
	// RankKilled: a rank died of a signal nobody in the launcher sent.
	RankKilled
	// NodeLost: a node of the run is gone.
	NodeLost
	// Move: a planned relaunch, a node leaving or a rebalance; the ranks
	// checkpoint first, so no work is lost.
	Move
	// LauncherFailed: the launcher (mpirun) exited non-zero and no rank said
	// why, as after an MPI daemon died (status 205).
	LauncherFailed
	// CoordinatorLost: the node coordinating the job was lost; another resumes it.
	CoordinatorLost
	// LeadMoved: the node coordinating the job stopped leading the cluster but
	// is alive (it was too slow to keep the lead, or was cut off from a
	// majority); the new leader, perhaps the same node again, relaunches the job
	// from its newest complete epoch. No node of the job was lost, so the
	// relaunch does not count against MaxRestarts.
	LeadMoved
	// StartFailed: the run could not be placed, staged or started, or no epoch
	// to restart from survives. Trying again would fail the same way.
	StartFailed
	// Cancelled: the user cancelled the job.
	Cancelled
	// Resumed: the job begins from an epoch kept outside the cluster (shoal run
	// --durable), after a run elsewhere ended. Nothing of this job was lost here,
	// so it does not count against MaxRestarts.
	Resumed
)

// Outcome is what happened to a job's run, as the restart policy weighs it.
type Outcome struct {
	Kind   OutcomeKind
	Rank   int // AppFailed, RankKilled: the rank that ended the run
	Code   int // AppFailed: the rank's exit code; LauncherFailed: the launcher's status
	Signal int // RankKilled
	// Detail says the rest in words: NodeLost "node n3 lost (no answer for 4.4 s)";
	// Move "node n3 leaving"; LauncherFailed the launcher's last line;
	// CoordinatorLost "coordinator n1 lost"; StartFailed the error.
	Detail string
}

// String says what happened, in one line: "rank 2 killed by signal 9".
func (o Outcome) String() string {
	switch o.Kind {
	case RanksSucceeded:
		return "every rank finished"
	case AppFailed:
		return fmt.Sprintf("rank %d exited with code %d", o.Rank, o.Code)
	case RankKilled:
		return fmt.Sprintf("rank %d killed by signal %d", o.Rank, o.Signal)
	case LauncherFailed:
		return fmt.Sprintf("mpirun exited with status %d and no rank said why: %s", o.Code, o.Detail)
	case Cancelled:
		return "cancelled"
	}
	return o.Detail
}

// Decision is what a job does after an [Outcome].
type Decision struct {
	// State is the job's next state: succeeded, failed or cancelled end it;
	// restarting and moving relaunch it.
	State  api.JobState
	Reason string // one line, for people
	// Restart is set when the relaunch counts against the job's MaxRestarts.
	Restart bool
	// Exhausted is set when the job fails because MaxRestarts ran out (`shoal
	// run` then exits 3).
	Exhausted bool
	// ExitCode is the program's exit code for AppFailed, 130 for Cancelled.
	ExitCode int
}

// RestartPolicy decides what a job does after each outcome of its runs: a loss
// (a rank, a node, the launcher or the coordinator) relaunches it from its newest
// complete epoch up to MaxRestarts times; a planned move relaunches it without
// counting; the program's own failure, a failure to start, success and
// cancellation end it.
type RestartPolicy struct {
	MaxRestarts int // relaunches after losses allowed over the job's life
}

// Decide returns what follows o for a job that has been restarted used times.
// It is a pure function of its arguments.
func (p RestartPolicy) Decide(o Outcome, used int) Decision {
	switch o.Kind {
	case RanksSucceeded:
		return Decision{State: api.JobSucceeded, Reason: o.String()}
	case AppFailed:
		return Decision{State: api.JobFailed, ExitCode: o.Code,
			Reason: o.String() + "; not restarting (the program failed by itself)"}
	case Cancelled:
		return Decision{State: api.JobCancelled, Reason: o.String(), ExitCode: 130}
	case StartFailed:
		return Decision{State: api.JobFailed, Reason: o.String()}
	case Move:
		return Decision{State: api.JobMoving, Reason: o.String() + ": checkpointing now, then relaunching"}
	case LeadMoved:
		return Decision{State: api.JobRestarting, Reason: o.String() + "; relaunching (not counted against --max-restarts)"}
	case Resumed:
		return Decision{State: api.JobRestarting, Reason: o.String() + "; relaunching (not counted against --max-restarts)"}
	case RankKilled, NodeLost, LauncherFailed, CoordinatorLost:
		if used >= p.MaxRestarts {
			return Decision{State: api.JobFailed, Exhausted: true,
				Reason: fmt.Sprintf("%s; giving up after %s (--max-restarts)", o, plural(used, "restart"))}
		}
		return Decision{State: api.JobRestarting, Restart: true,
			Reason: fmt.Sprintf("%s; restart %d of %d", o, used+1, p.MaxRestarts)}
	}
	return Decision{State: api.JobFailed, Reason: fmt.Sprintf("unknown outcome %d: %s", o.Kind, o)}
}
