package api

import (
	"context"
	"fmt"
	"io"
	"time"

	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// LocalNode is the agent as the server sees it: its name, its view of the
// cluster and its departure. Implementations must be safe for concurrent use.
type LocalNode interface {
	// Name is this node's name.
	Name() string
	// Nodes returns every node this node knows of, dead and left ones included,
	// with the ranks each announces.
	Nodes(ctx context.Context) ([]node.Node, error)
	// Voters returns the job store's leader and voters among those nodes,
	// checking only their agents answer: what a look at the quorum needs,
	// which `shoal run` takes every second while it follows a job.
	Voters(ctx context.Context) ([]node.Node, error)
	// MembersAt returns the nodes whose agent's API address is api, in
	// membership's states, without checking that a live one's agent answers:
	// the look-up of a launch relayed to a node, which a launch makes once per
	// node of its run, and which costs the same at any size of the cluster.
	MembersAt(api string) []node.Node
	// Leave makes this node leave the cluster and returns once it has (jobs
	// checkpointed, departure gossiped). The server answers the request, then
	// the agent shuts down. A second call while leaving waits for the first.
	Leave(ctx context.Context) error
}

// QuorumRecoverer is a [LocalNode] that can force a new job store
// configuration (POST /v1/recover-quorum); a node that is not one answers 503.
type QuorumRecoverer interface {
	// RecoverQuorum makes this node the only voter of the job store when the
	// cluster has no quorum, and returns once it leads; a cluster with a
	// quorum is refused with [ErrConflict].
	RecoverQuorum(ctx context.Context) (RecoverResponse, error)
}

// JobService is the job coordinator as the server sees it. The server calls its
// methods from one goroutine per request, so implementations must be safe for
// concurrent use. ctx is the request's context: it is cancelled when the client
// goes away or the server shuts down, and methods must then return promptly.
//
// Errors choose the HTTP status: wrap [ErrBadRequest] (400), [ErrNotFound] (404),
// [ErrConflict] (409, e.g. cancelling a finished job) or [ErrNotAvailable] (503);
// anything else is a 500. The error text is sent to the client, so it should be
// one line a user understands. The server has authenticated and validated the
// request (ids, JobSpec.Validate) before calling.
type JobService interface {
	// Submit creates a job on this node (its coordinator) and returns it.
	Submit(ctx context.Context, spec job.Spec) (job.Job, error)
	// Jobs lists the jobs this node coordinates, running and finished.
	Jobs(ctx context.Context) ([]job.Job, error)
	// Job returns one job.
	Job(ctx context.Context, id string) (job.Job, error)
	// Cancel stops a job and returns it in its new state.
	Cancel(ctx context.Context, id string) (job.Job, error)
	// Events calls send with the job's events whose Seq ≥ from, in order. If
	// follow is false it returns after the events recorded so far; otherwise it
	// keeps sending until the job has ended (then returns nil) or ctx is done.
	// It returns send's error at once if send fails (the client went away).
	// send must not be called concurrently.
	Events(ctx context.Context, id string, from uint64, follow bool, send func(job.Event) error) error
	// Launch checks a launch request (the job must exist and have been created
	// by an authenticated coordinator) and returns the function that serves it.
	// An error here is answered as an HTTP error. Otherwise the server switches
	// the connection to the launch protocol (101) and calls run with it; run
	// owns conn, must close it, and must kill what it started when reading
	// from conn fails (the caller went away).
	Launch(ctx context.Context, req LaunchRequest) (run func(conn io.ReadWriteCloser), err error)
	// Rebalance checkpoints job id now and relaunches it over every live node, and
	// returns once it runs on the new layout. Unless req.Force, a rebalance
	// estimated not to pay for itself is refused with ErrConflict.
	Rebalance(ctx context.Context, id string, req RebalanceRequest) (job.Job, error)
	// Evacuate moves every job this node coordinates off node without losing work
	// (checkpoint, then relaunch elsewhere); it returns once they all have.
	Evacuate(ctx context.Context, node string) error
	// KeptDurable records in running job id's record, with an event, that its
	// epoch req.Epoch is kept outside the cluster at req.Location. A job that has
	// ended is refused with ErrConflict.
	KeptDurable(ctx context.Context, id string, req DurableRequest) error
}

// DataService stores content-addressed job files on this node. Same
// concurrency and error contract as [JobService]. The reader given to PutFile
// fails with an error wrapping [ErrUnauthorized] at its end if the body does
// not match its signed hash: PutFile must only commit data once it has read
// its reader to io.EOF without error.
type DataService interface {
	// HasFile reports whether the file with this content hash is stored.
	HasFile(ctx context.Context, sha256 string) (bool, error)
	// PutFile stores a file; it must check that the content hashes to sha256.
	// size is the Content-Length, or -1 if unknown.
	PutFile(ctx context.Context, sha256 string, size int64, r io.Reader) error
	// GetFile opens a stored file and returns its size; the caller closes it.
	// A new coordinator fetches a job's files from the nodes that have them.
	GetFile(ctx context.Context, sha256 string) (io.ReadCloser, int64, error)
}

// ShardService is this node's checkpoint store (internal/shardstore) and its
// record of the ranks it ran: the primitives a coordinator uses to make
// checkpoints durable and to tell a lost rank from a failed program. Same
// concurrency and error contract as [JobService], plus [ErrCorrupt] (422) for
// a stored shard that fails verification and [ErrBadGateway] (502) when a
// node this one called failed. The server has validated job ids, refs and
// request bodies before calling. Every agent serves it, coordinator or not.
type ShardService interface {
	// GetShard opens a stored shard after verifying it; size is its length in
	// bytes. A missing shard wraps ErrNotFound, a corrupt one ErrCorrupt.
	GetShard(ctx context.Context, ref shard.Ref) (r io.ReadCloser, size int64, err error)
	// PutShard stores a shard, verifying it first (format and identity: a bad
	// one wraps ErrBadRequest) and replacing any previous copy only once the
	// new one is complete and durable. r fails with ErrUnauthorized at its
	// end if the body does not match its signed hash; nothing is committed
	// then. size is the Content-Length, or -1.
	PutShard(ctx context.Context, ref shard.Ref, size int64, r io.Reader) error
	// Shards lists the job's shards on this node, verified ones and bad ones,
	// with the index's tag ([shard.Index.ComputeTag]). A job with no shards
	// here has an empty index, not an error. When known is not empty, Shards
	// first waits until the index's tag differs from known or ctx is done,
	// and then returns the index as it last found it: the end of ctx while
	// waiting is not an error.
	Shards(ctx context.Context, job, known string) (shard.Index, error)
	// FetchShard copies a shard from the node whose API is at from, verifying
	// it before storing it; a verified local copy makes it a no-op.
	FetchShard(ctx context.Context, ref shard.Ref, from string) (Fetched, error)
	// GetParity opens a stored parity file after verifying it; errors as for
	// GetShard.
	GetParity(ctx context.Context, ref shard.ParityRef) (r io.ReadCloser, size int64, err error)
	// PutParity stores a parity row another node computed, after verifying
	// it as a parity file of ref; size is -1 when unknown.
	PutParity(ctx context.Context, ref shard.ParityRef, size int64, r io.Reader) (shard.ParityInfo, error)
	// EncodeParity computes one parity row of a group of the job's shards of
	// an epoch from the data shards, fetched from the nodes the request names,
	// and stores it; the rows the request pushes are computed in the same pass
	// and sent to their nodes. A failed push is reported in the result, not
	// as an error. Errors as for FetchShard.
	EncodeParity(ctx context.Context, job string, epoch uint64, req EncodeRequest) (EncodeResult, error)
	// RebuildShard rebuilds a lost shard from its group's other data shards
	// and parity rows, fetched from the nodes the request names, verifies it
	// and stores it; a verified local copy makes it a no-op. Errors as for
	// FetchShard.
	RebuildShard(ctx context.Context, ref shard.Ref, req RebuildRequest) (Fetched, error)
	// RemoveShards deletes the job's epoch directories older than before, or
	// the whole job directory (shards, manifest, requests) when before is 0,
	// and returns the epochs deleted.
	RemoveShards(ctx context.Context, job string, before uint64) ([]uint64, error)
	// RequestCheckpoint asks the job's rank 0 on this node for a checkpoint
	// at its next agreement.
	RequestCheckpoint(ctx context.Context, job string) error
	// RequestHold asks for a checkpoint after which the ranks wait to be stopped.
	RequestHold(ctx context.Context, job string) error
	// RankStates returns the states the job's ranks on this node recorded,
	// by rank; none when no rank ran here.
	RankStates(ctx context.Context, job string) ([]job.RankState, error)
	// Probe writes bytes to the node's checkpoint store, durably, and removes
	// them: whether the job's ranks could write their shards here now. A store
	// that cannot take them is an answer (Probe.Error), not an error.
	Probe(ctx context.Context, job string, bytes int64) (Probe, error)
}

// GrantService holds this node's launch grants: which jobs' MPI daemons
// POST /v1/launch may start here, on behalf of which coordinator. Same
// concurrency and error contract as [JobService]; the server has validated
// the request ([GrantRequest.Validate], the job id) before calling.
type GrantService interface {
	// Grant allows launches for job, on behalf of the coordinator node, for
	// ttl from now, replacing any earlier grant of the job; the node runs ranks
	// of the job's ranks until the grant is revoked.
	Grant(job, coordinator string, ranks int, ttl time.Duration, owner *job.Owner) (Grant, error)
	// Revoke withdraws job's grant and kills every process started for it on
	// this node (fencing), returning once they are gone. Revoking a job with
	// no grant is not an error.
	Revoke(job string) (Revoked, error)
}

// Unavailable is the [JobService], [DataService], [ShardService] and
// [GrantService] used until real ones are plugged in: every method fails with
// [ErrNotAvailable].
type Unavailable struct{}

var (
	_ JobService   = Unavailable{}
	_ DataService  = Unavailable{}
	_ ShardService = Unavailable{}
	_ GrantService = Unavailable{}
)

func notAvailable(what string) error {
	return fmt.Errorf("%w: this agent has no %s yet", ErrNotAvailable, what)
}

func (Unavailable) Submit(context.Context, job.Spec) (job.Job, error) {
	return job.Job{}, notAvailable("job coordinator")
}
func (Unavailable) Jobs(context.Context) ([]job.Job, error) {
	return nil, notAvailable("job coordinator")
}
func (Unavailable) Rebalance(context.Context, string, RebalanceRequest) (job.Job, error) {
	return job.Job{}, notAvailable("job coordinator")
}
func (Unavailable) Evacuate(context.Context, string) error { return notAvailable("job coordinator") }
func (Unavailable) KeptDurable(context.Context, string, DurableRequest) error {
	return notAvailable("job coordinator")
}
func (Unavailable) Job(context.Context, string) (job.Job, error) {
	return job.Job{}, notAvailable("job coordinator")
}
func (Unavailable) Cancel(context.Context, string) (job.Job, error) {
	return job.Job{}, notAvailable("job coordinator")
}
func (Unavailable) Events(context.Context, string, uint64, bool, func(job.Event) error) error {
	return notAvailable("job coordinator")
}
func (Unavailable) Launch(context.Context, LaunchRequest) (func(io.ReadWriteCloser), error) {
	return nil, notAvailable("job coordinator")
}
func (Unavailable) HasFile(context.Context, string) (bool, error) {
	return false, notAvailable("file store")
}
func (Unavailable) GetFile(context.Context, string) (io.ReadCloser, int64, error) {
	return nil, 0, notAvailable("file store")
}
func (Unavailable) PutFile(context.Context, string, int64, io.Reader) error {
	return notAvailable("file store")
}
func (Unavailable) GetShard(context.Context, shard.Ref) (io.ReadCloser, int64, error) {
	return nil, 0, notAvailable("checkpoint store")
}
func (Unavailable) Grant(string, string, int, time.Duration, *job.Owner) (Grant, error) {
	return Grant{}, notAvailable("launch service")
}
func (Unavailable) Revoke(string) (Revoked, error) { return Revoked{}, notAvailable("launch service") }
func (Unavailable) PutShard(context.Context, shard.Ref, int64, io.Reader) error {
	return notAvailable("checkpoint store")
}
func (Unavailable) Shards(context.Context, string, string) (shard.Index, error) {
	return shard.Index{}, notAvailable("checkpoint store")
}
func (Unavailable) GetParity(context.Context, shard.ParityRef) (io.ReadCloser, int64, error) {
	return nil, 0, notAvailable("checkpoint store")
}

func (Unavailable) PutParity(context.Context, shard.ParityRef, int64, io.Reader) (shard.ParityInfo, error) {
	return shard.ParityInfo{}, notAvailable("checkpoint store")
}

func (Unavailable) EncodeParity(context.Context, string, uint64, EncodeRequest) (EncodeResult, error) {
	return EncodeResult{}, notAvailable("checkpoint store")
}

func (Unavailable) RebuildShard(context.Context, shard.Ref, RebuildRequest) (Fetched, error) {
	return Fetched{}, notAvailable("checkpoint store")
}

func (Unavailable) FetchShard(context.Context, shard.Ref, string) (Fetched, error) {
	return Fetched{}, notAvailable("checkpoint store")
}
func (Unavailable) RemoveShards(context.Context, string, uint64) ([]uint64, error) {
	return nil, notAvailable("checkpoint store")
}
func (Unavailable) RequestHold(context.Context, string) error { return notAvailable("shard store") }
func (Unavailable) Probe(context.Context, string, int64) (Probe, error) {
	return Probe{}, notAvailable("checkpoint store")
}
func (Unavailable) RequestCheckpoint(context.Context, string) error {
	return notAvailable("checkpoint store")
}
func (Unavailable) RankStates(context.Context, string) ([]job.RankState, error) {
	return nil, notAvailable("checkpoint store")
}
