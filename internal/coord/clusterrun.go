package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/mtbf"
	"shoal/internal/node"
	"shoal/internal/shard"
	"shoal/internal/staging"
	"shoal/internal/userdir"
)

// Peer is what the coordinator needs of a node's agent (its own included):
// what staging a run needs of it (a grant, job files, shards fetched and
// rebuilt), and more. Methods must be safe for concurrent use.
type Peer interface {
	staging.Peer
	// Revoke kills what the node started for the job (fencing an old run)
	// and withdraws the ranks its grant announced.
	Revoke(ctx context.Context, job string) error
	// Shards returns the node's index of the job: the shards it holds and has
	// verified, the job's progress as a rank 0 on the node last reported it, and
	// the index's tag. With known not empty and wait > 0 it is a long poll: the
	// node answers once its index is not the one tagged known, or as it is
	// after wait; ctx must allow for the wait.
	Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error)
	// Encode makes the node compute and store a parity row of a group of the
	// job's shards of epoch, from the shards on the nodes the request names,
	// and push the rows the request lists to their nodes.
	Encode(ctx context.Context, job string, epoch uint64, req api.EncodeRequest) (api.EncodeResult, error)
	// RankStates reads how the job's ranks on the node ended.
	RankStates(ctx context.Context, job string) ([]engine.RankState, error)
	// Probe asks whether the node's checkpoint store takes bytes now.
	Probe(ctx context.Context, job string, bytes int64) (api.Probe, error)
	// RemoveShardsBefore deletes the job's epochs older than epoch on the node.
	RemoveShardsBefore(ctx context.Context, job string, epoch uint64) error
	// RequestCheckpoint asks the job's rank 0 on the node for a checkpoint now.
	RequestCheckpoint(ctx context.Context, job string) error
	// RequestHold asks for a checkpoint after which the ranks wait to be stopped.
	RequestHold(ctx context.Context, job string) error
	// DownloadShard makes the node read a shard of an epoch kept in an object
	// store, with its own credentials, verify it and keep it.
	DownloadShard(ctx context.Context, ref shard.Ref, req api.DownloadRequest) (api.Fetched, error)
	// UploadShard makes the node put its copy of a shard into an object store,
	// with its own credentials, verified as it passes.
	UploadShard(ctx context.Context, ref shard.Ref, req api.UploadRequest) (api.Uploaded, error)
}

// ClusterConfig is what the cluster backend needs of the node that coordinates
// a job: who it is, where its data is, and how it reaches the other nodes.
type ClusterConfig struct {
	Node     string // this node's name
	DataDir  string // this agent's data dir: files/, coord/, ckpt/
	ShoalBin string // the shoal executable (rank wrapper and rsh agent)
	// Nodes returns the cluster's nodes as membership sees them now.
	Nodes func(ctx context.Context) ([]node.Node, error)
	// Peer returns a client of a node's agent.
	Peer func(n node.Node) Peer
	// Links, when set, returns the measured links between the live nodes
	// (internal/links): the planner weighs them (placement.go).
	Links func(ctx context.Context) ([]links.Link, error)
	// OnBook, when set, receives a copy of a job's epoch book whenever the job's
	// complete epochs change (one became complete, older ones were pruned), so
	// that a coordinator taking the job over can start from it (see [Resume]);
	// unset, the job's [Record] keeps it. Never called concurrently for one job;
	// it should return quickly.
	OnBook func(job string, book epochs.Book)
	// Failures, when set, returns the cluster's record of node failures, from
	// which a job with an automatic checkpoint interval learns its mean time
	// between failures at each launch; unset, the record is empty (the prior).
	Failures func() mtbf.Estimate
	// NodeLost, when set, hears of every node a job lost without being told
	// (its agent stopped answering): the record behind Failures counts it.
	NodeLost func(name string)
	// ReadKept, when set, reads the manifest of the epoch of a job kept in an
	// object store (shoal run --durable s3://…), with this node's
	// credentials: an error wrapping durable.ErrNoCredentials when it has
	// none. A job whose nodes lost every newer epoch restarts from it (see
	// kept.go); unset, such a job restarts as if none were kept.
	ReadKept func(ctx context.Context, kept job.Durable) (durable.Manifest, error)
	// OpenKeep, when set, opens the object store a job's coordinator keeps its
	// epochs in (job.Spec.Durable), with this node's credentials: an error
	// wrapping durable.ErrNoCredentials when it has none. Unset, no
	// coordinator keeps epochs (see keep.go).
	OpenKeep func(target job.DurableTarget) (EpochStore, error)
}

