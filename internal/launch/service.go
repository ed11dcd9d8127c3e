package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/userdir"
)

// Errors. Launch and Grant also return errors wrapping [errkind.NotFound] and
// [errkind.BadRequest], which the API server answers as 404 and 400.
var (
	// ErrProtocol: a peer broke the launch protocol (unknown frame type,
	// oversized or malformed frame).
	ErrProtocol = errors.New("launch: protocol error")
	// ErrConnLost: the connection ended before the exit frame.
	ErrConnLost = errors.New("launch: connection lost before the command's exit status")
	// ErrClosed: the service has been closed (the agent is stopping).
	ErrClosed = errors.New("launch: service closed")
)

// Defaults of [Config].
const (
	DefaultKillGrace = time.Second
	DefaultMaxTTL    = 24 * time.Hour
)

// ExitCannotStart is the exit code reported when the agent could not start
// the command at all (its reason is sent on stderr first): 255, what ssh
// reports for its own failures.
const ExitCannotStart = 255

// Config configures a [Service].
type Config struct {
	// Node is this node's name, for messages.
	Node string
	// DataDir is the node's data dir. Launched commands run in it and find it
	// in $SHOAL_NODE_DATA. It also identifies this agent's processes (see
	// [MarkerVar]); the agent's lock makes it unique on the machine. Required.
	DataDir string
	// ExecDir is put first in the PATH of launched commands, so that daemons
	// find the same shoal (for `shoal exec-rank`, `shoal rsh`). Default: the
	// directory of the running executable.
	ExecDir string
	// ExtraDaemons are the paths of programs a launch may start besides the
	// daemons [FindDaemons] finds at [New] (tests' stand-ins for orted).
	ExtraDaemons []string
	// KillGrace is how long a command gets between SIGTERM and SIGKILL when
	// its connection is lost. Default: [DefaultKillGrace].
	KillGrace time.Duration
	// MaxTTL bounds a grant's time to live. Default: [DefaultMaxTTL].
	MaxTTL time.Duration
	// JobDirs are the directories of DataDir that hold one directory per job
	// its ranks write to (their working directory, their checkpoints): a grant
	// for a job with an owner makes the job's own directory in each, owned by
	// that user and readable by no other.
	JobDirs []string
	// Log receives a line per launch and per kill. Default: discard.
	Log *slog.Logger
	// IsMember, if set, reports whether a node of that name is a live member of
	// the cluster (alive or suspect): a grant must name such a coordinator, so
	// that a grant cannot stand for a node that does not exist (and whose death
	// would never revoke it). Nil accepts any name (tests without a cluster).
	// Must be safe for concurrent use.
	IsMember func(name string) bool
	// JobRanks, if set, returns the rank count of job as the node's replica of
	// the job store has it (ok false: not there yet, as for a job created a
	// moment ago): a grant may not give the node more of the job's ranks than
	// the job has. Must be safe for concurrent use.
	JobRanks func(job string) (ranks int, ok bool)
	// OnRanks, if set, is called after every change of the grants' ranks (the
	// agent then announces [Service.Ranks] in its node metadata). Calls are made
	// without the service's lock held and may come concurrently: read Ranks for
	// the latest count.
	OnRanks func()
	// OnGrant, if set, is called for a job once its grant is in place, before
	// any daemon of the run it is for can start: the agent withdraws requests
	// left for an earlier run of the job (a relaunch's hold must not hold the
	// relaunched ranks).
	OnGrant func(job string)
}

// Service starts MPI daemons on this node for jobs that a coordinator has
// granted, relays their stdio, exit status and signals over the launch
// protocol, and kills them (and everything they started) when their
// connection drops, their grant is revoked or the service closes. It
// implements [api.GrantService], and its Launch method has the signature of
// [api.JobService.Launch]. Its methods are safe for concurrent use.
type Service struct {
	cfg     Config
	owner   string // first part of every marker: identifies DataDir
	log     *slog.Logger
	daemons []Daemon // what a launch may start
	root    bool     // the agent runs as root: daemons must be root's alone
	self    string   // the agent's executable ([EnvAgentBin])

	mu     sync.Mutex
	grants map[string]grantEntry // by job
	procs  map[*proc]bool
	// stray holds the jobs of launches that ended without their clean-up
	// scan finishing (see killMarked): something of theirs may still run with
	// their marker although no proc stands for it.
	stray  map[string]bool
	seq    uint64
	closed bool
}

type grantEntry struct {
	coordinator string
	ranks       int // of the job's ranks, how many run on this node
	granted     time.Time
	expires     time.Time
	owner       *job.Owner // the user its daemons run as; nil: the agent's
}

var _ api.GrantService = (*Service)(nil)

