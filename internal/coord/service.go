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
	"sort"
	"strings"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/engine"
	"shoal/internal/files"
	"shoal/internal/place"
)

// Peer is what the coordinator needs of a node's agent (its own included). Methods
// must be safe for concurrent use.
type Peer interface {
	HasFile(ctx context.Context, sum string) (bool, error)
	PutFile(ctx context.Context, sum string, r io.Reader, size int64) error
	// Grant allows the node to start MPI daemons for job, which runs ranks of its
	// ranks there (the node announces them); Revoke kills what it started for the
	// job (fencing an old run) and withdraws the ranks.
	Grant(ctx context.Context, job, coordinator string, ranks int, ttl time.Duration) error
	Revoke(ctx context.Context, job string) error
	// Shards lists the job's shards the node holds and has verified, and the job's
	// progress as a rank 0 on the node last reported it (nil: none).
	Shards(ctx context.Context, job string) ([]api.ShardInfo, *api.Progress, error)
	// Fetch makes the node copy a shard from the agent at API address from.
	Fetch(ctx context.Context, ref api.ShardRef, from string) error
	// RankStates reads how the job's ranks on the node ended.
	RankStates(ctx context.Context, job string) ([]engine.RankState, error)
	// RemoveShardsBefore deletes the job's epochs older than epoch on the node.
	RemoveShardsBefore(ctx context.Context, job string, epoch uint64) error
	// RequestCheckpoint asks the job's rank 0 on the node for a checkpoint now.
	RequestCheckpoint(ctx context.Context, job string) error
	// RequestHold asks for a checkpoint after which the ranks wait to be stopped.
	RequestHold(ctx context.Context, job string) error
}

// ServiceConfig wires a coordinator into its node.
type ServiceConfig struct {
	Node       string // this node's name
	DataDir    string // this agent's data dir: files/, jobs/, ckpt/
	SecretFile string // given to `shoal rsh` through the launcher's environment
	ShoalBin   string // the shoal executable (rank wrapper and rsh agent)
	Engine     engine.OpenMPI
	// Nodes returns the cluster's nodes as membership sees them now.
	Nodes func(ctx context.Context) ([]api.Node, error)
	// Peer returns a client of another node's agent.
	Peer func(n api.Node) Peer
	// Launch serves launch requests for this node (see internal/launch); nil
	// refuses them.
	Launch func(ctx context.Context, req api.LaunchRequest) (func(conn io.ReadWriteCloser), error)
	// OnBook, when set, receives a copy of a job's epoch book whenever the job's
	// complete epochs change (one became complete, older ones were pruned), so
	// that a coordinator taking the job over can start from it (see [Resume]).
	// Never called concurrently for one job; it should return quickly.
	OnBook func(job string, book EpochBook)
}

// Service is the job coordinator of one agent: it implements [api.JobService] and
// [api.DataService]. It is safe for concurrent use.
type Service struct {
	cfg   ServiceConfig
	cache files.Cache
	mu    sync.Mutex
	jobs  map[string]*clusterJob
}

var (
	_ api.JobService  = (*Service)(nil)
	_ api.DataService = (*Service)(nil)
)

// NewService returns a coordinator for the node described by cfg.
func NewService(cfg ServiceConfig) *Service {
	return &Service{cfg: cfg, cache: files.Cache{Dir: filepath.Join(cfg.DataDir, "files")}, jobs: map[string]*clusterJob{}}
}

// clusterJob is one job this node coordinates, with its event log.
type clusterJob struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced at every new event
	info      api.Job
	events    []api.JobEvent
	cancel    context.CancelFunc
	done      bool
	placement place.Placement
	backend   *clusterBackend
}

