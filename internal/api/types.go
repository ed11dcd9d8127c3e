package api

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"
)

// Health is the answer of GET /v1/health, the one unauthenticated route.
type Health struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Node names this run of the agent, NAME/RUN (RUN: 16 hex digits, new at
	// every start): the X-Shoal-Node value its other routes accept.
	Node string `json:"node"`
	// User is the user the agent runs as, and so the jobs that name no owner
	// (JobSpec.Owner): root, usually.
	User *Owner `json:"user,omitempty"`
}

// Node is one cluster member as GET /v1/nodes reports it.
type Node struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"` // gossip address, host:port
	API   string `json:"api"`  // API address, host:port
	Cores int    `json:"cores"`
	// CPUs is the CPU time the node's ranks may use together, in cores, when a
	// quota gives them less than Cores whole cores; absent: Cores.
	CPUs   float64           `json:"cpus,omitempty"`
	Speed  uint64            `json:"speed"` // single-core loop iterations per second; compare between nodes
	Arch   string            `json:"arch"`
	OS     string            `json:"os"`
	Labels map[string]string `json:"labels,omitempty"`
	// State is alive, suspect, dead or left; Since is when it began, as seen
	// by the answering node.
	State   string    `json:"state"`
	Since   time.Time `json:"since"`
	RTT     Duration  `json:"rtt,omitzero"`     // last direct probe from the answering node
	Leaving bool      `json:"leaving,omitzero"` // announced it is about to leave
	Local   bool      `json:"local,omitzero"`   // the answering node itself
	// Role is the node's part in the job store as the answering node knows it:
	// "leader" (coordinates every job), "voter", "follower" (keeps a replica
	// without voting), or "" (no part).
	Role string `json:"role,omitempty"`
	// Ranks is how many ranks of running jobs the node hosts, whichever node
	// coordinates them: the node announces it with its metadata (the sum of
	// its launch grants' ranks), so every node's answer shows every node's.
	Ranks int `json:"ranks"`
}

// NodeList is the answer of GET /v1/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// LeaveRequest is the optional body of POST /v1/leave.
type LeaveRequest struct {
	// Timeout bounds the whole leave, including checkpointing the node's jobs;
	// 0 means the agent's default.
	Timeout Duration `json:"timeout,omitzero"`
}

// LeaveResponse is the answer of POST /v1/leave, sent once the node has left.
type LeaveResponse struct {
	Name  string `json:"name"`
	State string `json:"state"` // "left"
}

// JobState is a job's place in the coordinator's state machine (the
// coordinator's lifecycle lists the transitions between them).
type JobState string

// Job states.
const (
	JobPending JobState = "pending"
	// JobStaging: placing the ranks, fencing earlier runs, copying the job's
	// files and the shards of the epoch a relaunch starts from.
	JobStaging JobState = "staging"
	JobRunning JobState = "running"
	// JobMoving: a planned relaunch elsewhere (a node leaving, a rebalance): the
	// ranks checkpoint, then the job is staged again; no work is lost.
	JobMoving JobState = "moving"
	// JobRestarting: recovering from a loss (a rank, a node, the launcher or the
	// coordinator): choosing the epoch to restart from.
	JobRestarting JobState = "restarting"
	JobSucceeded  JobState = "succeeded"
	JobFailed     JobState = "failed"
	JobCancelled  JobState = "cancelled"
)

