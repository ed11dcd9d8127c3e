// Package jobservice is the job and data service of one node, behind the API
// ([api.JobService], [api.DataService]). While the node leads the job store it
// drives every job (an MPI job through [coord.ClusterRun], a task farm through
// its own runtime) and writes each job's record through to the store; otherwise
// it answers from its replica and passes requests on to the leader. A node that
// becomes the leader takes the jobs over; one that leaves hands them over at a
// checkpoint.
package jobservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/coord"
	"shoal/internal/durable"
	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/farm"
	"shoal/internal/farmrun"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/jobstore"
	"shoal/internal/links"
	"shoal/internal/mtbf"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// Config wires a coordinator into its node.
type Config struct {
	Node     string // this node's name
	DataDir  string // this agent's data dir: files/, jobs/, ckpt/
	ShoalBin string // the shoal executable (rank wrapper and rsh agent)
	// Engine launches the jobs submitted to this node that name none ("": Open
	// MPI); the job keeps it wherever it is coordinated.
	Engine string
	// MPIEncrypt sets job.Spec.MPIEncrypt on every MPI job submitted to this
	// node, whether it coordinates the job or passes it on to the leader, which
	// sets it too if its own agent says so: a job is encrypted when it or
	// either node asks, and cannot opt out.
	MPIEncrypt bool
	// Nodes returns the cluster's nodes as membership sees them now.
	Nodes func(ctx context.Context) ([]node.Node, error)
	// Peer returns a client of another node's agent.
	Peer func(n node.Node) coord.Peer
	// Launch serves launch requests for this node (see internal/launch); nil
	// refuses them.
	Launch func(ctx context.Context, req api.LaunchRequest) (func(conn io.ReadWriteCloser), error)
	// Store is the cluster's replicated jobs. The node that leads it coordinates
	// every job; every node answers for every job from its replica.
	Store *jobstore.Store
	// Agent returns a client of a node's agent: what only the leader does is
	// passed on to it.
	Agent func(n node.Node) *api.Client
	// Links, when set, returns the measured links between the live nodes
	// (internal/links): the planner weighs them (placement.go).
	Links func(ctx context.Context) ([]links.Link, error)
	// WarmLinks, when set, starts reading in the background what Links will
	// need and this node lacks: called when this node becomes the leader, so
	// that the placements of the jobs it takes over find the links read.
	WarmLinks func()
	// WarmLink, when set, reads node n's row of links unless this node holds
	// it: called for each node right after a takeover's fence revoked a job
	// there, over the connection the revoke opened.
	WarmLink func(ctx context.Context, n node.Node)
	// OnBook, when set, receives a copy of a job's epoch book whenever the job's
	// complete epochs change (one became complete, older ones were pruned), so
	// that a coordinator taking the job over can start from it (see [Resume]).
	// Never called concurrently for one job; it should return quickly.
	OnBook func(job string, book epochs.Book)
	// Failures, when set, returns the cluster's record of node failures, from
	// which a job with an automatic checkpoint interval learns its mean time
	// between failures at each launch; unset, the record is empty (the prior).
	Failures func() mtbf.Estimate
	// NodeLost, when set, hears of every node a job lost without being told
	// (its agent stopped answering): the record behind Failures counts it.
	NodeLost func(name string)
}

// Service is the job service of one agent: it implements [api.JobService] and
// [api.DataService]. While its node leads the job store it drives every job;
// otherwise it answers from the store and passes requests on to the leader. It is
// safe for concurrent use.
type Service struct {
	cfg   Config
	cache files.Cache // the job files of this node (the same as its cluster runs use)
	mu    sync.Mutex
	jobs  map[string]*clusterJob // the jobs this node drives
	// term counts this node's terms as leader: a job driven in an earlier term
	// writes nothing more, even if this node leads again by the time it stops.
	term uint64
	// termCtx ends when this node's term as leader does (stepDown, or the next
	// takeOver): the requests a takeover began in the background (begin) stop
	// with it.
	termCtx context.Context
	termEnd context.CancelFunc
	// taken is closed once this node, leading, has taken over the jobs the store
	// holds (takeOver). A job submitted before then would be found by that scan
	// with no driver yet, and driven twice.
	taken chan struct{}
}

