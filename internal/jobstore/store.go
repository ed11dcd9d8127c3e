package jobstore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"shoal/internal/job"
	"shoal/internal/liblog"
)

// Errors of the store. Callers test them with errors.Is.
var (
	ErrNotLeader  = errors.New("jobstore: this node does not lead the cluster")
	ErrNoLeader   = errors.New("jobstore: no leader: too few voting nodes answer for a quorum")
	ErrExists     = errors.New("jobstore: job exists")
	ErrNotFound   = errors.New("jobstore: no such job")
	ErrBadCommand = errors.New("jobstore: bad command")
	ErrConfig     = errors.New("jobstore: bad configuration")
	// ErrHasLeader refuses [Store.Recover] on a node that knows a leader: the
	// cluster has a quorum, and nothing is to be recovered.
	ErrHasLeader = errors.New("jobstore: a leader is known: the cluster has a quorum")
)

// Timing is how fast the store notices a lost leader. raft's own defaults (1 s)
// suit a WAN; the presets here are for the LAN and Wi-Fi clusters Shoal runs on.
type Timing struct {
	// HeartbeatTimeout: a follower that hears nothing from the leader for a
	// random time between this and twice this starts an election.
	HeartbeatTimeout time.Duration
	// ElectionTimeout: a candidate that wins no election in this long tries again.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout: a leader that cannot reach a quorum for this long steps
	// down (and its node stops coordinating). It must not exceed HeartbeatTimeout,
	// so that the old leader has stepped down before a new one can be elected.
	LeaderLeaseTimeout time.Duration
}

// DefaultTiming is the preset for a LAN whose nodes also run ranks: a leader
// that is cut off is replaced within about 2 to 4.5 s, one whose agent died
// within about 1.5 s (a follower that finds the leader's address refusing
// waits only the lease, see [Store]).
//
// The lease is what a loaded node must ride out. On the 2-core testbed, with 4
// ranks computing and 256 MB shards copied between the nodes, a plain TCP echo
// between two hosts (no agent in it) took up to 0.62 s to answer; a 500 ms
// lease stepped the leader down every minute or two there, and each time its
// jobs restarted from their newest epoch; a 300 ms lease did so on far less.
// The heartbeat timeout is twice the lease, so that a leader cut from its quorum
// has stepped down (and fenced its runs) before any follower can start an
// election, even when its last answer took a while to arrive.
func DefaultTiming() Timing { return LeaseTiming(DefaultLease) }

// DefaultLease is [DefaultTiming]'s leader lease.
const DefaultLease = time.Second

// LeaseTiming is [DefaultTiming] scaled to another lease: the heartbeat and
// election timeouts twice the lease, for the reason DefaultTiming gives. A
// longer lease keeps the lead on a node starved of CPU or behind a link that
// stalls (Wi-Fi; a host sharing its cores with a hundred others), and makes a
// lost leader's replacement slower by as much.
func LeaseTiming(lease time.Duration) Timing {
	return Timing{HeartbeatTimeout: 2 * lease, ElectionTimeout: 2 * lease, LeaderLeaseTimeout: lease}
}

// commitTimeout is how long the leader's replication to a follower waits for a
// new entry before it sends one anyway, empty but for the leader's commit
// index: only then does a follower learn that the last entries of a burst are
// committed and apply them, so reads on a follower (shoal jobs, events, logs,
// wait on any node) lag the leader by up to twice this after the last change.
// raft's 50 ms made the idle leader send every follower 13 such messages a
// second: on the testbed's 32 one-core hosts, the idle agents used 0.41 CPU-s a
// second (the leader's 17.5 % of a core), 0.22 with 250 ms (8.1 %).
const commitTimeout = 250 * time.Millisecond

