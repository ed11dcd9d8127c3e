package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/errkind"
	"shoal/internal/links"
	"shoal/internal/node"
	"shoal/internal/shard"

	"shoal/internal/api"
	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/farm"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/jobstore"
	"shoal/internal/mtbf"
	"shoal/internal/userdir"
)

// Peer is what the coordinator needs of a node's agent (its own included). Methods
// must be safe for concurrent use.
type Peer interface {
	PutFile(ctx context.Context, sum string, r io.Reader, size int64) error
	// Grant allows the node to start MPI daemons for a job (req.Job), which
	// runs req.Ranks of its ranks there (the node announces them), and
	// returns those of req.Files the node lacks; Revoke kills what it started
	// for the job (fencing an old run) and withdraws the ranks.
	Grant(ctx context.Context, req api.GrantRequest) (missing []string, err error)
	Revoke(ctx context.Context, job string) error
	// Shards returns the node's index of the job: the shards it holds and has
	// verified, the job's progress as a rank 0 on the node last reported it, and
	// the index's tag. With known not empty and wait > 0 it is a long poll: the
	// node answers once its index is not the one tagged known, or as it is
	// after wait; ctx must allow for the wait.
	Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error)
	// Fetch makes the node copy a shard from the agent at API address from.
	Fetch(ctx context.Context, ref shard.Ref, from string) (api.Fetched, error)
	// Encode makes the node compute and store a parity row of a group of the
	// job's shards of epoch, from the shards on the nodes the request names,
	// and push the rows the request lists to their nodes.
	Encode(ctx context.Context, job string, epoch uint64, req api.EncodeRequest) (api.EncodeResult, error)
	// Rebuild makes the node rebuild a shard from its parity group's pieces.
	Rebuild(ctx context.Context, ref shard.Ref, req api.RebuildRequest) error
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
}