var (
	_ api.JobService  = (*Service)(nil)
	_ api.DataService = (*Service)(nil)
)

// New returns the job service for the node described by cfg.
// It follows the node's leadership of the store from then on.
func New(cfg Config) *Service {
	s := &Service{cfg: cfg, cache: files.Cache{Dir: filepath.Join(cfg.DataDir, "files")}, jobs: map[string]*clusterJob{},
		taken: make(chan struct{})}
	s.termCtx, s.termEnd = context.WithCancel(context.Background())
	if cfg.Store != nil {
		go s.lead()
	} else {
		s.markTaken()
	}
	return s
}

// launchable says why this node cannot launch the MPI job spec, if it cannot.
// (A task farm's tasks need no MPI launcher.)
func launchable(spec job.Spec) error {
	if spec.Farm != nil {
		return nil
	}
	launcher, err := engine.ByName(spec.Engine)
	if err != nil {
		return err
	}
	return launcher.Installed()
}

// defaults fills in what the node a job is submitted to decides for it, not
// the leader: the engine of a job that names none, and the encryption of an
// MPI job's traffic when this node's agent asks for it (byAgent: it did, the
// job had not).
func (s *Service) defaults(spec job.Spec) (_ job.Spec, byAgent bool) {
	if spec.Engine == "" {
		spec.Engine = s.cfg.Engine
	}
	if s.cfg.MPIEncrypt && spec.Farm == nil && !spec.MPIEncrypt {
		spec.MPIEncrypt, byAgent = true, true
	}
	return spec, byAgent
}

// Submit creates a job and starts it. The leader of the job store coordinates
// it; another node passes the job's files and the request on to the leader.
func (s *Service) Submit(ctx context.Context, spec job.Spec) (job.Job, error) {
	spec, byAgent := s.defaults(spec)
	if !s.leads(ctx) {
		return s.forwardSubmit(ctx, spec)
	}
	if err := s.awaitTaken(ctx); err != nil {
		return job.Job{}, err
	}
	if err := launchable(spec); err != nil {
		return job.Job{}, fmt.Errorf("%w: node %s coordinates the job and cannot launch it: %v", errkind.BadRequest, s.cfg.Node, err)
	}
	for _, f := range spec.Files {
		if !s.cache.Has(f.SHA256) {
			return job.Job{}, fmt.Errorf("%w: file %s (%s) was not uploaded to this node first", errkind.BadRequest, f.Name, f.SHA256)
		}
	}
	id := spec.ID
	if id == "" {
		id = job.NewID(spec.Argv[0])
		spec.ID = id
	}
	info := job.Job{ID: id, State: job.Pending, Spec: spec, Coordinator: s.cfg.Node, Submitted: time.Now()}
	s.mu.Lock()
	_, driven := s.jobs[id]
	s.mu.Unlock()
	// Whose the id is, is settled first: nothing below (a durable resume reads
	// the shards the nodes hold under the id) is done for an id that is taken.
	old, ledger, err := s.cfg.Store.Job(id)
	again, err := job.Admit(id, old, err == nil, driven, spec)
	if err != nil {
		return job.Job{}, err
	}
	var book *epochs.Book
	var resume *coord.Resume
	if spec.ResumeEpoch > 0 {
		// Checked before the job is recorded: a job that cannot resume is refused,
		// not started from the beginning.
		var err error
		if book, resume, err = s.resumeDurable(ctx, info); err != nil {
			return job.Job{}, fmt.Errorf("%w: job %s: %v", errkind.BadRequest, id, err)
		}
	}
	first := []job.Event{job.NewEvent(job.EventState, submittedMessage(spec.Owner, os.Getuid(), s.cfg.Node), nil)}
	if spec.MPIEncrypt {
		first = append(first, job.NewEvent(job.EventState, encryptMessage(byAgent, s.cfg.Node), nil))
	}
	if d := spec.Durable; d != nil {
		// Settled once for the job: one copier a job, this node's coordinators
		// or the submitter's shoal run (job.Job.CoordKeeps).
		info.CoordKeeps = durable.HasCredentials()
		if !info.CoordKeeps {
			first = append(first, job.NewEvent(job.EventDurable, fmt.Sprintf("warning: the coordinator, node %s, does not keep the job's epochs in %s: its agent has no credentials for it (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials); only an attached shoal run --durable copies them", s.cfg.Node, d.Location), nil))
		}
	}
	if again {
		// The owner's farm, ended, started again: it keeps the results it has
		// and runs the tasks it lacks (given-up ones too: something may have
		// been fixed since).
		err = s.cfg.Store.Replace(info, first, againLedger(ledger))
	} else {
		err = s.cfg.Store.Submit(info, first)
	}
	switch {
	case errors.Is(err, jobstore.ErrExists):
		return job.Job{}, job.Taken(id)
	case errors.Is(err, jobstore.ErrNotLeader):
		return s.forwardSubmit(ctx, spec)
	case err != nil:
		return job.Job{}, fmt.Errorf("%w: recording job %s: %v", errkind.NotAvailable, id, err)
	}
	s.start(info, book, resume)
	return info, nil
}