// Config says how to open a [Store].
type Config struct {
	// Node is this node's name: its server id in the Raft configuration.
	Node string
	// Dir holds the log (raft.db) and snapshots; it is created.
	Dir string
	// Bind is the TCP address of the Raft transport, IP:PORT (port 0: a free one).
	Bind string
	// Advertise is the address the other nodes reach Bind at. Default: Bind's
	// listening address when its IP is not unspecified.
	Advertise string
	// Bootstrap makes this node the cluster's first voter when the store holds no
	// state yet. Nodes that join an existing cluster leave it false and are added
	// by the leader ([Store.Reconcile]).
	Bootstrap bool
	// Timing of leader loss detection. Zero: DefaultTiming().
	Timing Timing
	// Log receives the store's lines and the Raft library's (package liblog
	// maps their levels and rate-limits repeated warnings); the agent's says
	// part=raft. Default: discard.
	Log *slog.Logger
	// ServerTLS and ClientTLS, when set, make the Raft traffic TLS: accepted
	// connections with ServerTLS, dialled ones with ClientTLS (an agent's are
	// mutual TLS 1.3 with the cluster's authority: pki.Identity). Both nil:
	// plain TCP (tests of the store alone).
	ServerTLS, ClientTLS *tls.Config
	// Follow, when set, asks a server of the job store for the commands applied
	// after index after ([Store.Follow] on that server, through the agent's
	// API): while this node is not a server itself, the store keeps a mirror of
	// the jobs with it and answers reads from it. It is called from one
	// goroutine, and returns when ctx ends. Nil: reads come from the Raft
	// replica alone.
	Follow func(ctx context.Context, after uint64) (FollowReply, error)
}

// Validate reports the first problem with c, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Node == "":
		return fmt.Errorf("%w: Node is empty", ErrConfig)
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is empty", ErrConfig)
	case c.Bind == "":
		return fmt.Errorf("%w: Bind is empty", ErrConfig)
	case (c.ServerTLS == nil) != (c.ClientTLS == nil):
		return fmt.Errorf("%w: ServerTLS and ClientTLS go together", ErrConfig)
	case c.Timing.LeaderLeaseTimeout > c.Timing.HeartbeatTimeout:
		return fmt.Errorf("%w: LeaderLeaseTimeout %v exceeds HeartbeatTimeout %v", ErrConfig, c.Timing.LeaderLeaseTimeout, c.Timing.HeartbeatTimeout)
	}
	return nil
}

// Store is this node's replica of the cluster's jobs, kept with Raft. Reads are
// answered locally on any node: from the Raft replica on a server of the job
// store (a voter or a standby), from a mirror that follows a server
// (Config.Follow) on any other node, whichever is further along. Writes go
// through the leader. Its methods are safe for concurrent use.
//
// Every node opens its Raft replica, so that the leader can make it a standby
// or a voter at any time; a node outside the configuration receives nothing,
// and it never starts an election: raft (runFollower, 1.8) starts one only
// for a node that has a vote in its latest configuration (hasVote), and the
// voter plan demotes a voter before it removes it ([PlanVoters]).
type Store struct {
	cfg Config
	// rp is the running Raft; [Store.Recover] replaces it, so it is read
	// through [Store.raft].
	rp     atomic.Pointer[raft.Raft]
	fsm    *fsm
	mirror *fsm                // the jobs as followed from a server
	src    atomic.Pointer[fsm] // fsm or mirror: what reads are answered from
	client atomic.Bool         // not a server: the mirror is followed
	// leaderMu guards newLeader, closed and replaced when raft observes
	// another leader (or none): a follower waiting on this node is answered,
	// so that it learns of the new leader at once.
	leaderMu  sync.Mutex
	newLeader chan struct{}
	observed  chan raft.Observation
	trans     atomic.Pointer[raft.NetworkTransport]
	bound     string // the address the transport listens at
	rc        *raft.Config
	logs      raft.LogStore
	snaps     raft.SnapshotStore
	db        *raftboltdb.BoltStore
	notify    chan bool
	hangUp    chan struct{} // a connection from another replica ended
	done      chan struct{} // closed by Close
}