// origin is this node as the one the job's files are sent from: its cache
// of job files, which the submitter uploaded here.
func (c ClusterConfig) origin() staging.Origin {
	return staging.Origin{Node: c.Node, Cache: files.Cache{Dir: filepath.Join(c.DataDir, "files")}}
}

// host is this node as the launch files of its jobs name it.
func (c ClusterConfig) host() staging.Host {
	return staging.Host{Node: c.Node, DataDir: c.DataDir, RunRoot: c.runRoot(), ShoalBin: c.ShoalBin}
}

// runRoot holds the directories of the runs of the jobs this node coordinates
// (DATA/coord).
func (c ClusterConfig) runRoot() string { return filepath.Join(c.DataDir, "coord") }

// SetUp grants job info to node n, which runs ranks of its ranks, and copies it
// the job's files of its instruction set it lacks from this node's cache,
// returning those it copied.
func (c ClusterConfig) SetUp(ctx context.Context, n node.Node, info job.Job, ranks int) ([]job.File, error) {
	return staging.SetUp(ctx, c.origin(), c.Peer(n), n.Name, n.Arch, info, ranks, nil)
}

// Record is a job's record as its run keeps it up to date: the job service
// writes it through to the job store, where every node reads it. Its methods
// must be safe for concurrent use.
type Record interface {
	// Job returns a copy of the record.
	Job() job.Job
	// Update changes the record; the change is written within a short delay,
	// with whatever follows it.
	Update(f func(*job.Job))
	// Decide changes the record with f and, when f reports a change, writes
	// it at once: the job acts on it.
	Decide(f func(*job.Job) (changed bool))
	// KeepBook keeps the job's epoch book, so that the next coordinator
	// resumes from it.
	KeepBook(book epochs.Book)
}

// The causes with which the job service stops a job's run ([context.Cause]):
// the node no longer leads the cluster, and the new leader takes the job over;
// or it leaves, its ranks held at a checkpoint for the next one (which stops
// the launcher with no grace, as for a planned move).
var (
	ErrLostLead   = errors.New("coord: this node no longer leads the cluster")
	ErrHandedOver = fmt.Errorf("%w: it leaves, and hands its jobs over", ErrLostLead)
)

// ClusterRun is one job's run over the cluster's nodes: the job loop with the
// cluster backend. The node that leads the job store makes one for every MPI
// job it drives. Run is called once; the other methods are safe to call from
// other goroutines while it runs.
type ClusterRun struct {
	cfg    ClusterConfig
	rec    Record
	rj     *jobRun
	b      *clusterBackend
	resume *Resume
}

// NewClusterRun returns the run of the job rec holds, whose rank output and
// events go to out. book is the job's epoch book (nil: a new job's, empty);
// resume, when set, makes the job begin by relaunching from the book's newest
// surviving epoch, as a new coordinator does with a job whose coordinator was
// lost.
func NewClusterRun(cfg ClusterConfig, rec Record, out Output, book *epochs.Book, resume *Resume) *ClusterRun {
	info := rec.Job()
	spec := info.Spec
	spec.ID = info.ID                              // a job stored before the spec carried its id
	launcher, _ := engine.ByName(info.Spec.Engine) // the spec was validated
	rcfg := Config{
		CkptRoot: filepath.Join(cfg.DataDir, "ckpt"), RunRoot: cfg.runRoot(),
		ShoalBin: cfg.ShoalBin, Engine: launcher, PollInterval: 200 * time.Millisecond, KillGrace: 3 * time.Second,
		NodeLost: cfg.NodeLost,
	}
	if book == nil {
		fresh := epochs.BookOf(info.Spec)
		book = &fresh
	}
	rj := newJob(rcfg, spec, out)
	rj.resume = resume
	b := newClusterBackend(cfg, rec, rj, *book)
	if info.Ranks > 0 {
		rj.ranks = info.Ranks // the count of the run another coordinator ran
	}
	if b.onBook == nil {
		b.onBook = rec.KeepBook
	}
	return &ClusterRun{cfg: cfg, rec: rec, rj: rj, b: b, resume: resume}
}

