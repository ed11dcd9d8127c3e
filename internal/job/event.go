package job

import (
	"encoding/json"
	"time"
)

// Event is one step of a job: a line of `shoal run`'s output, of GET
// /v1/jobs/{id}/events, and of the job's record in the job store, the same type
// everywhere. The coordinator fills Type, Message and the typed fields that
// apply; the job store numbers it (Seq).
type Event struct {
	Seq  uint64    `json:"seq"` // 1, 2, …: resume a stream with ?from=Seq+1
	Time time.Time `json:"time"`
	Job  string    `json:"job"`
	Type string    `json:"type"` // one of the Event* types
	// State is set on the event of a transition (see [Lifecycle]): the job's
	// new state.
	State State `json:"state,omitempty"`
	// Epoch is the epoch an "epoch" event says complete, the one a "restart"
	// or "launch" event starts from, and so on; 0 when none.
	Epoch uint64 `json:"epoch,omitempty"`
	// Rank is the rank a "rank-lost" or "app-failure" event is about.
	Rank *int `json:"rank,omitempty"`
	// Restarts is set on the event of a transition into restarting: the
	// restarts counted against MaxRestarts so far, this one included.
	Restarts int             `json:"restarts,omitempty"`
	Message  string          `json:"message,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"` // type-specific details
}

// NewEvent is an event of type typ saying msg, now, with data (nil: none)
// encoded as its Data.
func NewEvent(typ, msg string, data any) Event {
	e := Event{Time: time.Now(), Type: typ, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return e
}

// RankOf returns a pointer to rank, for [Event.Rank].
func RankOf(rank int) *int { return &rank }

// Event types.
const (
	EventState      = "state" // a transition no other type says more about
	EventStage      = "stage" // the job's files copied to the nodes lacking them
	EventLaunch     = "launch"
	EventEpoch      = "epoch"          // an epoch became complete
	EventEpochBad   = "epoch-bad"      // an epoch's shards failed verification
	EventRankLost   = "rank-lost"      // a rank died of a signal
	EventHung       = "hung"           // the run's ranks stopped making calls: [Hang]'s line
	EventNodeLost   = "node-lost"      // a node of the run is gone
	EventNodeFault  = "node-fault"     // a node of the run is up but cannot store checkpoints
	EventReconfig   = "reconfigure"    // a planned relaunch begins: a node leaving, a rebalance
	EventRestart    = "restart"        // relaunching from an epoch
	EventProgress   = "progress"       // the program reported progress
	EventAppFailure = "app-failure"    // the program failed by itself
	EventNodes      = "nodes"          // too few nodes: waiting for joins, or oversubscribing
	EventRebalance  = "rebalance"      // a rebalance weighed and not done
	EventInterval   = "interval"       // libshoal chose a new checkpoint interval (auto)
	EventDurable    = "durable"        // an epoch was kept outside the cluster (shoal run --durable): [Durable] as Data
	EventResize     = "resize"         // an elastic job's rank count changes: [Resize] as Data
	EventDone       = "finished"       // the run loop's last word (local runs)
	EventEnd        = "done"           // the job's end in its record: [Done] as Data
	EventInternal   = "internal-error" // a bug in the coordinator, reported rather than fatal
	// EventShardCorrupt names a node's copy of a rank's shard found corrupt,
	// and what was done: repaired from another copy, or none good is left.
	EventShardCorrupt = "shard-corrupt"
	// EventCoordinator says that another node coordinates a job from now on.
	EventCoordinator = "coordinator"
	EventOutput      = "output"     // a line a rank wrote on stdout
	EventOutputErr   = "output-err" // a line a rank wrote on stderr

	// A task farm's.
	EventTaskDone     = "task-done"     // a task's result is stored: [TaskDone]
	EventTaskFailed   = "task-failed"   // a run of a task exited non-zero: [TaskFailed]
	EventFarmProgress = "farm-progress" // done / total, rate, time left, tasks per node
	EventNodeJoined   = "node-joined"   // a node began taking the farm's tasks
)

// Resize is the Data of a "resize" event: an elastic job's next run has To
// ranks where its last had From, restoring from Epoch (0: from the
// beginning), for Why ("one per core on n1, n2").
type Resize struct {
	From  int    `json:"from"`
	To    int    `json:"to"`
	Epoch uint64 `json:"epoch,omitempty"`
	Why   string `json:"why"`
}

// Staged is the Data of the "stage" event that says which job files were
// copied to the nodes of a launch: their bytes, summed over the nodes.
type Staged struct {
	Bytes int64 `json:"bytes"`
}

// EpochStats is the Data of an "epoch" event that says an epoch complete:
// what its checkpoint cost the cluster. Copies count those the coordinator
// made of the epoch's shards (not the parity rows).
type EpochStats struct {
	// Taken is when the checkpoint was taken (its newest shard's creation).
	Taken time.Time `json:"taken,omitzero"`
	// Bytes is the size of the epoch's shards, one copy each: what the
	// ranks wrote.
	Bytes int64 `json:"bytes,omitempty"`
	// Copied is the size of the copies made; Sent what their senders sent
	// (less when some went as their changes since an earlier epoch); Wire
	// what crossed the network (less again when compressed).
	Copied int64 `json:"copied,omitempty"`
	Sent   int64 `json:"sent,omitempty"`
	Wire   int64 `json:"wire,omitempty"`
}