// Open starts this node's replica: it opens the log in cfg.Dir, listens on
// cfg.Bind and, when asked to and nothing is stored yet, bootstraps a cluster of
// this one voter.
func Open(cfg Config) (_ *Store, err error) {
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("jobstore: %w", err)
	}
	s := &Store{cfg: cfg, fsm: newFSM(), mirror: newMirror(), notify: make(chan bool, 16), hangUp: make(chan struct{}, 1), done: make(chan struct{}),
		newLeader: make(chan struct{}), observed: make(chan raft.Observation, 16)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	logger := liblog.New(cfg.Log, "", liblog.NewLimiter(liblog.DefaultEvery, nil))
	trans, err := s.listen(cfg.Bind, logger)
	if err != nil {
		return nil, err
	}
	s.trans.Store(trans)
	if err := s.openState(logger); err != nil {
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Node)
	rc.Logger = logger
	rc.HeartbeatTimeout = cfg.Timing.HeartbeatTimeout
	rc.ElectionTimeout = cfg.Timing.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.Timing.LeaderLeaseTimeout
	rc.CommitTimeout = commitTimeout
	rc.NotifyCh = s.notify
	rc.SnapshotThreshold = 1024
	rc.TrailingLogs = 2048
	s.rc = rc
	has, err := raft.HasExistingState(s.logs, s.db, s.snaps)
	if err != nil {
		return nil, fmt.Errorf("jobstore: %w", err)
	}
	r, err := raft.NewRaft(rc, s.fsm, s.logs, s.db, s.snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("jobstore: %w", err)
	}
	s.rp.Store(r)
	s.observe(r)
	if cfg.Bootstrap && !has {
		f := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{
			{Suffrage: raft.Voter, ID: raft.ServerID(cfg.Node), Address: trans.LocalAddr()},
		}})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return nil, fmt.Errorf("jobstore: bootstrap: %w", err)
		}
	}
	s.src.Store(s.fsm)
	go s.watchLeader()
	go s.track()
	go s.leaderChanges()
	if cfg.Follow != nil {
		go s.follow()
	}
	return s, nil
}

// openState opens the log, the stable store and the snapshots in the Dir.
func (s *Store) openState(logger hclog.Logger) (err error) {
	if s.db, err = raftboltdb.NewBoltStore(filepath.Join(s.cfg.Dir, "raft.db")); err != nil {
		return fmt.Errorf("jobstore: open log: %w", err)
	}
	if s.logs, err = raft.NewLogCache(256, s.db); err != nil {
		return err
	}
	if s.snaps, err = raft.NewFileSnapshotStoreWithLogger(s.cfg.Dir, 2, logger); err != nil {
		return fmt.Errorf("jobstore: snapshots: %w", err)
	}
	return nil
}

// listen starts the Raft transport on bind, and notes the address it listens
// at, which a recovery listens at again.
func (s *Store) listen(bind string, logger hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("jobstore: listen: %w", err)
	}
	s.bound = ln.Addr().String()
	adv, err := advertise(ln.Addr(), s.cfg.Advertise)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &tcpStream{ln: ln, adv: adv, server: s.cfg.ServerTLS, client: s.cfg.ClientTLS, hungUp: s.hungUp}, MaxPool: 3, Timeout: 5 * time.Second, Logger: logger,
	}), nil
}

// raft is the running Raft.
func (s *Store) raft() *raft.Raft { return s.rp.Load() }

// advertise is the address to announce for a listener: adv when given, else the
// listening address, which must then name a reachable IP.
func advertise(listen net.Addr, adv string) (net.Addr, error) {
	if adv == "" {
		ta := listen.(*net.TCPAddr)
		if ta.IP.IsUnspecified() {
			return nil, fmt.Errorf("%w: Bind %s listens on every address: give Advertise", ErrConfig, listen)
		}
		return ta, nil
	}
	a, err := net.ResolveTCPAddr("tcp", adv)
	if err != nil {
		return nil, fmt.Errorf("%w: Advertise %q: %v", ErrConfig, adv, err)
	}
	if _, port, _ := net.SplitHostPort(adv); port == "0" {
		a.Port = listen.(*net.TCPAddr).Port
	}
	return a, nil
}