// JobSpec is what POST /v1/jobs submits. [JobSpec.Validate] lists the rules.
type JobSpec struct {
	// Owner is the user the job runs as on every node, and the only one (with
	// root) who sees it: a local user who submits through an agent's socket
	// gets their own, set by the agent from the caller's credentials (naming
	// another is refused); root and holders of the secret may name any user
	// but root (shoal run --user). nil: the agents' user, root usually.
	Owner *Owner `json:"owner,omitempty"`
	// ID names the job; empty: the coordinator names it after the program with a
	// random suffix ("heat-3f9a2c"). 1 to 63 bytes of [A-Za-z0-9._-].
	ID    string   `json:"id,omitempty"`
	Ranks int      `json:"ranks"`
	Argv  []string `json:"argv"` // program (a staged file's name or an absolute path) and arguments
	// Files are staged to every node the job uses before launch: the program
	// and the inputs given with --file. Each must already be stored on the
	// submitting node (PUT /v1/files/{sha256}).
	Files              []File            `json:"files,omitempty"`
	Env                map[string]string `json:"env,omitempty"`
	Engine             string            `json:"engine,omitempty"` // "openmpi" (the default) or "mpich"
	CheckpointInterval Duration          `json:"checkpoint_interval,omitzero"`
	// CheckpointAuto has libshoal choose the interval between checkpoints from
	// their cost and the cluster's failure record (--ckpt-interval auto);
	// CheckpointInterval is then unset.
	CheckpointAuto bool `json:"checkpoint_auto,omitzero"`
	// MTBF is each node's mean time between failures as the user gives it
	// (--mtbf), for CheckpointAuto; unset, the cluster's failure record says.
	MTBF             Duration `json:"mtbf,omitzero"`
	MaxRestarts      int      `json:"max_restarts,omitempty"`
	MaxOversubscribe float64  `json:"max_oversubscribe,omitempty"` // ranks per core allowed (0.5: one per two cores); 0: 1
	// RanksPerNode bounds the ranks of any one node, whatever its cores: 1
	// spreads them one per node. 0: no bound but MaxOversubscribe's.
	RanksPerNode int `json:"ranks_per_node,omitempty"`
	// WaitForNodes is how long a job whose ranks do not fit the live nodes (at
	// MaxOversubscribe) waits for nodes to join before it fails. 0: do not wait;
	// a relaunch then oversubscribes the survivors rather than stop.
	WaitForNodes Duration `json:"wait_for_nodes,omitzero"`
	// AutoRebalance turns on automatic rebalancing: when nodes join, the job is
	// checkpointed and relaunched over the larger set if the estimated time saved
	// over the rest of the run exceeds AutoRebalance times the measured cost of a
	// checkpoint plus a restart. 0: off (the default); otherwise at least 1.
	AutoRebalance float64 `json:"auto_rebalance,omitempty"`
	Redundancy    int     `json:"redundancy,omitempty"` // copies of each shard; 0: default (2)
	// Parity, when set, protects the shards with Reed–Solomon parity instead
	// of copies (--redundancy rs:K+M); Redundancy must then be 0.
	Parity *Parity `json:"parity,omitempty"`
	// Relocation is how ranks are placed again after a node is lost: "rank" (the
	// default) places every rank anew over the remaining nodes; "block" moves the
	// lost node's ranks together to one survivor, as older systems do (for
	// comparison in benchmarks).
	Relocation string `json:"relocation,omitempty"`
	// Layout is how ranks are placed: "" (the planner: contiguous blocks, or
	// the layout it predicts at least 5 % faster from the measured links and
	// traffic), or, for comparison, "blocks" (contiguous blocks in proportion to
	// cores × speed), "cyclic" (rank i to the i-th node in turn) or "packed"
	// (nodes filled to their slots in name order: the fewest nodes).
	Layout string `json:"layout,omitempty"`
	// NoReplan keeps the job out of the planner: its ranks go in contiguous
	// blocks in proportion to cores × speed, they count no traffic, and the
	// job never moves for it. By default the planner places the job by the
	// measured links and the traffic learned while it runs: relaunches use
	// the profile, and when it shows a layout faster by more than a move
	// costs, the job moves there at a checkpoint.
	NoReplan bool `json:"no_replan,omitzero"`
	// Keep is how long every node keeps the job's data (shards, job and
	// coordinator directories, cached files) after the job ends: 0 means the
	// agents' retention policy for how it ended (docs/retention.md);
	// [KeepForever] keeps it until `shoal gc --job` removes it.
	Keep Duration `json:"keep,omitzero"`
	// ResumeEpoch, when set, makes the job begin as a restart from that epoch,
	// whose shards the submitter put into the live nodes' stores first (shoal
	// run --durable: an epoch kept outside the cluster); ResumeFrom says where
	// it was kept, for the restart line. ID must then be the shards' job id.
	ResumeEpoch uint64 `json:"resume_epoch,omitempty"`
	ResumeFrom  string `json:"resume_from,omitempty"`
	// Farm, when set, makes the job a task farm: Argv is run once per task,
	// as a plain process (no MPI), on whichever node has room, and Ranks is 0.
	Farm *FarmSpec `json:"farm,omitempty"`
}