// resumeDurable builds the book of a job that begins from an epoch kept outside
// the cluster (spec.ResumeEpoch), from the shards the live nodes hold, which its
// submitter put there.
func (s *Service) resumeDurable(ctx context.Context, info job.Job) (*epochs.Book, *coord.Resume, error) {
	spec := info.Spec
	nodes, err := s.cfg.Nodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	indexes := map[string][]shard.Info{}
	for _, n := range nodes {
		if n.State != "alive" {
			continue
		}
		wg.Add(1)
		go func(n node.Node) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			idx, err := s.cfg.Peer(n).Shards(cctx, info.ID, "", 0)
			if err != nil {
				return
			}
			mu.Lock()
			indexes[n.Name] = idx.Shards
			mu.Unlock()
		}(n)
	}
	wg.Wait()
	book := epochs.BookOf(spec)
	if err := book.Resume(spec.ResumeEpoch, indexes); err != nil {
		return nil, nil, fmt.Errorf("cannot resume from epoch %d kept in %s: %v", spec.ResumeEpoch, spec.ResumeFrom, err)
	}
	book.SetWorld(spec.ResumeEpoch, spec.ResumeWorld)
	if n := book.World(spec.ResumeEpoch); !spec.Elastic() && n != spec.Ranks {
		return nil, nil, fmt.Errorf("cannot resume from epoch %d kept in %s: it was written by %d ranks and the job runs %d (an elastic job, --min-ranks/--max-ranks, resumes on another count)",
			spec.ResumeEpoch, spec.ResumeFrom, n, spec.Ranks)
	}
	why := fmt.Sprintf("resuming from epoch %d kept in %s", spec.ResumeEpoch, spec.ResumeFrom)
	return &book, &coord.Resume{Durable: true, Why: why}, nil
}

// againLedger is the ledger of a farm run again: its stored results, and no
// task given up.
func againLedger(book json.RawMessage) json.RawMessage {
	var l farm.Ledger
	if len(book) == 0 || json.Unmarshal(book, &l) != nil {
		return nil
	}
	var again farm.Ledger
	for _, r := range l.Results() {
		again.Done(r)
	}
	b, _ := json.Marshal(&again)
	return b
}

// start drives a job on this node, the leader; see run for book and resume.
func (s *Service) start(info job.Job, book *epochs.Book, resume *coord.Resume) {
	runCtx, cancel := context.WithCancelCause(context.Background())
	j := &clusterJob{s: s, info: info, cancel: cancel, finished: make(chan struct{})}
	s.mu.Lock()
	j.term = s.term
	s.jobs[info.ID] = j
	s.mu.Unlock()
	go func() {
		defer close(j.finished)
		s.run(runCtx, j, book, resume)
		s.mu.Lock()
		if s.jobs[info.ID] == j {
			delete(s.jobs, info.ID)
		}
		s.mu.Unlock()
	}()
}