// Addr is the address the other nodes reach this node's Raft transport at.
func (s *Store) Addr() string { return string(s.trans.Load().LocalAddr()) }

// Close stops this replica. It does not leave the Raft configuration: the leader
// removes a node that membership reports gone.
func (s *Store) Close() error {
	return s.close()
}

func (s *Store) close() error {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	var err error
	if r := s.raft(); r != nil {
		err = r.Shutdown().Error()
	}
	if t := s.trans.Load(); t != nil {
		t.Close()
	}
	if s.db != nil {
		s.db.Close()
	}
	return err
}

// Leadership receives true when this node becomes the leader and false when it
// stops being the leader. It has one reader.
func (s *Store) Leadership() <-chan bool { return s.notify }

// IsLeader reports whether this node leads now.
func (s *Store) IsLeader() bool { return s.raft().State() == raft.Leader }

// Leader returns the leading node's name, or "" when there is none known: on
// a node that follows the store from a server, the leader that server named.
func (s *Store) Leader() string {
	if leader, _, ok := s.mirrored(); ok {
		return leader
	}
	_, id := s.raft().LeaderWithID()
	return string(id)
}

// Barrier waits until every entry committed before it is applied here: a new
// leader calls it before acting on what the store holds.
func (s *Store) Barrier(timeout time.Duration) error {
	return s.wrap(s.raft().Barrier(timeout).Error())
}

// Transfer hands leadership to another voter, for a leader about to leave.
func (s *Store) Transfer() error { return s.wrap(s.raft().LeadershipTransfer().Error()) }

func (s *Store) apply(c Command) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f := s.raft().Apply(b, 10*time.Second)
	if err := f.Error(); err != nil {
		return s.wrap(err)
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

func (s *Store) wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w (%v)", ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w (%v)", ErrNoLeader, err)
	}
	return fmt.Errorf("jobstore: %w", err)
}

// Submit adds a job with its first events. Only the leader can.
func (s *Store) Submit(job job.Job, events []job.Event) error {
	return s.apply(Command{Op: OpSubmit, ID: job.ID, Job: &job, Events: events})
}

// Update replaces job id's info (job nil: unchanged), appends events and
// replaces its epoch book (book empty: unchanged). Only the leader can.
func (s *Store) Update(id string, job *job.Job, events []job.Event, book json.RawMessage) error {
	return s.apply(Command{Op: OpUpdate, ID: id, Job: job, Events: events, Book: book})
}

// Replace starts an ended job again under its id, with a fresh record holding
// job, events and book. Only the leader can; a job that has not ended is
// refused with ErrExists.
func (s *Store) Replace(job job.Job, events []job.Event, book json.RawMessage) error {
	return s.apply(Command{Op: OpReplace, ID: job.ID, Job: &job, Events: events, Book: book})
}

// Remove forgets a job. Only the leader can.
func (s *Store) Remove(id string) error { return s.apply(Command{Op: OpRemove, ID: id}) }

// Job returns a job's info and epoch book as this replica holds them.
func (s *Store) Job(id string) (job.Job, json.RawMessage, error) {
	f := s.view()
	defer f.mu.RUnlock()
	r, ok := f.jobs[id]
	if !ok {
		return job.Job{}, nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return r.Job, r.Book, nil
}

// Jobs returns every job this replica holds, oldest first.
func (s *Store) Jobs() []job.Job {
	f := s.view()
	out := make([]job.Job, 0, len(f.jobs))
	for _, r := range f.jobs {
		out = append(out, r.Job)
	}
	f.mu.RUnlock()
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Submitted.Equal(out[b].Submitted) {
			return out[a].Submitted.Before(out[b].Submitted)
		}
		return out[a].ID < out[b].ID
	})
	return out
}

