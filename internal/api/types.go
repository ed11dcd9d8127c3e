package api

import (
	"time"

	"shoal/internal/job"
	"shoal/internal/shard"
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
	User *job.Owner `json:"user,omitempty"`
}

// LeaveRequest is the optional body of POST /v1/leave.
type LeaveRequest struct {
	// Timeout bounds the whole leave, including checkpointing the node's jobs;
	// 0 means the agent's default.
	Timeout job.Duration `json:"timeout,omitzero"`
}

// LeaveResponse is the answer of POST /v1/leave, sent once the node has left.
type LeaveResponse struct {
	Name  string `json:"name"`
	State string `json:"state"` // "left"
}

// RecoverResponse is the answer of POST /v1/recover-quorum, sent once the
// node leads the job store's new configuration.
type RecoverResponse struct {
	Name string `json:"name"` // the node that recovered: the only voter, and the leader
	// Lost names the voters of the old configuration that were not alive,
	// with their state: "n1 dead, n3 dead".
	Lost string `json:"lost"`
}

// RebalanceRequest is the optional body of POST /v1/jobs/{id}/rebalance.
type RebalanceRequest struct {
	// Force relaunches even when the estimate says the rebalance would not pay.
	Force bool `json:"force,omitempty"`
}

// DurableRequest is the body of POST /v1/jobs/{id}/durable: epoch Epoch of the job
// is now kept at Location, outside the cluster (shoal run --durable).
type DurableRequest struct {
	Epoch    uint64 `json:"epoch"`
	Location string `json:"location"` // DIR or s3://BUCKET/PREFIX, as --durable names it
	// Endpoint is the object store's URL (--durable-endpoint; "": the agents'
	// own AWS_ENDPOINT_URL_S3 …), for the retention of the job's epochs there.
	Endpoint string `json:"endpoint,omitempty"`
	// Took is how long keeping it took, in seconds, and Uploaders how many nodes
	// uploaded its shards (0: the reporter copied them itself), for the event's words.
	Took      float64 `json:"took,omitempty"`
	Uploaders int     `json:"uploaders,omitempty"`
	// Copying says the epoch is being copied now, not kept yet: the nodes keep
	// it until a report without Copying (or for at most 10 minutes).
	Copying bool `json:"copying,omitempty"`
}

// JobList is the answer of GET /v1/jobs.
type JobList struct {
	Jobs []job.Job `json:"jobs"`
	// Next is the before= of the next page ([job.Cursor]); "" when this
	// page holds the last of the jobs asked for.
	Next string `json:"next,omitempty"`
	// More is how many jobs the query matches after this page; 0 when
	// Next is "".
	More int `json:"more,omitempty"`
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
	TTL job.Duration `json:"ttl,omitzero"`
	// Owner is the user the job's daemons, and so its ranks, run as on the
	// node; nil: the agent's own user.
	Owner *job.Owner `json:"owner,omitempty"`
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

// MaxShardWait bounds the wait of GET /v1/shards/{job}?wait=: a waiting
// request holds a connection and a goroutine on the node.
const MaxShardWait = time.Minute

// FetchRequest is the body of POST /v1/shards/{job}/{epoch}/{rank}/fetch.
type FetchRequest struct {
	From string `json:"from"` // API address (host:port) of the node holding the shard
}

// Fetched is the answer of POST /v1/shards/{job}/{epoch}/{rank}/fetch.
type Fetched struct {
	Shard shard.Info `json:"shard"`
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
	shard.ParityInfo
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

// RankStates is the answer of GET /v1/grants/{job}/ranks.
type RankStates struct {
	Job   string          `json:"job"`
	Ranks []job.RankState `json:"ranks"`
}

// errorBody is every error answer's body.
type errorBody struct {
	Error    string   `json:"error"`
	Code     string   `json:"code"`
	NoAnswer []string `json:"no_answer,omitempty"` // a 502's nodes that gave no answer
}

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