func (j *clusterJob) record(typ, msg string, data any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := api.JobEvent{Seq: uint64(len(j.events) + 1), Time: time.Now(), Job: j.info.ID, Type: typ, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	j.events = append(j.events, e)
	close(j.changed)
	j.changed = make(chan struct{})
}

func (j *clusterJob) update(f func(*api.Job)) {
	j.mu.Lock()
	f(&j.info)
	j.mu.Unlock()
}

// DoneData is the data of a job's last event ("done"): how it ended.
type DoneData struct {
	State    api.JobState `json:"state"`
	ExitCode int          `json:"exit_code"`
	Reason   string       `json:"reason,omitempty"`
}

// Submit creates a job coordinated by this node and starts it.
func (s *Service) Submit(ctx context.Context, spec api.JobSpec) (api.Job, error) {
	for _, f := range spec.Files {
		if !s.cache.Has(f.SHA256) {
			return api.Job{}, fmt.Errorf("%w: file %s (%s) was not uploaded to this node first", api.ErrBadRequest, f.Name, f.SHA256)
		}
	}
	id := spec.ID
	if id == "" {
		id = NewJobID(spec.Argv[0])
	}
	j := &clusterJob{changed: make(chan struct{}), info: api.Job{
		ID: id, State: api.JobPending, Spec: spec, Coordinator: s.cfg.Node, Submitted: time.Now(),
	}}
	runCtx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	s.mu.Lock()
	if _, taken := s.jobs[id]; taken {
		s.mu.Unlock()
		cancel()
		return api.Job{}, fmt.Errorf("%w: job %s exists on this node; choose another id", api.ErrConflict, id)
	}
	s.jobs[id] = j
	s.mu.Unlock()
	go s.run(runCtx, j, nil, nil)
	return j.snapshot(), nil
}

func (j *clusterJob) snapshot() api.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.info
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

// run drives one job from placement to its end. book is the job's epoch book
// (nil: a new job's, empty); resume, when set, makes the job begin by relaunching
// from the book's newest surviving epoch, as a new coordinator does with a job
// whose coordinator was lost.
func (s *Service) run(ctx context.Context, j *clusterJob, book *EpochBook, resume *Resume) {
	info := j.snapshot()
	spec := Spec{
		ID: info.ID, NRanks: info.Spec.Ranks, Program: info.Spec.Argv[0], Args: info.Spec.Argv[1:],
		CkptInterval: time.Duration(info.Spec.CheckpointInterval), MaxRestarts: info.Spec.MaxRestarts,
	}
	cfg := Config{
		CkptRoot: filepath.Join(s.cfg.DataDir, "ckpt"), RunRoot: filepath.Join(s.cfg.DataDir, "coord"),
		ShoalBin: s.cfg.ShoalBin, Engine: s.cfg.Engine, PollInterval: 200 * time.Millisecond, KillGrace: 3 * time.Second,
	}
	out := Output{
		Stdout: &lineEvents{job: j, typ: "output"},
		Stderr: &lineEvents{job: j, typ: "output-err"},
		Events: func(e Event) {
			if e.State != "" {
				j.update(func(a *api.Job) { a.State = e.State })
			}
			if e.Kind == EventEpoch {
				j.update(func(a *api.Job) { a.Epoch = e.Epoch })
			}
			j.record(e.Kind, e.Message, nil)
		},
	}
	red := info.Spec.Redundancy
	if red == 0 {
		red = 2
	}
	if book == nil {
		fresh := NewEpochBook(spec.NRanks, red)
		book = &fresh
	}
	rj := newJob(cfg, spec, out)
	rj.resume = resume
	j.mu.Lock()
	j.backend = newClusterBackend(s, j, rj, *book)
	cb := j.backend
	j.mu.Unlock()
	var res Result
	if err := spec.Validate(); err != nil {
		res = rj.fail(err.Error())
	} else if err := os.MkdirAll(filepath.Join(cfg.RunRoot, spec.ID), 0o755); err != nil {
		res = rj.fail(err.Error())
	} else {
		rj.be = cb
		res = rj.loop(ctx)
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
	for name := range cb.nodes {
		go func(p Peer) {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Revoke(cctx, info.ID)
			if res.State == api.JobSucceeded {
				p.RemoveShardsBefore(cctx, info.ID, ^uint64(0))
			}
		}(cb.peer(name))
	}
	code := res.ExitCode
	if res.State != api.JobSucceeded && code == 0 {
		code = 1
	}
	j.update(func(a *api.Job) {
		a.State, a.Ended, a.Restarts, a.Reason = res.State, time.Now(), res.Restarts, res.Reason
		a.ExitCode = &code
	})
	j.mu.Lock()
	j.done = true
	j.mu.Unlock()
	j.record("done", res.Reason, DoneData{State: res.State, ExitCode: code, Reason: res.Reason})
}

// stage copies every file of the job that peer lacks from this node's cache, and
// returns those it copied: a file the node's cache holds already (same content
// hash) is not sent again.
func (s *Service) stage(ctx context.Context, peer Peer, info api.Job) ([]api.File, error) {
	// Ask about every file at once, then send those missing.
	has := make([]bool, len(info.Spec.Files))
	errs := make([]error, len(info.Spec.Files))
	var wg sync.WaitGroup
	for i, f := range info.Spec.Files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			has[i], errs[i] = peer.HasFile(ctx, f.SHA256)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	var copied []api.File
	for i, f := range info.Spec.Files {
		if has[i] {
			continue
		}
		r, err := os.Open(s.cache.Path(f.SHA256))
		if err != nil {
			return copied, err
		}
		err = peer.PutFile(ctx, f.SHA256, r, f.Size)
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
func describeStaging(copied map[string][]api.File) string {
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

// lineEvents turns rank output into one event per line.
type lineEvents struct {
	job *clusterJob
	typ string
	buf []byte
}

func (l *lineEvents) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.job.record(l.typ, string(l.buf[:i]), nil)
		l.buf = l.buf[i+1:]
	}
}

func (s *Service) get(id string) (*clusterJob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("%w: no job %q on this node", api.ErrNotFound, id)
	}
	return j, nil
}

// Jobs lists the jobs this node coordinates, oldest first.
func (s *Service) Jobs(ctx context.Context) ([]api.Job, error) {
	s.mu.Lock()
	list := make([]*clusterJob, 0, len(s.jobs))
	for _, j := range s.jobs {
		list = append(list, j)
	}
	s.mu.Unlock()
	out := make([]api.Job, 0, len(list))
	for _, j := range list {
		out = append(out, j.snapshot())
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Submitted.Before(out[b].Submitted) })
	return out, nil
}

// Job returns one job.
func (s *Service) Job(ctx context.Context, id string) (api.Job, error) {
	j, err := s.get(id)
	if err != nil {
		return api.Job{}, err
	}
	return j.snapshot(), nil
}

// Cancel stops a running job.
func (s *Service) Cancel(ctx context.Context, id string) (api.Job, error) {
	j, err := s.get(id)
	if err != nil {
		return api.Job{}, err
	}
	j.mu.Lock()
	done := j.done
	j.mu.Unlock()
	if done {
		return j.snapshot(), fmt.Errorf("%w: job %s has already ended", api.ErrConflict, id)
	}
	j.cancel()
	return j.snapshot(), nil
}

// Events sends the job's events from seq from on, following new ones if asked.
func (s *Service) Events(ctx context.Context, id string, from uint64, follow bool, send func(api.JobEvent) error) error {
	j, err := s.get(id)
	if err != nil {
		return err
	}
	next := from
	if next == 0 {
		next = 1
	}
	for {
		j.mu.Lock()
		pending := append([]api.JobEvent(nil), j.events[min(int(next-1), len(j.events)):]...)
		done, changed := j.done, j.changed
		j.mu.Unlock()
		for _, e := range pending {
			if err := send(e); err != nil {
				return err
			}
			next = e.Seq + 1
		}
		if !follow || (done && len(pending) == 0) {
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
		return nil, fmt.Errorf("%w: this node does not launch MPI daemons", api.ErrNotAvailable)
	}
	return s.cfg.Launch(ctx, req)
}

// HasFile reports whether a job file is in this node's cache.
func (s *Service) HasFile(ctx context.Context, sum string) (bool, error) {
	return s.cache.Has(sum), nil
}

// PutFile stores a job file in this node's cache.
func (s *Service) PutFile(ctx context.Context, sum string, size int64, r io.Reader) error {
	err := s.cache.Put(sum, r)
	if errors.Is(err, files.ErrHashMismatch) {
		return fmt.Errorf("%w: %v", api.ErrBadRequest, err)
	}
	return err
}

// Evacuate moves every job with ranks on node off it without losing work: each takes
// a checkpoint, then relaunches on the other nodes from it. It returns once all have
// (or ctx ends). A leaving node's agent calls it through the API before it leaves.
func (s *Service) Evacuate(ctx context.Context, node string) error {
	return s.reconfigure(ctx, "", node, fmt.Sprintf("node %s leaving", node))
}

// Rebalance relaunches job id from a fresh checkpoint over every live node, so that
// nodes that joined since its launch are used.
func (s *Service) Rebalance(ctx context.Context, id string, req api.RebalanceRequest) (api.Job, error) {
	j, err := s.get(id)
	if err != nil {
		return api.Job{}, err
	}
	j.mu.Lock()
	done, b := j.done, j.backend
	j.mu.Unlock()
	if done || b == nil {
		return j.snapshot(), fmt.Errorf("%w: job %s has already ended", api.ErrConflict, id)
	}
	var refused string
	rc := reconfig{reason: "rebalancing over the live nodes", force: req.Force, refused: &refused, done: make(chan struct{})}
	select {
	case b.reconfigs <- rc:
	default:
		return j.snapshot(), fmt.Errorf("%w: job %s is already being reconfigured", api.ErrConflict, id)
	}
	select {
	case <-rc.done:
	case <-ctx.Done():
		return api.Job{}, ctx.Err()
	}
	if refused != "" {
		return j.snapshot(), fmt.Errorf("%w: not rebalancing job %s: %s", api.ErrConflict, id, refused)
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
