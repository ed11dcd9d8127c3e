package job

import (
	"fmt"
	"sort"
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
	// UserCancelled: the user cancelled the job.
	UserCancelled
	// Resumed: the job begins from an epoch kept outside the cluster (shoal run
	// --durable), after a run elsewhere ended. Nothing of this job was lost here,
	// so it does not count against MaxRestarts.
	Resumed
	// CopyCorrupt: a copy of a shard the relaunch counted on failed verification
	// as it was staged; counted no more, the job is relaunched from the newest
	// epoch still whole. Nothing was lost, and every such relaunch counts one
	// copy fewer, so it does not count against MaxRestarts.
	CopyCorrupt
	// RanksHung: the run's ranks made no snapshot call for longer than the job's
	// hang bound, a rank of them idle ([Hung]); the run is stopped and
	// relaunched from its newest complete epoch, as after a lost rank.
	RanksHung
)

// Outcome is what happened to a job's run, as the restart policy weighs it.
type Outcome struct {
	Kind   OutcomeKind
	Rank   int // AppFailed, RankKilled, RanksHung: the rank that ended the run
	Code   int // AppFailed: the rank's exit code; LauncherFailed: the launcher's status
	Signal int // RankKilled
	// Detail says the rest in words: NodeLost "node n3 lost (no answer for 4.4 s)";
	// Move "node n3 leaving"; LauncherFailed the launcher's last line;
	// CoordinatorLost "coordinator n1 lost"; StartFailed the error; RanksHung
	// [Hang.String].
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
	case UserCancelled:
		return "cancelled"
	}
	return o.Detail
}

// Decision is what a job does after an [Outcome].
type Decision struct {
	// State is the job's next state: succeeded, failed or cancelled end it;
	// restarting and moving relaunch it.
	State  State
	Reason string // one line, for people
	// Restart is set when the relaunch counts against the job's MaxRestarts.
	Restart bool
	// Exhausted is set when the job fails because MaxRestarts ran out (`shoal
	// run` then exits 3).
	Exhausted bool
	// ExitCode is the program's exit code for AppFailed, 130 for UserCancelled.
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
		return Decision{State: Succeeded, Reason: o.String()}
	case AppFailed:
		return Decision{State: Failed, ExitCode: o.Code,
			Reason: o.String() + "; not restarting (the program failed by itself)"}
	case UserCancelled:
		return Decision{State: Cancelled, Reason: o.String(), ExitCode: 130}
	case StartFailed:
		return Decision{State: Failed, Reason: o.String()}
	case Move:
		return Decision{State: Moving, Reason: o.String() + ": checkpointing now, then relaunching"}
	case LeadMoved:
		return Decision{State: Restarting, Reason: o.String() + "; relaunching (not counted against --max-restarts)"}
	case Resumed:
		return Decision{State: Restarting, Reason: o.String() + "; relaunching (not counted against --max-restarts)"}
	case CopyCorrupt:
		return Decision{State: Restarting, Reason: o.String() + "; relaunching from the newest epoch still whole (not counted against --max-restarts)"}
	case RankKilled, NodeLost, LauncherFailed, CoordinatorLost, RanksHung:
		if used >= p.MaxRestarts {
			return Decision{State: Failed, Exhausted: true,
				Reason: fmt.Sprintf("%s; giving up after %s (--max-restarts)", o, Plural(used, "restart"))}
		}
		return Decision{State: Restarting, Restart: true,
			Reason: fmt.Sprintf("%s; restart %d of %d", o, used+1, p.MaxRestarts)}
	}
	return Decision{State: Failed, Reason: fmt.Sprintf("unknown outcome %d: %s", o.Kind, o)}
}

// MaxUnlaunched bounds the relaunches in a row that nodes lost while staging
// may interrupt without counting against MaxRestarts: each excludes the nodes
// lost, so more than this means nodes that keep coming back and going.
const MaxUnlaunched = 8

// Restarts is a job's count of restarts under its policy: what follows each
// outcome of its runs is decided through it, and it counts the restarts the
// decisions use, so that no caller keeps a count of its own. It is not safe
// for concurrent use (a job's loop is its one user).
type Restarts struct {
	Policy RestartPolicy
	// Used is the restarts counted against MaxRestarts so far: those of a job
	// another coordinator ran before, to begin with.
	Used int
	// unlaunched counts the relaunches in a row interrupted while staged.
	unlaunched int
}

// Decide returns what follows o, and counts a restart when it is one. A loss
// that interrupted a relaunch before it launched (unlaunched: the second of
// two nodes lost at once, found while the first loss's relaunch was staged)
// is the same restart decided again, not one more, up to MaxUnlaunched times
// in a row.
func (r *Restarts) Decide(o Outcome, unlaunched bool) Decision {
	again := unlaunched && r.Used > 0 && r.unlaunched < MaxUnlaunched
	used := r.Used
	if again {
		used--
		r.unlaunched++
	} else {
		r.unlaunched = 0
	}
	d := r.Policy.Decide(o, used)
	if d.Restart && !again {
		r.Used++
	}
	return d
}

// causes names each outcome that relaunches a job, for the data of the event
// of its transition into restarting ([RestartCause]) and the reason label of
// the restart metrics.
var causes = map[OutcomeKind]string{
	RankKilled:      "rank_killed",
	NodeLost:        "node_lost",
	LauncherFailed:  "launcher_failed",
	CoordinatorLost: "coordinator_lost",
	LeadMoved:       "lead_moved",
	Resumed:         "resumed",
	CopyCorrupt:     "copy_corrupt",
}

// Cause names k in a word ("rank_killed"), "" for an outcome that never
// relaunches a job.
func (k OutcomeKind) Cause() string { return causes[k] }

// Causes lists every [OutcomeKind.Cause], sorted.
func Causes() []string {
	out := make([]string, 0, len(causes))
	for _, c := range causes {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// RestartCause is the Data of the event of a job's transition into
// restarting: what ended the run, and whether the relaunch counts against
// MaxRestarts.
type RestartCause struct {
	Cause   string `json:"cause"` // an [OutcomeKind.Cause]
	Counted bool   `json:"counted,omitzero"`
}
