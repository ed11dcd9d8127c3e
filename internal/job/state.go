package job

// State is a job's place in the coordinator's state machine (the
// coordinator's lifecycle lists the transitions between them).
type State string

// Job states.
const (
	Pending State = "pending"
	// Staging: placing the ranks, fencing earlier runs, copying the job's
	// files and the shards of the epoch a relaunch starts from.
	Staging State = "staging"
	Running State = "running"
	// Moving: a planned relaunch elsewhere (a node leaving, a rebalance): the
	// ranks checkpoint, then the job is staged again; no work is lost.
	Moving State = "moving"
	// Restarting: recovering from a loss (a rank, a node, the launcher or the
	// coordinator): choosing the epoch to restart from.
	Restarting State = "restarting"
	Succeeded  State = "succeeded"
	Failed     State = "failed"
	Cancelled  State = "cancelled"
)
