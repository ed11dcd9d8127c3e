package api

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"shoal/internal/job"
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
	User *job.Owner `json:"user,omitempty"`
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
	State   string       `json:"state"`
	Since   time.Time    `json:"since"`
	RTT     job.Duration `json:"rtt,omitzero"`     // last direct probe from the answering node
	Leaving bool         `json:"leaving,omitzero"` // announced it is about to leave
	Local   bool         `json:"local,omitzero"`   // the answering node itself
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
	// PerRank lists the ids of the shard's per-rank (plain) regions, which a restart
	// on another number of ranks cannot restore: an epoch whose shards have none can
	// be restored onto any count (docs/shard-format.md, "Region kinds").
	PerRank []int32 `json:"per_rank,omitempty"`
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
	Interval *job.Interval `json:"interval,omitempty"`
	// Silent lists the job's ranks on this node that run and made no snapshot
	// call for longer than [job.SilentAfter] their usual time between calls,
	// by rank; empty while every rank calls (docs/api.md).
	Silent []job.Silent `json:"silent,omitempty"`
	// Tag names what the index says, as [ShardIndex.ComputeTag] digests it: a
	// client passes it back as ?known= to wait for the next change.
	Tag string `json:"tag"`
}

// ComputeTag returns the tag of idx: a digest of its shards (epoch, rank,
// size, checksum), its bad shards (epoch, rank, failed check), its silent
// ranks (rank, calls: a silence, not its length) and its progress in whole
// percents. Progress is rounded so that a rank 0 reporting every
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
	put(uint64(len(idx.Silent)))
	for _, s := range idx.Silent {
		put(uint64(s.Rank))
		put(uint64(s.Calls))
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
	State  string `json:"state"`            // running, exited, signaled (a loss), stopped (torn down by the launcher), vanished (its wrapper killed by SIGKILL)
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