// run drives one job from placement to its end, or until this node stops leading.
// book is the job's epoch book (nil: a new job's, empty); resume, when set, makes
// the job begin by relaunching from the book's newest surviving epoch, as a new
// coordinator does with a job whose coordinator was lost.
func (s *Service) run(ctx context.Context, j *clusterJob, book *epochs.Book, resume *coord.Resume) {
	info := j.snapshot()
	if info.Spec.Farm != nil {
		var ledger json.RawMessage
		if s.cfg.Store != nil {
			if _, stored, err := s.cfg.Store.Job(info.ID); err == nil {
				ledger = stored
			}
		}
		farmrun.Run(ctx, farmrun.Config{ClusterConfig: s.cfg.cluster(), Agent: s.cfg.Agent}, farmRecord{j}, ledger)
		return
	}
	out := coord.Output{
		Stdout: &lineEvents{job: j, typ: job.EventOutput},
		Stderr: &lineEvents{job: j, typ: job.EventOutputErr},
		Events: j.event,
	}
	cr := coord.NewClusterRun(s.cfg.cluster(), j, out, book, resume)
	j.mu.Lock()
	j.backend = cr
	j.mu.Unlock()
	res := cr.Run(ctx)
	if errors.Is(context.Cause(ctx), coord.ErrLostLead) {
		// The new leader takes the job over from what the store holds; this node
		// must only make sure its run is gone (the run has stopped the launcher).
		return
	}
	cr.Ended()
	done := res.Done()
	j.end(func(a *job.Job) {
		a.Ended, a.Restarts, a.Reason = time.Now(), res.Restarts, done.Reason
		a.ExitCode, a.Exhausted = &done.ExitCode, done.Exhausted
	}, job.NewEvent(job.EventEnd, res.Reason, done))
	// The nodes are cleared after the end is written: whoever waits for the
	// job learns of it without waiting for them. A job kept with --keep keeps
	// its shards too; the agents' retention removes them when its time is up.
	cr.Clear(res.State == job.Succeeded && info.Spec.Keep == 0)
}

// cluster is what the cluster runs of the jobs this node drives need of it.
func (c Config) cluster() coord.ClusterConfig {
	return coord.ClusterConfig{Node: c.Node, DataDir: c.DataDir, ShoalBin: c.ShoalBin, Nodes: c.Nodes, Peer: c.Peer,
		Links: c.Links, OnBook: c.OnBook, Failures: c.Failures, NodeLost: c.NodeLost, ReadKept: readKept, OpenKeep: openKeep}
}

// openKeep opens the object store a job's coordinator keeps its epochs in,
// with this agent's credentials.
func openKeep(t job.DurableTarget) (coord.EpochStore, error) {
	if !durable.HasCredentials() {
		return nil, fmt.Errorf("%w at %s", durable.ErrNoCredentials, t.Location)
	}
	loc, err := durable.ParseLocation(t.Location)
	if err != nil {
		return nil, err
	}
	if loc.Bucket == "" {
		return nil, fmt.Errorf("durable: %s: not an object store", t.Location)
	}
	return durable.NewS3Store(loc, durable.S3Options{Endpoint: t.Endpoint})
}

// readKept reads the manifest of the epoch kept reports, with this agent's
// credentials.
func readKept(ctx context.Context, kept job.Durable) (durable.Manifest, error) {
	return durable.ReadKept(ctx, kept.Location, kept.Endpoint, kept.Epoch)
}

// driver returns the job this node drives, or nil.
func (s *Service) driver(id string) *clusterJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id]
}

// Jobs lists the cluster's jobs, oldest first, as this node's replica holds them.
func (s *Service) Jobs(ctx context.Context) ([]job.Job, error) {
	return s.cfg.Store.Jobs(), nil
}

