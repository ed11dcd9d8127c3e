package job

import (
	"encoding/json"
	"time"
)

// FarmProgress is how far a task farm has come.
type FarmProgress struct {
	Total   int `json:"total"`
	Done    int `json:"done"`    // results stored
	Failed  int `json:"failed"`  // given up after their retries
	Running int `json:"running"` // on nodes now, started or waiting for a core
	// PerNode counts the tasks each node finished in this run.
	PerNode map[string]int `json:"per_node,omitempty"`
	// Rate is tasks done per second over the run so far.
	Rate float64 `json:"rate,omitempty"`
}

// TaskDone is the data of a farm's "task-done" event: one task's result is
// stored and can be read with GET /v1/results/{job}/{task}.
type TaskDone struct {
	Task    int      `json:"task"`
	Node    string   `json:"node"` // the node that ran it
	Size    int64    `json:"size"`
	SHA256  string   `json:"sha256"`
	Holders []string `json:"holders"`
	Seconds float64  `json:"seconds"`
}

// TaskFailed is the data of a farm's "task-failed" event: a run of a task
// exited non-zero by itself; Again tells whether it runs again.
type TaskFailed struct {
	Task     int    `json:"task"`
	Node     string `json:"node"`
	ExitCode int    `json:"exit_code"`
	Attempts int    `json:"attempts"`
	Again    bool   `json:"again"`
}

// Job is a job as the coordinator reports it.
type Job struct {
	ID          string    `json:"id"`
	State       State     `json:"state"`
	Spec        Spec      `json:"spec"`
	Coordinator string    `json:"coordinator"` // node that runs the job's coordinator
	Submitted   time.Time `json:"submitted"`
	// Started is when the job first ran (its state became running); zero
	// until then. Restarts and moves keep it.
	Started   time.Time        `json:"started,omitzero"`
	Ended     time.Time        `json:"ended,omitzero"`
	Placement map[string][]int `json:"placement,omitempty"` // node → ranks
	// Ranks is the rank count of the current run: the spec's, or for an
	// elastic job the count the coordinator chose last; 0 before the first
	// launch.
	Ranks    int     `json:"ranks,omitempty"`
	Epoch    uint64  `json:"epoch,omitempty"` // newest complete checkpoint epoch
	Restarts int     `json:"restarts"`
	ExitCode *int    `json:"exit_code,omitempty"`
	Reason   string  `json:"reason,omitempty"` // one line, why it failed or restarted
	Progress float64 `json:"progress,omitempty"`
	// Exhausted is set on a failed job whose ranks kept dying until
	// MaxRestarts ran out (`shoal run` exits 3), as opposed to one that
	// failed by itself or could not run.
	Exhausted bool `json:"exhausted,omitzero"`
	// Avoid lists the nodes a run of the job found lost (they stopped answering,
	// or were leaving) that membership has yet to declare gone: the job is not
	// placed on them, by this coordinator or the next one.
	Avoid []string `json:"avoid,omitempty"`
	// RankLimits are the most ranks of the job each node may run, learned from
	// nodes that killed some of its ranks while they stayed up ([RankLimits]);
	// every placement keeps to them, a new coordinator's included.
	RankLimits RankLimits `json:"rank_limits,omitempty"`
	// Farm is a task farm's progress; nil for an MPI job.
	Farm *FarmProgress `json:"farm,omitempty"`
	// Plan says why the ranks are where they are, and what the planner
	// predicted of that layout; nil before the first placement.
	Plan *Plan `json:"plan,omitempty"`
	// Interval is the time between the job's checkpoints as its rank 0 last
	// reported it, with why when libshoal chose it; nil until reported.
	Interval *Interval `json:"interval,omitempty"`
	// Traffic is the job's traffic as its ranks reported it (libshoal counts
	// what each rank sends), kept so that every placement uses it, a new
	// coordinator's included; nil until every rank has reported.
	Traffic *TrafficProfile `json:"traffic,omitempty"`
	// Handover is set while a job waits for its next coordinator after the
	// last one, leaving, stopped its run at a checkpoint; nil otherwise.
	Handover *Handover `json:"handover,omitempty"`
	// Durable is the newest epoch of the job kept outside the cluster (shoal
	// run --durable), as its keeper last reported it; nil when none was.
	Durable *Durable `json:"durable,omitempty"`
	// CoordKeeps says that the job's coordinators copy its newest complete
	// epochs to Spec.Durable: its first one's agent had credentials for the
	// store. Unset with Spec.Durable set, they do not, and an attached shoal
	// run copies them as it does in a Slurm allocation: one copier a job.
	CoordKeeps bool `json:"coord_keeps,omitzero"`
}