// New returns a service with no grants. It kills nothing: call
// [Service.KillStale] to end what a previous agent on the same data dir left.
func New(cfg Config) (*Service, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("launch: Config.DataDir is required")
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("launch: data dir %q: %w", cfg.DataDir, err)
	}
	cfg.DataDir = dir
	if cfg.ExecDir == "" {
		if exe, err := os.Executable(); err == nil {
			cfg.ExecDir = filepath.Dir(exe)
		}
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sum := sha256.Sum256([]byte(dir))
	s := &Service{
		cfg:    cfg,
		owner:  hex.EncodeToString(sum[:8]),
		log:    cfg.Log,
		root:   os.Geteuid() == 0,
		grants: map[string]grantEntry{},
		procs:  map[*proc]bool{},
		stray:  map[string]bool{},
	}
	self, _ := os.Executable()
	s.self = self
	s.daemons = FindDaemons(s.launchPath(nil), self)
	for _, p := range cfg.ExtraDaemons {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("launch: extra daemon: %w", err)
		}
		s.daemons = append(s.daemons, Daemon{Path: real})
	}
	s.log.Info("launch daemons", "allowed", fmt.Sprint(s.daemons))
	return s, nil
}

// Grant allows launches for job, on behalf of the coordinator node, for ttl
// from now, and counts ranks of the job's ranks as this node's (see
// [Service.Ranks]). Granting again replaces the grant (a coordinator renews it
// before each relaunch, with the new count). The TTL bounds when launches may
// start, not how long they run: what runs is ended by [Service.Revoke], by
// losing its connection, or by [Service.RevokeCoordinator] when the
// coordinator's node is gone.
func (s *Service) Grant(id, coordinator string, ranks int, ttl time.Duration, owner *job.Owner) (api.Grant, error) {
	req := api.GrantRequest{Job: id, Coordinator: coordinator, Ranks: ranks, TTL: job.Duration(ttl), Owner: owner}
	if err := req.Validate(); err != nil {
		return api.Grant{}, err
	}
	if ttl <= 0 || ttl > s.cfg.MaxTTL {
		return api.Grant{}, fmt.Errorf("%w: ttl %v: want more than 0 and at most %v", errkind.BadRequest, ttl, s.cfg.MaxTTL)
	}
	if s.cfg.JobRanks != nil {
		if n, ok := s.cfg.JobRanks(id); ok && ranks > n {
			return api.Grant{}, fmt.Errorf("%w: ranks %d: job %s has %d", errkind.BadRequest, ranks, id, n)
		}
	}
	if s.cfg.IsMember != nil && !s.cfg.IsMember(coordinator) {
		return api.Grant{}, fmt.Errorf("%w: coordinator %q is not a live member of the cluster as node %s sees it", errkind.BadRequest, coordinator, s.cfg.Node)
	}
	if err := s.ownDirs(id, owner); err != nil {
		return api.Grant{}, fmt.Errorf("%w: node %s: directories of job %s for %s: %v", errkind.Internal, s.cfg.Node, id, owner, err)
	}
	now := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return api.Grant{}, fmt.Errorf("%w: node %s is stopping", errkind.NotAvailable, s.cfg.Node)
	}
	for j, g := range s.grants { // forget expired grants with nothing running
		if now.After(g.expires) && s.runningLocked(j) == 0 {
			delete(s.grants, j)
		}
	}
	g := grantEntry{coordinator: coordinator, ranks: ranks, granted: now, expires: now.Add(ttl), owner: owner}
	s.grants[id] = g
	s.mu.Unlock()
	s.log.Info("launch grant", "job", id, "coordinator", coordinator, "ranks", ranks, "ttl", ttl, "owner", owner.String())
	if s.cfg.OnGrant != nil {
		s.cfg.OnGrant(id)
	}
	s.ranksChanged()
	return api.Grant{Job: id, Coordinator: coordinator, Ranks: ranks, Expires: g.expires}, nil
}

// Ranks returns how many ranks of running jobs this node hosts: the sum of the
// ranks of its grants, from the grant until the revocation (the coordinator
// revokes a job's grants when the job ends or moves, and this node revokes
// those of a coordinator that died or left).
func (s *Service) Ranks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.grants {
		n += g.ranks
	}
	return n
}

func (s *Service) ranksChanged() {
	if s.cfg.OnRanks != nil {
		s.cfg.OnRanks()
	}
}