// Events returns job id's events numbered from on, whether the job has ended,
// how many of its output lines were dropped for the bound, and a channel closed
// at the next change of the store.
func (s *Store) Events(id string, from uint64) (events []job.Event, ended bool, dropped uint64, changed <-chan struct{}, err error) {
	f := s.view()
	defer f.mu.RUnlock()
	r, ok := f.jobs[id]
	if !ok {
		return nil, false, 0, nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return r.since(from), !r.Job.Ended.IsZero(), r.Dropped, f.changed, nil
}

// tcpStream is raft's stream layer over TCP, advertising adv: TLS when server
// and client are set. hungUp is called when an accepted connection ends.
type tcpStream struct {
	ln             net.Listener
	adv            net.Addr
	server, client *tls.Config
	hungUp         func()
}

// Accept returns the next connection; a TLS one shakes hands on its first read,
// in the transport's goroutine for it, so that a slow or hostile peer holds up
// no other.
func (t *tcpStream) Accept() (net.Conn, error) {
	c, err := t.ln.Accept()
	if err != nil {
		return c, err
	}
	if t.hungUp != nil {
		c = &watchedConn{Conn: c, ended: t.hungUp}
	}
	if t.server == nil {
		return c, nil
	}
	return tls.Server(c, t.server), nil
}

// watchedConn calls ended once, when a read fails: the peer closed the
// connection, reset it, or this side closed it.
type watchedConn struct {
	net.Conn
	once  sync.Once
	ended func()
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(c.ended)
	}
	return n, err
}

func (t *tcpStream) Close() error   { return t.ln.Close() }
func (t *tcpStream) Addr() net.Addr { return t.adv }

func (t *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if t.client == nil {
		return d.Dial("tcp", string(address))
	}
	return tls.DialWithDialer(d, "tcp", string(address), t.client)
}

// hungUp notes that a connection from another replica ended, without blocking
// the transport.
func (s *Store) hungUp() {
	select {
	case s.hangUp <- struct{}{}:
	default:
	}
}

// watchLeader hastens the election when the leader's process is gone.
//
// A follower learns of a lost leader by hearing nothing from it for a random
// time between HeartbeatTimeout and twice that (2 to 4 s by default), and
// votes for no one while it still knows a leader. Yet when the leader's
// process dies on a host that stays up, its host resets the connections the
// leader had open to the followers, and refuses new ones: every follower sees
// a connection end at once. On that sign this follower waits until the leader
// has been silent for the leader lease (the shortest heartbeat timeout raft
// allows), and then dials it: when the leader's host refuses, no replica
// listens there, and the follower shortens its heartbeat timeout to the lease,
// which starts the election at once. The timing is restored when another
// leader is known, or after ten heartbeat timeouts. A leader that is cut off
// (nothing resets, nothing refuses) is still found by the heartbeat timeout
// alone.
//
// The dial waits for the lease because a dying process may close its
// connections before its listener: dialled at the first sign, a killed
// leader's listener still accepted two of the seven dials on 8 testbed hosts,
// and at 128 three of the four voters left took it for alive and waited out
// the heartbeat timeout.
//
// The surviving voters see the sign together, and do not start together:
// when all four of five did, each voted for itself and none had the three
// votes it needed, and the next try came after an election timeout (1 to 2 s;
// half the time at 128 hosts). A voter that still knows the leader refuses
// to vote, and one that has started an election knows none; so each goes a
// step (a tenth of the lease) after the one before it in the voters' order of
// names: the first ones find too few votes, and the one after a majority of
// them has started wins them (the third of four, two steps after the first).
func (s *Store) watchLeader() {
	for {
		select {
		case <-s.done:
			return
		case <-s.hangUp:
		}
		if leader, gone := s.leaderGone(); gone {
			s.hasten(leader)
		}
	}
}

// leaderGone reports whether the leader this follower knows has been silent
// for the lease and its host refuses connections, asked first a lease and this
// voter's step (electionStep) after a connection ended, then every 100 ms; it
// gives up once another leader is known or a heartbeat timeout has passed.
// A leader that still speaks is never dialled: its silence is checked first.
func (s *Store) leaderGone() (raft.ServerID, bool) {
	ended := time.Now()
	r := s.raft()
	_, leader := r.LeaderWithID()
	if r.State() != raft.Follower || leader == "" {
		return "", false
	}
	lease := s.cfg.Timing.LeaderLeaseTimeout
	for at := ended.Add(lease + 5*time.Millisecond + s.electionStep(leader)); ; at = time.Now().Add(100 * time.Millisecond) {
		select {
		case <-s.done:
			return "", false
		case <-time.After(time.Until(at)):
		}
		addr, id := r.LeaderWithID()
		if id != leader || r.State() != raft.Follower {
			return "", false // raft found out first
		}
		if time.Since(r.LastContact()) >= lease && refuses(string(addr)) {
			return leader, true
		}
		if time.Since(ended) > s.cfg.Timing.HeartbeatTimeout {
			return "", false
		}
	}
}