// Durable says that epoch Epoch of a job is kept at Location (a directory, or
// s3://BUCKET/PREFIX: never a credential) since At: the Data of a "durable"
// event, whose time is At.
type Durable struct {
	Epoch    uint64 `json:"epoch"`
	Location string `json:"location"`
	// Endpoint is the object store's URL when shoal run named one
	// (--durable-endpoint); "" otherwise.
	Endpoint string    `json:"endpoint,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// Apply records in j what event e says of the job: the state a transition
// moves it to (only a [Lifecycle] makes events that carry one, so the
// lifecycle is the one writer of the job's state) and when it first ran, the
// restarts used, the newest complete epoch, the newest epoch kept outside the
// cluster.
func (j *Job) Apply(e Event) {
	if e.State != "" {
		j.State = e.State
	}
	if e.State == Running && j.Started.IsZero() {
		j.Started = e.Time
	}
	if e.State == Restarting {
		j.Restarts = e.Restarts
	}
	if e.Type == EventEpoch {
		j.Epoch = e.Epoch
	}
	if e.Type == EventDurable {
		var d Durable
		if json.Unmarshal(e.Data, &d) == nil && d.Epoch > 0 {
			d.At = e.Time
			j.Durable = &d
		}
	}
}

// Handover says where a coordinator that left the cluster (shoal leave of the
// node that leads) stopped a job's run for the next coordinator: after epoch
// Epoch, taken at At, with the ranks held still since, so that a relaunch from
// Epoch loses no work.
type Handover struct {
	From  string    `json:"from"` // the node that coordinated the job and left
	Epoch uint64    `json:"epoch"`
	At    time.Time `json:"at"` // when the epoch was taken (its shards' creation time)
}

// TrafficProfile is what a job's ranks send each other and compute, per
// second of a run.
type TrafficProfile struct {
	// Flows are the pairs of ranks that exchange data, both directions added
	// (From < To), most bytes first; at most [MaxFlows].
	Flows []Flow `json:"flows"`
	// Ranks is the rank count of the run the profile was learned from (0,
	// a profile recorded before counts changed: the job's count).
	Ranks int `json:"ranks,omitempty"`
	// Work is one rank's compute per second, in loops of a node's measured
	// speed: the time outside MPI calls times the speed of its node.
	Work float64 `json:"work"`
	// MPIFraction is the share of the ranks' time spent in point-to-point MPI
	// calls, averaged over the ranks.
	MPIFraction float64   `json:"mpi_fraction"`
	Measured    time.Time `json:"measured"`
}

// Interval is the time between a job's checkpoints, as libshoal's
// rank 0 chose it (the job directory's interval file, docs/launcher-protocol.md).
type Interval struct {
	Every Duration `json:"every"` // 0: no interval checkpoints
	// Auto is set when libshoal chose it: Young/Daly's optimum for the
	// checkpoints' Cost and the job's MTBF (docs/libshoal.md).
	Auto bool `json:"auto,omitzero"`
	// Cost is what a checkpoint blocked rank 0, a weighted mean of the run's
	// checkpoints (0 before the first).
	Cost Duration `json:"cost,omitzero"`
	// MTBF is the job's mean time between failures the launch gave it (auto only).
	MTBF Duration `json:"mtbf,omitzero"`
	// Record is what the MTBF rests on: the cluster's failure record when the
	// run was launched, "2 nodes failed in 5h0m0s of node time" (set by the
	// coordinator, in the job's record).
	Record string `json:"record,omitempty"`
}

// MaxFlows bounds a [TrafficProfile]: the busiest pairs are kept.
const MaxFlows = 4096

// Flow is the traffic between two ranks, per second.
type Flow struct {
	From     int     `json:"from"`
	To       int     `json:"to"`
	Bytes    float64 `json:"bytes"`
	Messages float64 `json:"messages"`
}

// Plan is the planner's account of a job's placement (internal/place).
type Plan struct {
	Reason string `json:"reason"` // one line
	// Compute and Comm are the predicted time of one iteration on the slowest
	// node, in seconds: its compute and its communication.
	Compute float64 `json:"compute"`
	Comm    float64 `json:"comm"`
	// Blocks is the predicted time of the plain layout (contiguous blocks in
	// proportion to cores × speed) for comparison.
	Blocks float64 `json:"blocks"`
	// Traffic says the traffic was the job's measured profile; otherwise the
	// planner assumed neighbouring ranks exchange the most. Links says the
	// links were measured; otherwise all were taken as alike.
	Traffic bool `json:"traffic,omitzero"`
	Links   bool `json:"links,omitzero"`
}

// Done is the data of a job's last event ("done"): how it ended.
type Done struct {
	State    State  `json:"state"`
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason,omitempty"`
	// Exhausted is set when ranks kept dying and MaxRestarts ran out: `shoal run`
	// exits 3 then, on a cluster as on one machine.
	Exhausted bool `json:"exhausted,omitzero"`
}

// RanksOr is the count p was learned at: its own, or for a profile recorded
// without one, the job's current count.
func (p *TrafficProfile) RanksOr(current int) int {
	if p.Ranks > 0 {
		return p.Ranks
	}
	return current
}