// Revoke withdraws job's grant and kills, with SIGKILL, every process started
// for job on this node: the daemons and everything they started (fencing). It
// returns once they are gone (or after a few seconds if some refuse to die).
// Revoking a job with no grant is not an error: fencing must be safe to
// repeat.
//
// A job with nothing running here costs no scan of the machine's processes:
// every launch kills what carries its marker when it ends (serve), so only a
// launch still registered, or one whose clean-up gave up, may have left
// something. Coordinators revoke every node of a run before each launch, so
// this keeps a launch's cost per node to a round trip.
func (s *Service) Revoke(jobID string) (api.Revoked, error) {
	if !job.ValidID(jobID) {
		return api.Revoked{}, fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", errkind.BadRequest, jobID)
	}
	s.mu.Lock()
	_, had := s.grants[jobID]
	delete(s.grants, jobID)
	procs := s.procsLocked(func(p *proc) bool { return p.job == jobID })
	scan := len(procs) > 0 || s.stray[jobID]
	delete(s.stray, jobID)
	s.mu.Unlock()
	if had {
		s.ranksChanged()
	}
	if scan && !s.kill(procs, s.owner+"/"+jobID+"/") {
		s.mu.Lock()
		s.stray[jobID] = true
		s.mu.Unlock()
	}
	if len(procs) > 0 {
		s.log.Info("launch grant revoked: killed its commands", "job", jobID, "commands", len(procs))
	}
	return api.Revoked{Job: jobID, Killed: len(procs)}, nil
}

// Coordinated returns the jobs coordinator holds grants of on this node, each
// with the time of its grant (the start of its run here).
func (s *Service) Coordinated(coordinator string) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for j, g := range s.grants {
		if g.coordinator == coordinator {
			out[j] = g.granted
		}
	}
	return out
}

// RevokeCoordinator revokes every job whose grant names coordinator, the
// node that has just died or left: its jobs' daemons here are stale (fencing).
// It returns the jobs revoked.
func (s *Service) RevokeCoordinator(coordinator string) []string {
	s.mu.Lock()
	var jobs []string
	for j, g := range s.grants {
		if g.coordinator == coordinator {
			jobs = append(jobs, j)
		}
	}
	s.mu.Unlock()
	sort.Strings(jobs)
	for _, j := range jobs {
		s.Revoke(j)
	}
	return jobs
}

// Running returns how many launched commands of job are running on this node.
func (s *Service) Running(job string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked(job)
}

func (s *Service) runningLocked(job string) int {
	n := 0
	for p := range s.procs {
		if p.job == job && !p.hasExited() {
			n++
		}
	}
	return n
}

func (s *Service) procsLocked(keep func(*proc) bool) []*proc {
	var out []*proc
	for p := range s.procs {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// Close revokes every grant, kills everything launched and refuses new
// grants and launches: the agent is stopping.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.grants = map[string]grantEntry{}
	procs := s.procsLocked(func(*proc) bool { return true })
	s.mu.Unlock()
	s.ranksChanged()
	s.kill(procs, s.owner+"/")
}

// KillStale kills the processes that an earlier agent on the same data dir
// launched and left behind when it died. Call it before serving launches.
func (s *Service) KillStale() int {
	n, _ := killMarked(under(s.owner + "/"))
	if n > 0 {
		s.log.Warn("killed processes left by an earlier agent on this data dir", "processes", n)
	}
	return n
}

// kill ends procs and every process whose marker begins with prefix (every
// proc's marker does), and waits (boundedly) until procs have been reaped. It
// returns whether the scan found none left (see killMarked).
func (s *Service) kill(procs []*proc, prefix string) (clean bool) {
	for _, p := range procs {
		p.signalGroup(syscall.SIGKILL)
	}
	_, clean = killMarked(under(prefix))
	timeout := time.After(5 * time.Second)
	for _, p := range procs {
		select {
		case <-p.ended:
		case <-timeout:
			s.log.Error("launched command still running after SIGKILL", "job", p.job, "pid", p.cmd.Process.Pid)
			return clean
		}
	}
	return clean
}

// Launch checks a launch request and returns the function that serves it on
// the switched connection: the method [api.JobService.Launch] describes.
//
// It refuses, wrapping [errkind.NotFound], a job without a live grant, and,
// wrapping [errkind.BadRequest], a command line that is not exactly one daemon:
// a single command of literal words ([DaemonArgv]) whose program, found as it
// is run (a name without a slash in the PATH below, any other as it is) and
// with its symbolic links resolved, is the file of one of the daemons of this
// node's MPI installations ([FindDaemons]) or of Config.ExtraDaemons, and, when
// the agent is root, a file only root can change (it and every directory above
// it root's, writable by no one else). The command line is req.Argv joined
// with spaces, as ssh would join it; its words are executed directly, never by
// a shell, in a new process group, in the data dir, with the agent's
// environment plus SHOAL_NODE_DATA (the data dir), PATH with Config.ExecDir
// first, req.Env and [MarkerVar]. What is executed is the file checked, not
// the name looked up again.
func (s *Service) Launch(ctx context.Context, req api.LaunchRequest) (func(io.ReadWriteCloser), error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	line := strings.Join(req.Argv, " ")
	s.mu.Lock()
	g, ok := s.grants[req.Job]
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: node %s is stopping", errkind.NotAvailable, s.cfg.Node)
	}
	if !ok || time.Now().After(g.expires) {
		return nil, fmt.Errorf("%w: job %s has no live launch grant on node %s (its coordinator grants one before launching)", errkind.NotFound, req.Job, s.cfg.Node)
	}
	argv, err := DaemonArgv(line)
	var program string
	if err == nil {
		program, err = s.daemonFile(argv, req.Env)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: node %s only launches MPI daemons (its MPI installations' own), executed without a shell, and refuses %s: %w",
			errkind.BadRequest, s.cfg.Node, abbrev(line, 80), err)
	}
	return func(conn io.ReadWriteCloser) { s.serve(req, argv, program, conn) }, nil
}