// Job returns one job, as this node's replica holds it.
func (s *Service) Job(ctx context.Context, id string) (job.Job, error) {
	info, _, err := s.cfg.Store.Job(id)
	if err != nil {
		return job.Job{}, job.NotFound(id)
	}
	return info, nil
}

// Cancel stops a running job; a node that does not lead passes it on.
func (s *Service) Cancel(ctx context.Context, id string) (job.Job, error) {
	info, err := s.Job(ctx, id)
	if err != nil {
		return job.Job{}, err
	}
	if !info.Ended.IsZero() {
		return info, fmt.Errorf("%w: job %s has already ended", errkind.Conflict, id)
	}
	if !s.leads(ctx) {
		c, err := s.leader(ctx)
		if err != nil {
			return info, err
		}
		return c.Cancel(ctx, id)
	}
	j := s.driver(id)
	if j == nil {
		return info, fmt.Errorf("%w: job %s is being taken over; try again", errkind.NotAvailable, id)
	}
	j.cancel(nil)
	return j.snapshot(), nil
}

// Events sends the job's events from seq from on, following new ones if asked,
// from this node's replica: every node answers the same.
func (s *Service) Events(ctx context.Context, id string, from uint64, follow bool, send func(job.Event) error) error {
	next := max(from, 1)
	for {
		events, ended, _, changed, err := s.cfg.Store.Events(id, next)
		if err != nil {
			return job.NotFound(id)
		}
		for _, e := range events {
			if err := send(e); err != nil {
				return err
			}
			next = e.Seq + 1
		}
		if !follow || (ended && len(events) == 0) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Launch serves a launch request through the node's launch service.
func (s *Service) Launch(ctx context.Context, req api.LaunchRequest) (func(conn io.ReadWriteCloser), error) {
	if s.cfg.Launch == nil {
		return nil, fmt.Errorf("%w: this node does not launch MPI daemons", errkind.NotAvailable)
	}
	return s.cfg.Launch(ctx, req)
}

// HasFile reports whether a job file is in this node's cache.
func (s *Service) HasFile(ctx context.Context, sum string) (bool, error) {
	return s.cache.Use(sum), nil
}

// GetFile opens a job file of this node's cache.
func (s *Service) GetFile(ctx context.Context, sum string) (io.ReadCloser, int64, error) {
	f, err := os.Open(s.cache.Path(sum))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: file %s", errkind.NotFound, sum)
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// PutFile stores a job file in this node's cache.
func (s *Service) PutFile(ctx context.Context, sum string, size int64, r io.Reader) error {
	err := s.cache.Put(sum, r)
	if errors.Is(err, files.ErrHashMismatch) {
		return fmt.Errorf("%w: %v", errkind.BadRequest, err)
	}
	return err
}

// Evacuate moves every job with ranks on node off it without losing work: each takes
// a checkpoint, then relaunches on the other nodes from it. It returns once all have
// (or ctx ends). A leaving node's agent calls it through the API before it leaves.
func (s *Service) Evacuate(ctx context.Context, node string) error {
	if !s.leads(ctx) {
		c, err := s.leader(ctx)
		if err != nil {
			return err
		}
		return c.Evacuate(ctx, node)
	}
	return s.reconfigure(ctx, "", node, fmt.Sprintf("node %s leaving", node))
}

// KeptDurable records in job id's record, with an event ("epoch 4 kept in
// s3://lab/jobs/heat (1.2 s)"), that its epoch req.Epoch is kept outside the
// cluster: `shoal jobs ID` shows it, and the events of the job say it to whoever
// follows them. The leader, which drives the job, records it. A report that the
// epoch is being copied (req.Copying) keeps it on the nodes until it is kept.
func (s *Service) KeptDurable(ctx context.Context, id string, req api.DurableRequest) error {
	if !s.leads(ctx) {
		c, err := s.leader(ctx)
		if err != nil {
			return err
		}
		return c.KeptDurable(ctx, id, req)
	}
	j := s.driver(id)
	if j == nil {
		if _, err := s.Job(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: job %s has already ended", errkind.Conflict, id)
	}
	j.mu.Lock()
	done, b := j.done, j.backend
	j.mu.Unlock()
	if done {
		return fmt.Errorf("%w: job %s has already ended", errkind.Conflict, id)
	}
	if req.Copying {
		if b != nil {
			b.Pin(req.Epoch)
		}
		return nil
	}
	if b != nil {
		b.Pin(0)
	}
	msg := fmt.Sprintf("epoch %d kept in %s", req.Epoch, req.Location)
	switch {
	case req.Uploaders > 0:
		msg += fmt.Sprintf(" (%.1f s, uploaded by %s)", req.Took, job.Plural(req.Uploaders, "node"))
	case req.Took > 0:
		msg += fmt.Sprintf(" (%.1f s)", req.Took)
	}
	e := job.NewEvent(job.EventDurable, msg, job.Durable{Epoch: req.Epoch, Location: req.Location, Endpoint: req.Endpoint})
	e.Epoch = req.Epoch
	j.event(e)
	return nil
}

// Rebalance relaunches job id from a fresh checkpoint over every live node, so that
// nodes that joined since its launch are used.
func (s *Service) Rebalance(ctx context.Context, id string, req api.RebalanceRequest) (job.Job, error) {
	if _, err := s.Job(ctx, id); err != nil {
		return job.Job{}, err
	}
	if !s.leads(ctx) {
		c, err := s.leader(ctx)
		if err != nil {
			return job.Job{}, err
		}
		return c.Rebalance(ctx, id, req)
	}
	j := s.driver(id)
	if j == nil {
		return job.Job{}, fmt.Errorf("%w: job %s has already ended", errkind.Conflict, id)
	}
	if j.snapshot().Spec.Farm != nil {
		return j.snapshot(), fmt.Errorf("%w: job %s is a task farm: each task already goes to a node with room, new nodes included", errkind.Conflict, id)
	}
	j.mu.Lock()
	done, b := j.done, j.backend
	j.mu.Unlock()
	if done || b == nil {
		return j.snapshot(), fmt.Errorf("%w: job %s has already ended", errkind.Conflict, id)
	}
	var refused string
	rc := coord.Reconfig{Reason: "rebalancing over the live nodes", Force: req.Force, Refused: &refused, Done: make(chan struct{})}
	if !b.Reconfigure(rc) {
		return j.snapshot(), fmt.Errorf("%w: job %s is already being reconfigured", errkind.Conflict, id)
	}
	select {
	case <-rc.Done:
	case <-ctx.Done():
		return job.Job{}, ctx.Err()
	}
	if refused != "" {
		return j.snapshot(), fmt.Errorf("%w: not rebalancing job %s: %s", errkind.Conflict, id, refused)
	}
	return j.snapshot(), nil
}

func (s *Service) reconfigure(ctx context.Context, only, without, reason string) error {
	s.mu.Lock()
	var waits []chan struct{}
	for id, j := range s.jobs {
		j.mu.Lock()
		running := !j.done && j.backend != nil
		b := j.backend
		j.mu.Unlock()
		if !running || (without != "" && !b.Uses(without)) || (only != "" && id != only) {
			continue
		}
		rc := coord.Reconfig{Without: without, Reason: reason, Done: make(chan struct{})}
		if b.Reconfigure(rc) {
			waits = append(waits, rc.Done)
		}
	}
	s.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// encryptMessage is the event that says a job's MPI between nodes is
// encrypted, and who asked: the agent of node (byAgent), else the job or the
// node that passed it on, which this one cannot tell apart.
func encryptMessage(byAgent bool, node string) string {
	if byAgent {
		return fmt.Sprintf("MPI between nodes encrypted (on the overlay's TLS tunnels): node %s's agent runs with --mpi-encrypt", node)
	}
	return "MPI between nodes encrypted (on the overlay's TLS tunnels): asked by the job (shoal run --mpi-encrypt) or by the agent it was submitted to (shoal agent --mpi-encrypt)"
}