// electionStep is how long after the first of the surviving voters this one
// starts an election once leader is gone: its place among them in the order
// of their names, times a tenth of the lease (see watchLeader).
func (s *Store) electionStep(leader raft.ServerID) time.Duration {
	f := s.raft().GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	return time.Duration(stepOf(f.Configuration().Servers, leader, raft.ServerID(s.cfg.Node))) * s.cfg.Timing.LeaderLeaseTimeout / 10
}

// stepOf is self's place among the voters of servers other than leader, in the
// order of their IDs; 0 when self is not one of them.
func stepOf(servers []raft.Server, leader, self raft.ServerID) int {
	step, voter := 0, false
	for _, sv := range servers {
		switch {
		case sv.Suffrage != raft.Voter || sv.ID == leader:
		case sv.ID == self:
			voter = true
		case sv.ID < self:
			step++
		}
	}
	if !voter {
		return 0
	}
	return step
}

// refuses reports whether addr's host actively refuses a TCP connection.
func refuses(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// hasten starts an election now that leader's process is known to be gone (it
// has been silent for the lease), and restores the timing once it is over.
func (s *Store) hasten(leader raft.ServerID) {
	fast := s.cfg.Timing.LeaderLeaseTimeout
	s.cfg.Log.Info("the leader's agent is gone (its host refuses connections): electing another now", "leader", string(leader))
	if err := s.raft().ReloadConfig(s.timing(fast, fast)); err != nil {
		s.cfg.Log.Warn("hastening the election", "err", err)
		return
	}
	restore := time.NewTimer(10 * s.cfg.Timing.HeartbeatTimeout)
	defer restore.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for electing := true; electing; {
		select {
		case <-s.done:
			return
		case <-restore.C:
			electing = false
		case <-tick.C:
			_, id := s.raft().LeaderWithID()
			electing = id == "" || id == leader
		}
	}
	if err := s.raft().ReloadConfig(s.timing(s.cfg.Timing.HeartbeatTimeout, s.cfg.Timing.ElectionTimeout)); err != nil {
		s.cfg.Log.Warn("restoring the election timing", "err", err)
	}
}

// timing is raft's reloadable configuration as it is, with the given timeouts.
func (s *Store) timing(heartbeat, election time.Duration) raft.ReloadableConfig {
	rc := s.raft().ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = heartbeat, election
	return rc
}

// WaitJob waits until this replica holds job id: a node that passed a job on to
// the leader answers for it at once after.
func (s *Store) WaitJob(ctx context.Context, id string) error {
	return s.WaitSubmitted(ctx, id, time.Time{})
}

// WaitSubmitted is WaitJob for the job submitted at submitted (zero: any), so
// that a job started again under its id (Replace) is not taken for the record
// it replaced.
func (s *Store) WaitSubmitted(ctx context.Context, id string, submitted time.Time) error {
	for {
		f := s.view()
		r, ok := f.jobs[id]
		ok = ok && (submitted.IsZero() || r.Job.Submitted.Equal(submitted))
		changed := f.changed
		f.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %q (not replicated here yet: %v)", ErrNotFound, id, ctx.Err())
		}
	}
}

// AwaitLeader returns the leading node's name, waiting up to timeout for an
// election to end; "" when none ended.
func (s *Store) AwaitLeader(ctx context.Context, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		if l := s.Leader(); l != "" || time.Now().After(deadline) {
			return l
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(20 * time.Millisecond):
		}
	}
}