// ServiceConfig wires a coordinator into its node.
type ServiceConfig struct {
	Node     string // this node's name
	DataDir  string // this agent's data dir: files/, jobs/, ckpt/
	ShoalBin string // the shoal executable (rank wrapper and rsh agent)
	// Engine launches the jobs submitted to this node that name none ("": Open
	// MPI); the job keeps it wherever it is coordinated.
	Engine string
	// Nodes returns the cluster's nodes as membership sees them now.
	Nodes func(ctx context.Context) ([]node.Node, error)
	// Peer returns a client of another node's agent.
	Peer func(n node.Node) Peer
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

// Service is the job coordinator of one agent: it implements [api.JobService] and
// [api.DataService]. While its node leads the job store it drives every job;
// otherwise it answers from the store and passes requests on to the leader. It is
// safe for concurrent use.
type Service struct {
	cfg   ServiceConfig
	cache files.Cache
	mu    sync.Mutex
	jobs  map[string]*clusterJob // the jobs this node drives
	// term counts this node's terms as leader: a job driven in an earlier term
	// writes nothing more, even if this node leads again by the time it stops.
	term uint64
	// taken is closed once this node, leading, has taken over the jobs the store
	// holds (takeOver). A job submitted before then would be found by that scan
	// with no driver yet, and driven twice.
	taken chan struct{}
}

var (
	_ api.JobService  = (*Service)(nil)
	_ api.DataService = (*Service)(nil)
)

// NewService returns a coordinator for the node described by cfg.
// It follows the node's leadership of the store from then on.
func NewService(cfg ServiceConfig) *Service {
	s := &Service{cfg: cfg, cache: files.Cache{Dir: filepath.Join(cfg.DataDir, "files")}, jobs: map[string]*clusterJob{},
		taken: make(chan struct{})}
	if cfg.Store != nil {
		go s.lead()
	} else {
		s.markTaken()
	}
	return s
}

// Done is how r ended, as the job's done event carries it: a job that did not
// succeed and has no exit code of its own gets 1.
func (r Result) Done() job.Done {
	code := r.ExitCode
	if r.State != job.Succeeded && code == 0 {
		code = 1
	}
	return job.Done{State: job.State(r.State), ExitCode: code, Reason: r.Reason, Exhausted: r.Exhausted}
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

// Submit creates a job and starts it. The leader of the job store coordinates
// it; another node passes the job's files and the request on to the leader.
func (s *Service) Submit(ctx context.Context, spec job.Spec) (job.Job, error) {
	if spec.Engine == "" { // the node submitted to decides, not the leader
		spec.Engine = s.cfg.Engine
	}
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
		id = NewJobID(spec.Argv[0])
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
	var resume *Resume
	if spec.ResumeEpoch > 0 {
		// Checked before the job is recorded: a job that cannot resume is refused,
		// not started from the beginning.
		var err error
		if book, resume, err = s.resumeDurable(ctx, info); err != nil {
			return job.Job{}, fmt.Errorf("%w: job %s: %v", errkind.BadRequest, id, err)
		}
	}
	first := []job.Event{job.NewEvent(job.EventState, submittedMessage(spec.Owner, os.Getuid(), s.cfg.Node), nil)}
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
func (s *Service) resumeDurable(ctx context.Context, info job.Job) (*epochs.Book, *Resume, error) {
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
	book := newBook(spec)
	if err := book.Resume(spec.ResumeEpoch, indexes); err != nil {
		return nil, nil, fmt.Errorf("cannot resume from epoch %d kept in %s: %v", spec.ResumeEpoch, spec.ResumeFrom, err)
	}
	if n := book.Ranks(spec.ResumeEpoch); !spec.Elastic() && n != spec.Ranks {
		return nil, nil, fmt.Errorf("cannot resume from epoch %d kept in %s: it was written by %d ranks and the job runs %d (an elastic job, --min-ranks/--max-ranks, resumes on another count)",
			spec.ResumeEpoch, spec.ResumeFrom, n, spec.Ranks)
	}
	why := fmt.Sprintf("resuming from epoch %d kept in %s", spec.ResumeEpoch, spec.ResumeFrom)
	return &book, &Resume{Durable: true, Why: why}, nil
}

// newBook is the empty epoch book of a job of spec.
func newBook(spec job.Spec) epochs.Book {
	red := spec.Redundancy
	if red == 0 {
		red = 2
	}
	if p := spec.Parity; p != nil {
		red = p.M + 1
	}
	book := epochs.NewBook(spec.Ranks, red)
	if p := spec.Parity; p != nil {
		book.Parity = &epochs.ParitySpec{K: p.K, M: p.M}
	}
	return book
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
func (s *Service) start(info job.Job, book *epochs.Book, resume *Resume) {
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

// NewJobID names a new job after its program, with a random suffix: "heat-3f9a2c".
func NewJobID(program string) string {
	var b [3]byte
	rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, filepath.Base(program))
	if len(name) > 50 {
		name = name[:50]
	}
	return name + "-" + hex.EncodeToString(b[:])
}

// run drives one job from placement to its end, or until this node stops leading.
// book is the job's epoch book (nil: a new job's, empty); resume, when set, makes
// the job begin by relaunching from the book's newest surviving epoch, as a new
// coordinator does with a job whose coordinator was lost.
func (s *Service) run(ctx context.Context, j *clusterJob, book *epochs.Book, resume *Resume) {
	info := j.snapshot()
	if info.Spec.Farm != nil {
		s.runFarm(ctx, j)
		return
	}
	spec := info.Spec
	spec.ID = info.ID                              // a job stored before the spec carried its id
	launcher, _ := engine.ByName(info.Spec.Engine) // the spec was validated
	cfg := Config{
		CkptRoot: filepath.Join(s.cfg.DataDir, "ckpt"), RunRoot: s.runRoot(),
		ShoalBin: s.cfg.ShoalBin, Engine: launcher, PollInterval: 200 * time.Millisecond, KillGrace: 3 * time.Second,
		NodeLost: s.cfg.NodeLost,
	}
	out := Output{
		Stdout: &lineEvents{job: j, typ: job.EventOutput},
		Stderr: &lineEvents{job: j, typ: job.EventOutputErr},
		Events: j.event,
	}
	if book == nil {
		fresh := newBook(info.Spec)
		book = &fresh
	}
	rj := newJob(cfg, spec, out)
	rj.resume = resume
	j.mu.Lock()
	j.backend = newClusterBackend(s, j, rj, *book)
	cb := j.backend
	j.mu.Unlock()
	if info.Ranks > 0 {
		rj.ranks = info.Ranks // the count of the run another coordinator ran
	}
	if resume != nil {
		cb.seedRun(info.Placement, info.Avoid, resume.Lost)
		cb.fenceAll(ctx)
		// This node's record of the complete epochs starts from the book it took
		// over, not from the first epoch completed under it: a job that ends
		// before one does still leaves it.
		cb.writeManifest()
	}
	if cb.onBook == nil && s.cfg.Store != nil {
		// The store keeps the book, so that the next leader resumes from it.
		cb.onBook = func(book epochs.Book) {
			if b, err := json.Marshal(book); err == nil {
				j.writeBook(b)
			}
		}
	}
	var res Result
	if err := spec.Validate(); err != nil {
		res = rj.fail(err.Error())
	} else if err := runDir(cfg.RunRoot, spec.ID); err != nil {
		res = rj.fail(err.Error())
	} else {
		rj.be = cb
		res = rj.loop(ctx)
	}
	if errors.Is(context.Cause(ctx), errLostLead) {
		// The new leader takes the job over from what the store holds; this node
		// must only make sure its run is gone (loop has stopped the launcher).
		return
	}
	// Nobody waits in vain for a relaunch of a job that has ended.
	if cb.pending != nil {
		close(cb.pending.done)
	}
drain:
	for {
		select {
		case rc := <-cb.reconfigs:
			close(rc.done)
		default:
			break drain
		}
	}
	done := res.Done()
	j.end(func(a *job.Job) {
		a.Ended, a.Restarts, a.Reason = time.Now(), res.Restarts, done.Reason
		a.ExitCode, a.Exhausted = &done.ExitCode, done.Exhausted
	}, job.NewEvent(job.EventEnd, res.Reason, done))
	// The nodes are cleared after the end is written: whoever waits for the
	// job learns of it without waiting for them.
	for name := range cb.nodes {
		go func(p Peer) {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Revoke(cctx, info.ID)
			// A job kept with --keep keeps its shards too; the agents'
			// retention removes them when its time is up.
			if res.State == job.Succeeded && info.Spec.Keep == 0 {
				p.RemoveShardsBefore(cctx, info.ID, ^uint64(0))
			}
		}(cb.peer(name))
	}
}

// setUp grants job info to the node of peer, which runs ranks of its ranks,
// and copies it the job's files it lacks from this node's cache (those of its
// instruction set, arch), returning those it copied. The grant asks which files the node lacks: a node that
// has them all (the same content hashes) costs one request. The node this
// service runs on holds them already (the submitter uploaded them here).
func (s *Service) setUp(ctx context.Context, peer Peer, node, arch string, info job.Job, ranks int, meter *stageMeter) ([]job.File, error) {
	req := api.GrantRequest{Job: info.ID, Coordinator: s.cfg.Node, Ranks: ranks, TTL: job.Duration(24 * time.Hour), Owner: info.Spec.Owner}
	files := info.Spec.FilesFor(arch)
	if node != s.cfg.Node {
		for _, f := range files {
			req.Files = append(req.Files, f.SHA256)
		}
	}
	missing, err := peer.Grant(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	var copied []job.File
	for _, f := range files {
		if slices.Contains(missing, f.SHA256) {
			meter.expect(node, f.Size)
		}
	}
	for _, f := range files {
		if !slices.Contains(missing, f.SHA256) {
			continue
		}
		r, err := os.Open(s.cache.Path(f.SHA256))
		if err != nil {
			return copied, err
		}
		err = peer.PutFile(ctx, f.SHA256, meter.reader(node, r), f.Size)
		r.Close()
		if err != nil {
			return copied, fmt.Errorf("file %s: %w", f.Name, err)
		}
		copied = append(copied, f)
	}
	return copied, nil
}

// describeStaging says which files went to which nodes, and which nodes had them
// all: "staged heat, in.txt (1.2 MB) to n2, n3; n1 had them", or "job files
// already on every node (n1, n2, n3): nothing staged". copied is by node, for
// every node of the launch.
// stagedData is the data of the stage event of copied: the bytes staged.
func stagedData(copied map[string][]job.File) json.RawMessage {
	var s job.Staged
	for _, files := range copied {
		for _, f := range files {
			s.Bytes += f.Size
		}
	}
	b, _ := json.Marshal(s)
	return b
}

func describeStaging(copied map[string][]job.File) string {
	groups := map[string][]string{} // "names (size)" → nodes
	var had []string
	for node, files := range copied {
		if len(files) == 0 {
			had = append(had, node)
			continue
		}
		names := make([]string, len(files))
		var size int64
		for i, f := range files {
			names[i], size = f.Name, size+f.Size
		}
		key := fmt.Sprintf("%s (%s)", strings.Join(names, ", "), byteSize(size))
		groups[key] = append(groups[key], node)
	}
	sort.Strings(had)
	if len(groups) == 0 {
		return fmt.Sprintf("job files already on every node (%s): nothing staged", strings.Join(had, ", "))
	}
	var parts []string
	for key, nodes := range groups {
		sort.Strings(nodes)
		parts = append(parts, key+" to "+strings.Join(nodes, ", "))
	}
	sort.Slice(parts, func(i, j int) bool {
		return parts[i][strings.LastIndex(parts[i], " to "):] < parts[j][strings.LastIndex(parts[j], " to "):]
	})
	msg := "staged " + strings.Join(parts, "; ")
	if len(had) > 0 {
		msg += "; " + strings.Join(had, ", ") + " had them"
	}
	return msg
}

// byteSize writes n bytes for people: "512 B", "17.3 kB", "1.2 MB".
func byteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
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
	rc := reconfig{reason: "rebalancing over the live nodes", force: req.Force, refused: &refused, done: make(chan struct{})}
	select {
	case b.reconfigs <- rc:
	default:
		return j.snapshot(), fmt.Errorf("%w: job %s is already being reconfigured", errkind.Conflict, id)
	}
	select {
	case <-rc.done:
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
		running := !j.done && j.backend != nil && j.backend.j != nil
		onNode := without == "" || j.placement.Counts()[without] > 0
		b := j.backend
		j.mu.Unlock()
		if !running || !onNode || (only != "" && id != only) {
			continue
		}
		rc := reconfig{without: without, reason: reason, done: make(chan struct{})}
		select {
		case b.reconfigs <- rc:
			waits = append(waits, rc.done)
		default:
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

// runRoot holds the directories of the runs of the jobs this node coordinates
// (DATA/coord).
func (s *Service) runRoot() string { return filepath.Join(s.cfg.DataDir, "coord") }

// runDir makes the directory of job's runs in root, both the agent's, which no
// user can write: a coordinator running as root writes its launch files there,
// and must not be led by a user's link. Both are passable by all but listed by
// none (the launcher of a user's job runs as that user and reads the files
// launchFiles gives it); the files that hold the job's output or describe its
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