// daemonFile returns the file argv's program is, found as the launch runs it
// (in the PATH that extra gives it) with its symbolic links resolved, if it is
// one of the daemons and, for a root agent, root's alone (see [Service.Launch]).
func (s *Service) daemonFile(argv []string, extra map[string]string) (string, error) {
	found, err := lookPath(argv[0], s.cfg.DataDir, s.launchPath(extra))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotDaemon, err)
	}
	program, err := filepath.EvalSymlinks(found)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotDaemon, err)
	}
	if err := checkDaemon(argv, program, s.daemons); err != nil {
		return "", err
	}
	if s.root {
		if err := rootOnly(program); err != nil {
			return "", err
		}
	}
	return program, nil
}

// abbrev quotes s, cut to n bytes.
func abbrev(s string, n int) string {
	if len(s) > n {
		return strconv.Quote(s[:n]) + "…"
	}
	return strconv.Quote(s)
}

// cut cuts s to n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// launchPath is the PATH of a launched command: the agent's with
// Config.ExecDir first, unless extra (the request's environment) sets one.
func (s *Service) launchPath(extra map[string]string) string {
	if p, ok := extra["PATH"]; ok {
		return p
	}
	path := s.cfg.ExecDir
	if old := os.Getenv("PATH"); old != "" {
		path += string(os.PathListSeparator) + old
	}
	return path
}

// EnvAgentBin names, in a launched daemon's environment and so its ranks', the
// executable of the node's own agent: a coordinator of another instruction set
// starts ranks through it (`$SHOAL_AGENT_BIN exec-rank`), its own build being
// of no use there.
const EnvAgentBin = "SHOAL_AGENT_BIN"

// env is the environment of a launched command; later entries win.
func (s *Service) env(extra map[string]string, marker string) []string {
	env := os.Environ()
	env = append(env, "SHOAL_NODE_DATA="+s.cfg.DataDir, "PATH="+s.launchPath(nil), EnvAgentBin+"="+s.self)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return append(env, MarkerVar+"="+marker)
}

// Coordinators returns the nodes that coordinate the jobs granted here, each once,
// in name order: the nodes to ask to move their jobs away before this node leaves.
func (s *Service) Coordinators() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, g := range s.grants {
		if !seen[g.coordinator] {
			seen[g.coordinator] = true
			out = append(out, g.coordinator)
		}
	}
	sort.Strings(out)
	return out
}

// ownDirs gives a job with an owner its own directory in each of JobDirs, mode
// 0700, owned by that user with everything the agent already made in it (shards
// copied here before the grant): its ranks, which run as the owner, write there,
// and no other user reads it. A job without an owner keeps the agent's
// directories. The owner may have changed anything in the directory since an
// earlier run: nothing in it is followed ([userdir.Tree.Give]), and a directory
// that belongs to another user is refused.
func (s *Service) ownDirs(job string, owner *job.Owner) error {
	if owner == nil {
		return nil
	}
	for _, d := range s.cfg.JobDirs {
		base := filepath.Join(s.cfg.DataDir, d)
		if err := os.MkdirAll(base, 0o755); err != nil { // the agent's own
			return err
		}
		t := userdir.Tree{Base: base}
		dir := filepath.Join(base, job)
		if err := t.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		fi, err := t.Lstat(dir)
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || int(st.Uid) != os.Geteuid() && int(st.Uid) != owner.UID {
			return fmt.Errorf("%s: belongs to uid %d, not to %s", dir, st.Uid, owner)
		}
		if err := t.Give(dir, owner.UID, owner.GID); err != nil {
			return err
		}
		if err := t.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}