// FarmSpec is what makes a job a task farm (`shoal farm`).
type FarmSpec struct {
	// Tasks are the tasks' lines: task n (from 0) runs Argv with "{}" replaced
	// by Tasks[n] and "{#}" by n; without "{}", the line is the last argument.
	Tasks []string `json:"tasks"`
	// Prefetch is how many tasks each node holds beyond its cores, waiting to
	// start the moment a core is free. 0 to [MaxPrefetch].
	Prefetch int `json:"prefetch"`
	// Retries is how many times a task that exits non-zero by itself runs
	// again before it is given up. 0 to [MaxRetries].
	Retries int `json:"retries"`
	// Dispatch is how tasks go to nodes: "" (the least loaded node with room)
	// or, for comparison in benchmarks, a static schedule fixed over the
	// nodes up at the start: "cyclic" (task t to node t mod n) or "block"
	// (contiguous ranges).
	Dispatch string `json:"dispatch,omitempty"`
}

// Bounds of a [FarmSpec].
const (
	MaxTasks     = 1000000
	MaxTaskBytes = 4096 // of one task's line
	MaxPrefetch  = 64
	MaxRetries   = 100
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

// KeepForever is the JobSpec.Keep of a job whose data stays until removed by
// hand (`shoal run --keep`); on the wire, "-1ns".
const KeepForever = Duration(-1)

// RebalanceRequest is the optional body of POST /v1/jobs/{id}/rebalance.
type RebalanceRequest struct {
	// Force relaunches even when the estimate says the rebalance would not pay.
	Force bool `json:"force,omitempty"`
}

// File is one staged file of a job.
type File struct {
	Name   string `json:"name"`   // relative path in the job directory
	SHA256 string `json:"sha256"` // hex content hash
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode,omitempty"` // permission bits; 0: 0644 (0755 for the program)
}

// Job is a job as the coordinator reports it.
type Job struct {
	ID          string           `json:"id"`
	State       JobState         `json:"state"`
	Spec        JobSpec          `json:"spec"`
	Coordinator string           `json:"coordinator"` // node that runs the job's coordinator
	Submitted   time.Time        `json:"submitted"`
	Ended       time.Time        `json:"ended,omitzero"`
	Placement   map[string][]int `json:"placement,omitempty"` // node → ranks
	Epoch       uint64           `json:"epoch,omitempty"`     // newest complete checkpoint epoch
	Restarts    int              `json:"restarts"`
	ExitCode    *int             `json:"exit_code,omitempty"`
	Reason      string           `json:"reason,omitempty"` // one line, why it failed or restarted
	Progress    float64          `json:"progress,omitempty"`
	// Exhausted is set on a failed job whose ranks kept dying until
	// MaxRestarts ran out (`shoal run` exits 3), as opposed to one that
	// failed by itself or could not run.
	Exhausted bool `json:"exhausted,omitzero"`
	// Avoid lists the nodes a run of the job found lost (they stopped answering,
	// or were leaving) that membership has yet to declare gone: the job is not
	// placed on them, by this coordinator or the next one.
	Avoid []string `json:"avoid,omitempty"`
	// Farm is a task farm's progress; nil for an MPI job.
	Farm *FarmProgress `json:"farm,omitempty"`
	// Plan says why the ranks are where they are, and what the planner
	// predicted of that layout; nil before the first placement.
	Plan *PlanInfo `json:"plan,omitempty"`
	// Interval is the time between the job's checkpoints as its rank 0 last
	// reported it, with why when libshoal chose it; nil until reported.
	Interval *CheckpointInterval `json:"interval,omitempty"`
	// Traffic is the job's traffic as its ranks reported it (libshoal counts
	// what each rank sends), kept so that every placement uses it, a new
	// coordinator's included; nil until every rank has reported.
	Traffic *TrafficProfile `json:"traffic,omitempty"`
}

// TrafficProfile is what a job's ranks send each other and compute, per
// second of a run.
type TrafficProfile struct {
	// Flows are the pairs of ranks that exchange data, both directions added
	// (From < To), most bytes first; at most [MaxFlows].
	Flows []Flow `json:"flows"`
	// Work is one rank's compute per second, in loops of a node's measured
	// speed: the time outside MPI calls times the speed of its node.
	Work float64 `json:"work"`
	// MPIFraction is the share of the ranks' time spent in point-to-point MPI
	// calls, averaged over the ranks.
	MPIFraction float64   `json:"mpi_fraction"`
	Measured    time.Time `json:"measured"`
}

// CheckpointInterval is the time between a job's checkpoints, as libshoal's
// rank 0 chose it (the job directory's interval file, docs/launcher-protocol.md).
type CheckpointInterval struct {
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

// RankTraffic is what one rank reported of its traffic in its node's
// checkpoint store: cumulative since it started (libshoal's traffic file).
type RankTraffic struct {
	Rank         int           `json:"rank"`
	Epoch        uint64        `json:"epoch"` // the checkpoint at which it was written
	SecondsMPI   float64       `json:"seconds_mpi"`
	SecondsTotal float64       `json:"seconds_total"`
	Sent         []PeerTraffic `json:"sent,omitempty"`
}

// PeerTraffic is what a rank sent one peer.
type PeerTraffic struct {
	Peer     int    `json:"peer"`
	Bytes    uint64 `json:"bytes"`
	Messages uint64 `json:"messages"`
}

// PlanInfo is the planner's account of a job's placement (internal/place).
type PlanInfo struct {
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

// JobList is the answer of GET /v1/jobs.
type JobList struct {
	Jobs []Job `json:"jobs"`
}

// JobEvent is one line of GET /v1/jobs/{id}/events.
type JobEvent struct {
	Seq     uint64          `json:"seq"` // 1, 2, …: resume a stream with ?from=Seq+1
	Time    time.Time       `json:"time"`
	Job     string          `json:"job"`
	Type    string          `json:"type"` // chosen by the coordinator: "state", "output", "node-lost", …
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"` // type-specific details
}

// LaunchRequest is the body of POST /v1/launch: `shoal rsh NODE CMD...` asking
// NODE's agent to start an MPI daemon for a job.
type LaunchRequest struct {
	Job  string            `json:"job"`
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env,omitempty"`
	// To, on a request to the local agent's socket only, is the API address of
	// the agent that should start the daemon: the local agent checks that the
	// caller owns the job and passes the launch on, so that `shoal rsh`, run by
	// the job's user, needs no cluster secret.
	To string `json:"to,omitempty"`
}

// DefaultGrantTTL is a grant's time to live when POST /v1/grants gives none.
const DefaultGrantTTL = 10 * time.Minute

// Owner is a local user, by number: user and group ids must mean the same user
// on every node, as for a shared file system.
type Owner struct {
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Name string `json:"name,omitempty"` // the login name on the submitting node, for people
}

// String names the owner: "alice (uid 1001)".
func (o *Owner) String() string {
	if o == nil {
		return "the agents' user"
	}
	if o.Name != "" {
		return fmt.Sprintf("%s (uid %d)", o.Name, o.UID)
	}
	return fmt.Sprintf("uid %d", o.UID)
}

// GrantRequest is the body of POST /v1/grants: a coordinator allowing this
// node to launch MPI daemons for one of its jobs.
type GrantRequest struct {
	Job         string `json:"job"`
	Coordinator string `json:"coordinator"` // node name of the job's coordinator
	// Ranks is how many of the job's ranks the node runs; the node announces
	// the sum over its grants as its ranks (Node.Ranks) until they are revoked.
	Ranks int `json:"ranks,omitempty"`
	// TTL is how long launches may start under the grant; 0 means
	// DefaultGrantTTL. It does not limit how long they run.
	TTL Duration `json:"ttl,omitzero"`
	// Owner is the user the job's daemons, and so its ranks, run as on the
	// node; nil: the agent's own user.
	Owner *Owner `json:"owner,omitempty"`
	// Files are the SHA-256 sums of the job's files: the answer says which of
	// them the node's file store lacks, so that a launch checks a node's
	// files and grants it in one request.
	Files []string `json:"files,omitempty"`
}

// Grant is the answer of POST /v1/grants.
type Grant struct {
	Job         string    `json:"job"`
	Coordinator string    `json:"coordinator"`
	Ranks       int       `json:"ranks"`
	Expires     time.Time `json:"expires"` // launches are refused after this
	// Missing are the request's files the node does not hold, in the
	// request's order.
	Missing []string `json:"missing,omitempty"`
}

// Revoked is the answer of DELETE /v1/grants/{job}.
type Revoked struct {
	Job    string `json:"job"`
	Killed int    `json:"killed"` // launched commands of the job that were running and were killed
}

// ShardRef names one checkpoint shard.
type ShardRef struct {
	Job   string
	Epoch uint64
	Rank  int
}

func (s ShardRef) String() string { return fmt.Sprintf("%s/%d/%d", s.Job, s.Epoch, s.Rank) }

// ParityRef names one parity file of a job (--redundancy rs:K+M): row Row of
// group Group of epoch Epoch.
type ParityRef struct {
	Job   string
	Epoch uint64
	Group int
	Row   int
}

func (p ParityRef) String() string {
	return fmt.Sprintf("%s/%d/parity/%d/%d", p.Job, p.Epoch, p.Group, p.Row)
}

// ShardInfo is one shard stored on a node that passed full verification
// (docs/shard-format.md) and holds the job, epoch and rank its path names.
type ShardInfo struct {
	Epoch     uint64 `json:"epoch"`
	Rank      int    `json:"rank"`
	NRanks    int    `json:"nranks"`
	Size      int64  `json:"size"`       // bytes
	CreatedNs uint64 `json:"created_ns"` // when the checkpoint was taken, ns since the Unix epoch
	Checksum  uint64 `json:"checksum"`   // the shard's XXH3-64 (its last 8 bytes): equal copies have equal checksums
}

// Ref returns the reference of the shard of job described by i.
func (i ShardInfo) Ref(job string) ShardRef { return ShardRef{Job: job, Epoch: i.Epoch, Rank: i.Rank} }

// BadShard is a file stored under a shard's name that fails verification: it
// is never served, fetched or counted.
type BadShard struct {
	Epoch uint64 `json:"epoch"`
	Rank  int    `json:"rank"`
	// Error is the short name of the failed check from docs/shard-format.md
	// ("truncated", "bad magic", "unsupported version", "checksum mismatch",
	// "bad header", "bad region table", "wrong shard"), or "unreadable".
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"` // the whole message, for people
}

// ShardIndex is the answer of GET /v1/shards/{job}: the job's shards on the
// answering node, by epoch then rank.
type ShardIndex struct {
	Job    string      `json:"job"`
	Shards []ShardInfo `json:"shards"`
	Bad    []BadShard  `json:"bad"`
	// Parity lists the verified Reed–Solomon parity files of the job on this
	// node (--redundancy rs:K+M), by epoch, group, row.
	Parity []ParityInfo `json:"parity,omitempty"`
	// Progress is the job's progress as its rank 0 last reported it on this node
	// (shoal_progress); absent when no rank 0 of the job has run here.
	Progress *Progress `json:"progress,omitempty"`
	// Traffic is what the job's ranks on this node reported of their traffic
	// (not part of the tag: it changes with every checkpoint anyway).
	Traffic []RankTraffic `json:"traffic,omitempty"`
	// Interval is the checkpoint interval the job's rank 0 on this node uses,
	// as it last reported it (not part of the tag: it changes at checkpoints).
	Interval *CheckpointInterval `json:"interval,omitempty"`
	// Tag names what the index says, as [ShardIndex.ComputeTag] digests it: a
	// client passes it back as ?known= to wait for the next change.
	Tag string `json:"tag"`
}

// ComputeTag returns the tag of idx: a digest of its shards (epoch, rank,
// size, checksum), its bad shards (epoch, rank, failed check) and its progress
// in whole percents. Progress is rounded so that a rank 0 reporting every
// second changes the tag at most once per percent: a client waiting for news
// of the shards wakes up no more often than that.
func (idx ShardIndex) ComputeTag() string {
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(len(idx.Shards)))
	for _, s := range idx.Shards {
		put(s.Epoch)
		put(uint64(s.Rank))
		put(uint64(s.Size))
		put(s.Checksum)
	}
	put(uint64(len(idx.Parity)))
	for _, p := range idx.Parity {
		put(p.Epoch)
		put(uint64(p.Group))
		put(uint64(p.Row))
		put(p.Checksum)
	}
	put(uint64(len(idx.Bad)))
	for _, s := range idx.Bad {
		put(s.Epoch)
		put(uint64(s.Rank))
		h.Write([]byte(s.Error))
		h.Write([]byte{0})
	}
	if p := idx.Progress; p != nil {
		put(1 + uint64(math.Floor(p.Fraction*100)))
	} else {
		put(0)
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// MaxShardWait bounds the wait of GET /v1/shards/{job}?wait=: a waiting
// request holds a connection and a goroutine on the node.
const MaxShardWait = time.Minute

// Progress is a fraction of a job's work done, and when rank 0 reported it.
type Progress struct {
	Fraction float64   `json:"fraction"`
	At       time.Time `json:"at"`
}

// FetchRequest is the body of POST /v1/shards/{job}/{epoch}/{rank}/fetch.
type FetchRequest struct {
	From string `json:"from"` // API address (host:port) of the node holding the shard
}

// Fetched is the answer of POST /v1/shards/{job}/{epoch}/{rank}/fetch.
type Fetched struct {
	Shard ShardInfo `json:"shard"`
	// Copied is false when the node already held a verified copy and
	// transferred nothing.
	Copied bool `json:"copied"`
	// Wire is how many bytes crossed the network: the shard's size, or less
	// when its sender compressed it (GET …/{rank}?link=) or sent only its
	// changes; 0 when not copied.
	Wire int64 `json:"wire,omitempty"`
	// Changed is, when the shard was stored from its changes since the
	// node's shard of an earlier epoch (POST …/{rank}/changes), how many bytes
	// of changes were sent before any compression: the bitmap, the sent
	// blocks' sums and the blocks; 0 when it was copied whole.
	Changed int64 `json:"changed,omitempty"`
}

// ParityInfo is one Reed–Solomon parity file stored on a node that passed
// full verification (docs/shard-format.md, "Parity files"): row Row of the
// parity of group Group of an epoch, over the shards of Ranks whose trailing
// checksums were Sums when it was computed.
type ParityInfo struct {
	Epoch    uint64   `json:"epoch"`
	Group    int      `json:"group"`
	Row      int      `json:"row"`
	K        int      `json:"k"`
	M        int      `json:"m"`
	Ranks    []int    `json:"ranks"`
	Sums     []uint64 `json:"sums"`
	Size     int64    `json:"size"`     // bytes
	Checksum uint64   `json:"checksum"` // the parity file's XXH3-64
}

// Member is one data shard of a parity group as the coordinator names it: its
// rank, length, checksum and a node that holds it (From, an API address).
type Member struct {
	Rank  int    `json:"rank"`
	Bytes int64  `json:"bytes"`
	Sum   uint64 `json:"sum"`
	From  string `json:"from,omitempty"`
}

// EncodeRequest is the body of POST /v1/shards/{job}/{epoch}/parity: compute
// row Row of group Group's parity (M rows in all) from its data shards,
// fetched from the nodes Data names, and store it; compute the rows of Push
// in the same pass and send each to its node.
type EncodeRequest struct {
	Group int          `json:"group"`
	Row   int          `json:"row"`
	M     int          `json:"m"`
	Data  []Member     `json:"data"`           // ranks ascending
	Push  []ParityPush `json:"push,omitempty"` // rows other than Row, each once
}

// ParityPush is a parity row the encoding node computes too and sends to the
// node at To (an API address), which verifies and stores it.
type ParityPush struct {
	Row int    `json:"row"`
	To  string `json:"to"`
}

// EncodeResult is the answer of POST /v1/shards/{job}/{epoch}/parity: the
// row stored on the encoding node, and what became of each row it pushed.
type EncodeResult struct {
	ParityInfo
	Pushed []Pushed `json:"pushed,omitempty"`
}

// Pushed is one pushed row: stored on To (Error empty), or why not.
type Pushed struct {
	Row   int    `json:"row"`
	To    string `json:"to"`
	Error string `json:"error,omitempty"`
}

// ParitySource is a parity row of a group and a node that holds it.
type ParitySource struct {
	Row  int    `json:"row"`
	From string `json:"from"`
}

// RebuildRequest is the body of POST /v1/shards/{job}/{epoch}/{rank}/rebuild:
// rebuild the rank's shard of the epoch from its group (the data shards of
// Data that have a From, and the parity rows of Parity), verify and store it.
type RebuildRequest struct {
	Group  int            `json:"group"`
	M      int            `json:"m"`
	Data   []Member       `json:"data"` // every member of the group, ranks ascending; From empty when lost
	Parity []ParitySource `json:"parity"`
}

// ShardsRemoved is the answer of DELETE /v1/shards/{job}.
type ShardsRemoved struct {
	Job     string   `json:"job"`
	Removed []uint64 `json:"removed"` // epoch directories deleted, oldest first
}

// RankState is how one rank of a job on a node ran or ended, as its wrapper
// `shoal exec-rank` recorded it (docs/launcher-protocol.md, "Rank wrapper").
type RankState struct {
	Rank   int    `json:"rank"`
	PID    int    `json:"pid"`
	State  string `json:"state"`            // running, exited, signaled (a loss), stopped (torn down by the launcher)
	Code   int    `json:"code,omitempty"`   // exit code, for exited
	Signal int    `json:"signal,omitempty"` // for signaled and stopped
	TimeNs int64  `json:"time_ns"`          // when the wrapper saw it end (Unix ns); 0 while running
}

// RankStates is the answer of GET /v1/grants/{job}/ranks.
type RankStates struct {
	Job   string      `json:"job"`
	Ranks []RankState `json:"ranks"`
}

// errorBody is every error answer's body.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Duration is a time.Duration written in JSON as a Go duration string ("1.5s").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"30s\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// EvacuateRequest is the body of POST /v1/evacuate: move the jobs this node
// coordinates off Node, which is about to leave.
type EvacuateRequest struct {
	Node string `json:"node"`
}

// ProbeRequest is the body of POST /v1/shards/{job}/probe: how many bytes the
// node's checkpoint store must take, as the job's shards on the node would.
type ProbeRequest struct {
	Bytes int64 `json:"bytes"`
}

// Probe is the answer of POST /v1/shards/{job}/probe: the bytes written (and made
// durable, then removed), and, when the store could not take them, why ("no
// space left on device", "input/output error").
type Probe struct {
	Bytes int64  `json:"bytes"`
	Error string `json:"error,omitempty"`
}

// CheckpointRequest is the optional body of POST /v1/shards/{job}/request-checkpoint.
type CheckpointRequest struct {
	// Hold makes the ranks wait, after the checkpoint, to be stopped: the coordinator
	// relaunches from that checkpoint, so no step is computed twice.
	Hold bool `json:"hold,omitempty"`
}

// Parity is a job's Reed–Solomon code: groups of up to K shards, each with M
// parity rows on other nodes; any M nodes lost at once lose no epoch.
type Parity struct {
	K int `json:"k"`
	M int `json:"m"`
}