// Run drives the job from placement to its end, or until ctx ends (with
// [ErrLostLead] as its cause when the node stops leading).
func (c *ClusterRun) Run(ctx context.Context) Result {
	info := c.rec.Job()
	if c.resume != nil {
		c.b.seedRun(info.Placement, info.Avoid, c.resume.Lost)
		c.b.fenceAll(ctx, c.resume.Fenced)
		// This node's record of the complete epochs starts from the book it took
		// over, not from the first epoch completed under it: a job that ends
		// before one does still leaves it.
		c.b.writeManifest()
	}
	if err := c.rj.spec.Validate(); err != nil {
		return c.rj.fail(err.Error())
	}
	if err := runDir(c.rj.cfg.RunRoot, c.rj.spec.ID); err != nil {
		return c.rj.fail(err.Error())
	}
	c.rj.be = c.b
	defer c.b.startKeeper(ctx)()
	return c.rj.loop(ctx)
}

// Ended tells those who asked for a reconfiguration that the job has ended:
// nobody waits in vain for a relaunch. Called once Run has returned.
func (c *ClusterRun) Ended() {
	if c.b.pending != nil {
		close(c.b.pending.done)
	}
	for {
		select {
		case rc := <-c.b.reconfigs:
			close(rc.done)
		default:
			return
		}
	}
}

// Clear revokes the job on the nodes of its last run, in the background, and
// removes its shards there when removeShards: on the nodes that ran its ranks
// or may hold its data (holders), not every live node. Called once Run has
// returned.
func (c *ClusterRun) Clear(removeShards bool) {
	id := c.rec.Job().ID
	c.b.settleWatch() // its last answers may name more holders
	c.b.askHolders(func(p Peer) {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Revoke(cctx, id)
		if removeShards {
			p.RemoveShardsBefore(cctx, id, ^uint64(0))
		}
	})
}

// Reconfig asks a run for a planned relaunch: a node leaving, a rebalance
// over the live nodes, or a hand-over to the next coordinator.
type Reconfig struct {
	Without string // node to leave out ("" for a rebalance)
	Reason  string
	// Force relaunches a rebalance even when it is estimated not to pay.
	Force bool
	// Refused, when not nil, receives why a rebalance was not done, before
	// Done is closed.
	Refused *string
	// HandOver, when not nil, makes the reconfiguration a hand-over to the
	// next coordinator: no relaunch here; once the held checkpoint is
	// complete, where the run stopped is put here before Done is closed, and
	// the run waits, its ranks held, to be stopped.
	HandOver *job.Handover
	// Done is closed once the job runs without the node, is rebalanced or
	// held, or has ended.
	Done chan struct{}
}

// Reconfigure passes rc to the run; false when the run has as many
// reconfigurations waiting as it takes.
func (c *ClusterRun) Reconfigure(rc Reconfig) bool {
	select {
	case c.b.reconfigs <- reconfig{without: rc.Without, reason: rc.Reason, force: rc.Force, refused: rc.Refused, handOver: rc.HandOver, done: rc.Done}:
		return true
	default:
		return false
	}
}

// PinFor bounds how long a pinned epoch is kept ([ClusterRun.Pin]).
const PinFor = 10 * time.Minute

// Pin keeps epoch, and every newer one, on the nodes while it is copied out of the
// cluster (shoal run --durable), for at most PinFor; Pin(0) lets pruning go on.
func (c *ClusterRun) Pin(epoch uint64) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.book.Pin, c.b.pinUntil = epoch, time.Now().Add(PinFor)
}

// Uses reports whether the current run has ranks on node.
func (c *ClusterRun) Uses(node string) bool {
	c.b.placedMu.Lock()
	defer c.b.placedMu.Unlock()
	return c.b.placed.Counts()[node] > 0
}

// runDir makes the directory of job's runs in root, both the agent's, which no
// user can write: a coordinator running as root writes its launch files there,
// and must not be led by a user's link. Both are passable by all but listed by
// none (the launcher of a user's job runs as that user and reads the files
// staging.LaunchFiles writes); the files that hold the job's output or describe its
// launch belong to the job's owner, mode 0600. A directory of the job that is
// not the agent's (a user's, as runs before this rule left it) is removed
// first.
func runDir(root, job string) error {
	if err := os.MkdirAll(root, 0o711); err != nil {
		return err
	}
	t, dir := userdir.Tree{Base: root}, filepath.Join(root, job)
	if fi, err := t.Lstat(dir); err == nil {
		if st := fi.Sys().(*syscall.Stat_t); fi.IsDir() && int(st.Uid) == os.Geteuid() {
			return t.Chmod(dir, 0o711)
		}
		if err := t.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := t.Mkdir(dir, 0o711); err != nil {
		return err
	}
	return t.Chmod(dir, 0o711) // past the umask
}
