package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/api"
	"shoal/internal/files"
	"shoal/internal/jobstore"
	"shoal/internal/launch"
	"shoal/internal/links"
	"shoal/internal/membership"
	"shoal/internal/metrics"
	"shoal/internal/mtbf"
	"shoal/internal/node"
	"shoal/internal/pki"
	"shoal/internal/results"
	"shoal/internal/retention"
	"shoal/internal/shardstore"
)

// DefaultBind is the default gossip address; the API listens on the next port.
const DefaultBind = "0.0.0.0:7946"

// Config says how to start an agent. The zero value of every field but
// DataDir's has a useful default.
type Config struct {
	// DataDir holds the lock, the published API address and the secret.
	// Default: DefaultDataDir().
	DataDir string
	// Name is the node's name in the cluster. Default: the host name.
	Name string
	// Bind is the gossip address, IP:PORT. Default: DefaultBind. Port 0 picks
	// a free port (tests).
	Bind string
	// API is the API's listen address. Default: Bind's IP with Bind's port + 1
	// (port 0 when Bind's port is 0).
	API string
	// Raft is the listen address of the job store's replication (TCP). Default:
	// Bind's IP with Bind's port + 2 (port 0 when Bind's port is 0).
	Raft string
	// RaftTiming is how fast a lost leader is noticed. Zero: jobstore.DefaultTiming().
	RaftTiming jobstore.Timing
	// Join lists nodes of an existing cluster, host:port (port default 7946).
	Join []string
	// SecretFile is the cluster secret. Default: DataDir/secret. It is copied
	// to DataDir/secret when elsewhere, for the local CLI.
	SecretFile string
	// Init creates a new secret at SecretFile when there is none: the first
	// agent of a new cluster. An existing secret is kept.
	Init bool
	// Labels are announced with the node's metadata.
	Labels map[string]string
	// Gossip is the membership timing preset (membership.DefaultLANConfig when
	// zero); its Name, BindAddr, BindPort and Secret are set from this Config.
	Gossip membership.Config
	// NoSpares makes the shard store remove the epochs it retires instead of
	// keeping their shards to write the next ones over ([shardstore.Store]);
	// SHOAL_SPARE=0 in the agent's environment sets it.
	NoSpares bool
	// Cores offered to ranks. Default: runtime.NumCPU().
	Cores int
	// CPUs is the CPU time the ranks may use together, in cores, when it is less
	// than Cores (a quota); 0 means Cores.
	CPUs float64
	// Speed is the single-core speed to announce; 0 measures it at start.
	Speed uint64
	// SpeedSample is how long the start-up speed measurement runs. Default:
	// membership.DefaultSpeedSample; negative skips it (speed 0).
	SpeedSample time.Duration
	// LeaveTimeout bounds a graceful leave: BeforeLeave, then the gossip
	// announcement. Default: 2 minutes.
	LeaveTimeout time.Duration
	// BeforeLeave, if set, runs first on a graceful leave; the coordinator uses
	// it to checkpoint the node's jobs. It may also be set later with
	// [Agent.SetBeforeLeave]. An error is logged and the leave goes on.
	BeforeLeave func(ctx context.Context) error
	// Retention says how long job data stays on this node after its job ended
	// (docs/retention.md). nil means retention.DefaultPolicy().
	Retention *retention.Policy
	// GCInterval is how often the agent applies Retention, besides at start,
	// soon after the job store changes and when a grace period ends. Default:
	// DefaultGCInterval.
	GCInterval time.Duration
	// FileQuota bounds the bytes of files each local user other than root and
	// the agent's own may have in the node's file cache (PUT /v1/files on the
	// socket): a file counts while it is cached, for the user who uploaded it
	// first (files.Quota). 0 means DefaultFileQuota; negative, no quota.
	FileQuota int64
	// MaxConnsPerUser bounds the connections each local user other than root
	// and the agent's own may hold open on the socket. 0 means
	// api.DefaultMaxConnsPerUser; negative, no bound.
	MaxConnsPerUser int
	// LinkInterval is how often the node measures its links to the others
	// again (besides soon after a node joins); 0 means DefaultLinkInterval.
	LinkInterval time.Duration
	// ReachInterval is how often the node opens a new connection to every
	// live peer's API address, to see which it can reach (besides with each
	// round of measures); 0 means DefaultReachInterval.
	ReachInterval time.Duration
	// MetricsListen, when set, is an IP:PORT on which the agent also serves
	// GET /metrics in plain HTTP, without a certificate, for a scraper on the
	// node itself: a loopback address unless MetricsPublic.
	MetricsListen string
	// MetricsPublic allows MetricsListen a non-loopback address.
	MetricsPublic bool
	// Overlay, when set, makes the agent carry the overlay for MPI
	// (docs/overlay.md): it creates the TUN device shoal0 with this node's
	// address, "auto" (chosen from Name: internal/overlay's Choose) or one
	// of 100.64.0.0/10, announces it, and tunnels packets to the other
	// nodes' agents. It needs CAP_NET_ADMIN. Empty: no overlay.
	Overlay string
	// Version is reported by GET /v1/health.
	Version string
	// ExtraDaemons are the paths of programs a launch may start besides the
	// daemons of the node's MPI installations (launch.Config.ExtraDaemons):
	// tests' stand-ins for orted.
	ExtraDaemons []string
	// Log receives the agent's log lines. Default: discard.
	Log *slog.Logger
	// Ready, if set, runs at the end of Start, before the API address is
	// published for local clients: the coordinator plugs its services in here,
	// so that a command started as soon as the address is there finds every
	// route served. An error stops the agent and is Start's.
	Ready func(*Agent) error
}

// Agent is one running node. Its methods are safe for concurrent use.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	lock   *dirLock
	secret []byte
	tls    *pki.Identity // this node's certificate, for the API and the job store
	peers  *api.Clients  // of the other agents, shared for keep-alive
	links  *linkProber   // this node's measurements of its links
	// failures is the cluster's record of node failures as this node saw
	// them, for the jobs' automatic checkpoint interval.
	failures mtbf.Record
	members  *membership.Membership
	server   *api.Server
	launch   *launch.Service
	shards   *shardstore.Store
	quota    *files.Quota // of the local users' uploads
	store    *jobstore.Store
	// membersUp is closed once members is set: the job store, which may open
	// before, follows a server through it.
	membersUp chan struct{}
	apiLn     net.Listener
	sockLn    net.Listener // the local socket (SocketFile)
	apiAddr   string       // as announced to other nodes
	local     string       // as written to AddrFile

	beforeLeave atomic.Pointer[func(context.Context) error]
	quit        chan struct{} // closed when the agent starts stopping
	moved       chan string   // the host's new address: see Moved

	// beforeHandOver runs on a graceful leave before the lead of the job
	// store is passed on (see SetBeforeHandOver).
	beforeHandOver atomic.Pointer[func(context.Context) error]
	recoverMu      sync.Mutex // one RecoverQuorum at a time
	reach          reachCheck // nodes whose agent refuses connections (GET /v1/nodes)

	leaveOnce sync.Once
	leaveErr  error
	leaveDone chan struct{}
	stopOnce  sync.Once
	serving   sync.WaitGroup // the API's two servers; stop waits for them, so nothing logs after it
	done      chan struct{}

	overlay *overlayNet // nil without Config.Overlay

	metrics     *metrics.Metrics // GET /metrics, on the API and on MetricsListen
	metricsLn   net.Listener     // MetricsListen's
	metricsHTTP *http.Server
}

// Start starts an agent: it locks the data directory, loads or creates the
// secret, starts gossip and the API, joins cfg.Join if given, and publishes the
// API address for local clients. On error everything started is stopped again.
func Start(cfg Config) (_ *Agent, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Log, leaveDone: make(chan struct{}), done: make(chan struct{}),
		quit: make(chan struct{}), moved: make(chan string, 1), membersUp: make(chan struct{})}
	if cfg.BeforeLeave != nil {
		a.beforeLeave.Store(&cfg.BeforeLeave)
	}
	defer func() {
		if err != nil {
			a.stop()
		}
	}()
	if a.lock, err = lockDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := unlistJobParents(cfg.DataDir); err != nil {
		return nil, err
	}
	if a.secret, err = a.loadSecret(); err != nil {
		return nil, err
	}
	a.peers = api.NewClients(a.secret)
	a.reach.heard = a.peers.Answered
	gossip, err := a.gossipConfig()
	if err != nil {
		return nil, err
	}
	// The node's certificate names the addresses tools may call it at: its
	// gossip IP (when known now) and loopback.
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(membership.AdvertiseIP(gossip)); ip != nil {
		ips = append(ips, ip)
	}
	if a.tls, err = pki.NewIdentity(a.secret, cfg.Name, ips...); err != nil {
		return nil, err
	}
	a.launch, err = launch.New(launch.Config{Node: cfg.Name, DataDir: cfg.DataDir, Log: a.log, IsMember: a.isLiveMember,
		JobDirs: []string{JobsDir, CkptDir, ResultsDir}, JobRanks: a.jobRanks, OnGrant: a.newRun, ExtraDaemons: cfg.ExtraDaemons})
	if err != nil {
		return nil, err
	}
	// A previous agent on this data dir that died left its daemons running:
	// their connections are gone, so they are stale.
	a.launch.KillStale()
	if a.apiLn, err = net.Listen("tcp", cfg.API); err != nil {
		return nil, fmt.Errorf("API: %w", err)
	}
	if a.overlay, err = a.openOverlay(); err != nil {
		return nil, err
	}
	if cfg.Speed == 0 {
		cfg.Speed = membership.MeasureSpeed(cfg.SpeedSample)
	}
	meta := membership.Meta{
		Cores:    cfg.Cores,
		CPUMilli: uint64(math.Round(cfg.CPUs * 1000)),
		Speed:    cfg.Speed,
		Arch:     runtime.GOARCH,
		OS:       runtime.GOOS,
		Labels:   cfg.Labels,
	}
	if a.overlay != nil {
		meta.Overlay = a.overlay.Addr().String()
	}
	// Announce the addresses the others reach this node's API and job store at:
	// the gossip address's IP where they listen on every interface. They go into
	// the first announcement when that IP is known before gossip starts, as it
	// nearly always is (membership.AdvertiseIP says why that matters).
	if ip := membership.AdvertiseIP(gossip); ip != "" {
		meta.API = announcedAddr(a.apiLn.Addr(), net.JoinHostPort(ip, "0"))
		if err = a.openStore(ip); err != nil {
			return nil, err
		}
		meta.Raft = a.store.Addr()
	}
	if a.members, err = membership.New(gossip, meta, a.log); err != nil {
		return nil, err
	}
	close(a.membersUp)
	a.apiAddr = announcedAddr(a.apiLn.Addr(), a.members.Addr())
	if a.store == nil {
		host, _, _ := net.SplitHostPort(a.members.Addr())
		if err = a.openStore(host); err != nil {
			return nil, err
		}
	}
	if meta.API != a.apiAddr || meta.Raft != a.store.Addr() {
		meta.API, meta.Raft = a.apiAddr, a.store.Addr()
		if err = a.members.SetMeta(meta, time.Second); err != nil {
			return nil, err
		}
	}
	if err = a.startMetrics(); err != nil {
		return nil, err
	}
	a.server = api.NewServer(api.ServerConfig{
		Node: (*localNode)(a), Secret: a.secret, Version: cfg.Version, Log: a.log, TLS: a.tls.ServerConfig(),
		Metrics:         a.metrics.Handler(),
		MaxConnsPerUser: cfg.MaxConnsPerUser,
		Relay: func(ctx context.Context, to string, req api.LaunchRequest) (io.ReadWriteCloser, error) {
			return a.peers.Get(to).Launch(ctx, req)
		},
	})
	a.server.SetGrantService(a.launch)
	a.quota = &files.Quota{Cache: files.Cache{Dir: filepath.Join(cfg.DataDir, FilesDir)},
		Dir: filepath.Join(cfg.DataDir, UploadsDir), Bytes: cfg.FileQuota}
	a.shards = shardstore.New(filepath.Join(cfg.DataDir, CkptDir))
	a.shards.NoSpares = cfg.NoSpares
	a.shards.Log = a.log
	a.server.SetShardService(&shardService{store: a.shards, dataDir: cfg.DataDir, peers: a.peers})
	a.server.SetResultService(&resultService{a: a, store: results.Store{Dir: filepath.Join(cfg.DataDir, ResultsDir)}})
	a.SetJobService(nil)
	if err = a.startGC(); err != nil {
		return nil, err
	}
	go a.fence(a.members.Subscribe())
	go a.recordFailures(a.members.Subscribe())
	go a.countDetections(a.members.Subscribe())
	a.links = a.startLinks(cfg.LinkInterval, cfg.ReachInterval)
	a.server.SetLinkService(a.links)
	a.server.SetStoreService(storeService{a.store})
	if a.overlay != nil {
		a.overlay.start()
		a.server.SetTunnelService(a.overlay)
	}
	// Before the API serves: nothing fetches a shard until then.
	a.shards.LinkRate = a.links.bandwidthFrom
	go a.reconcileVoters(a.members.Subscribe())
	a.serve("API server", func() error { return a.server.Serve(a.apiLn) })
	if err = a.listenLocal(); err != nil {
		return nil, err
	}
	if err = a.listenMetrics(); err != nil {
		return nil, err
	}
	if err = a.join(cfg.Join); err != nil {
		return nil, err
	}
	if len(cfg.Join) > 0 {
		fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
		a.forgetStaleStore(fctx)
		fcancel()
	}
	if cfg.Ready != nil {
		if err = cfg.Ready(a); err != nil {
			return nil, err
		}
	}
	a.local = localAddr(a.apiLn.Addr(), cfg.API)
	if err = writeFileAtomic(filepath.Join(cfg.DataDir, AddrFile), []byte(a.local+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("publish API address: %w", err)
	}
	a.watchAddress(RoamInterval)
	a.log.Info("agent started", "node", gossip.Name, "gossip", a.members.Addr(), "api", a.apiAddr,
		"cores", meta.Cores, "speed", meta.Speed, "data_dir", cfg.DataDir)
	return a, nil
}

func (c *Config) setDefaults() error {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	if c.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("%w: no --name and no host name: %v", ErrConfig, err)
		}
		c.Name = h
	}
	switch v := os.Getenv("SHOAL_SPARE"); v {
	case "", "1":
	case "0":
		c.NoSpares = true
	default:
		return fmt.Errorf("%w: SHOAL_SPARE %q: want 1 (keep retired shards to write the next ones over) or 0", ErrConfig, v)
	}
	if c.Bind == "" {
		c.Bind = DefaultBind
	}
	host, port, err := net.SplitHostPort(c.Bind)
	if err != nil || net.ParseIP(host) == nil {
		return fmt.Errorf("%w: bind address %q: want IP:PORT", ErrConfig, c.Bind)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%w: bind address %q: bad port", ErrConfig, c.Bind)
	}
	if c.API == "" {
		apiPort := 0
		if p != 0 {
			apiPort = p + 1
		}
		c.API = net.JoinHostPort(host, strconv.Itoa(apiPort))
	}
	if c.Raft == "" {
		raftPort := 0
		if p != 0 {
			raftPort = p + 2
		}
		c.Raft = net.JoinHostPort(host, strconv.Itoa(raftPort))
	}
	if c.SecretFile == "" {
		c.SecretFile = filepath.Join(c.DataDir, SecretFile)
	}
	if c.Gossip.ProbeInterval == 0 {
		c.Gossip = membership.DefaultLANConfig()
	}
	if c.Cores == 0 {
		c.Cores = runtime.NumCPU()
	}
	if c.SpeedSample == 0 {
		c.SpeedSample = membership.DefaultSpeedSample
	}
	if c.LeaveTimeout == 0 {
		c.LeaveTimeout = 2 * time.Minute
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.FileQuota == 0 {
		c.FileQuota = DefaultFileQuota
	}
	if err := CheckMetricsListen(c.MetricsListen, c.MetricsPublic); err != nil {
		return fmt.Errorf("metrics listen address %q: %w", c.MetricsListen, err)
	}
	return nil
}

// loadSecret reads the secret, creating it first with Init, and keeps a copy
// in the data directory for the local CLI.
func (a *Agent) loadSecret() ([]byte, error) {
	path := a.cfg.SecretFile
	s, err := ReadSecret(path)
	if errors.Is(err, ErrNoSecret) && a.cfg.Init {
		if s, err = CreateSecret(path); err == nil {
			a.log.Info("created a new cluster secret: copy it to the other nodes and pass it with --secret-file", "file", path)
		}
	}
	if errors.Is(err, ErrNoSecret) {
		if len(a.cfg.Join) > 0 {
			return nil, fmt.Errorf("%w: joining needs the cluster's secret: --secret-file FILE (a copy of %s from the first node)", ErrNoSecret, SecretFile)
		}
		return nil, fmt.Errorf("%w: start a new cluster with --init, or join one with --join HOST:PORT --secret-file FILE", ErrNoSecret)
	}
	if err != nil {
		return nil, err
	}
	local := filepath.Join(a.cfg.DataDir, SecretFile)
	if filepath.Clean(path) != local {
		if old, _ := os.ReadFile(local); !bytes.Equal(bytes.TrimSpace(old), s) {
			if err := writeFileAtomic(local, append(s, '\n'), 0o600); err != nil {
				return nil, fmt.Errorf("copy secret into data dir: %w", err)
			}
		}
	}
	return s, nil
}

func (a *Agent) gossipConfig() (membership.Config, error) {
	g := a.cfg.Gossip
	host, port, _ := net.SplitHostPort(a.cfg.Bind)
	g.Name, g.BindAddr, g.Secret = a.cfg.Name, host, a.secret
	g.BindPort, _ = strconv.Atoi(port)
	if err := g.Validate(); err != nil {
		return g, err
	}
	// With room for the largest rank count, so that announcing one never fails.
	if _, err := (membership.Meta{Labels: a.cfg.Labels, Ranks: 1 << 30, Overlay: "100.127.255.254"}).Encode(); err != nil {
		return g, err
	}
	return g, nil
}

// announcedAddr is the API address to announce: the listener's, with the
// gossip address's host when the listener is on every interface.
func announcedAddr(listen net.Addr, gossip string) string {
	tcp, ok := listen.(*net.TCPAddr)
	if !ok || (tcp.IP != nil && !tcp.IP.IsUnspecified()) {
		return listen.String()
	}
	// On every interface: reachable wherever gossip is.
	host, _, err := net.SplitHostPort(gossip)
	if err != nil {
		return listen.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// Name returns the node's name.
func (a *Agent) Name() string { return a.cfg.Name }

// isLiveMember reports whether the node of that name is in the cluster, alive or
// suspected (not yet declared dead), as this node sees it.
// jobRanks is the most ranks a run of job may have, by this node's replica
// of the job store: its count, or an elastic job's upper bound.
func (a *Agent) jobRanks(job string) (int, bool) {
	if a.store == nil {
		return 0, false
	}
	info, _, err := a.store.Job(job)
	if err != nil {
		return 0, false
	}
	if f := info.Spec.Farm; f != nil {
		return len(f.Tasks), true // a farm runs at most a task per core at once
	}
	return info.Spec.MostRanks(), true
}

func (a *Agent) isLiveMember(name string) bool {
	if a.members == nil { // grants come through the API, which serves after gossip starts
		return false
	}
	n, ok := a.members.Node(name)
	return ok && n.State.Member()
}

// Failures returns the cluster's record of node failures, as this node has seen
// them since it started.
func (a *Agent) Failures() mtbf.Estimate { return a.failures.At(time.Now()) }

// NodeLost adds to that record a node whose ranks a job lost: a node that dies
// and restarts before the failure detector declares it dead (a reboot, an agent
// restarted by its supervisor) is a failure all the same.
func (a *Agent) NodeLost(name string) { a.failures.Failed(time.Now(), name) }

// recordFailures keeps the record Failures returns: the live nodes' time, and
// each node the failure detector declares dead (one that leaves on purpose is
// no failure).
func (a *Agent) recordFailures(sub *membership.Subscription) {
	alive := func() int {
		n := 0
		for _, m := range a.members.Nodes() {
			if m.State.Member() {
				n++
			}
		}
		return n
	}
	a.failures.Observe(time.Now(), alive())
	for ev := range sub.C {
		if ev.Type == membership.EventFailed {
			a.failures.Failed(ev.Time, ev.Node.Name)
		}
		a.failures.Observe(ev.Time, alive())
	}
}

// Links returns the links between the live nodes as they measured them, with
// estimates of the pairs none measured (GET /v1/links?all=true).
func (a *Agent) Links(ctx context.Context) ([]links.Link, error) {
	l, err := a.links.Links(ctx, true)
	return l.Links, err
}

// WarmLinks reads in the background the rows of links this node holds none
// of, for a placement soon after (linkProber.Warm).
func (a *Agent) WarmLinks() {
	if a.links != nil {
		a.links.Warm()
	}
}

// WarmLink reads node n's row of links unless this node holds it
// (linkProber.warmRow).
func (a *Agent) WarmLink(ctx context.Context, n node.Node) {
	if a.links != nil {
		a.links.warmRow(ctx, n.Name, n.API)
	}
}

// DataDir returns the data directory, absolute.
func (a *Agent) DataDir() string { return a.cfg.DataDir }

// APIAddr returns the API address announced to the other nodes.
func (a *Agent) APIAddr() string { return a.apiAddr }

// LocalAPIAddr returns the API address written for local clients.
func (a *Agent) LocalAPIAddr() string { return a.local }

// GossipAddr returns the gossip address, host:port.
func (a *Agent) GossipAddr() string { return a.members.Addr() }

// Membership returns the node's membership, to read nodes and subscribe to events.
func (a *Agent) Membership() *membership.Membership { return a.members }

// Peer returns a client of the agent at the API address addr (another node's
// [node.Node.API]). Every caller on this node gets the same client for an address,
// so calls to a node reuse its kept-alive connections; the client is dropped
// when membership declares the node dead or gone.
func (a *Agent) Peer(addr string) *api.Client { return a.peers.Get(addr) }

// Secret returns the cluster secret.
func (a *Agent) Secret() []byte { return a.secret }

// SetJobService plugs the job coordinator into the API; nil unplugs it.
// Launch requests (POST /v1/launch) never reach it: every agent serves them
// with its own launch service ([Agent.Launcher]), coordinator or not, so j's
// Launch method is not called.
func (a *Agent) SetJobService(j api.JobService) {
	if j == nil {
		j = api.Unavailable{}
	}
	a.server.SetJobService(launchingJobs{JobService: j, launch: a.launch})
}

// launchingJobs is a JobService whose launches go to the launch service.
type launchingJobs struct {
	api.JobService
	launch *launch.Service
}

func (j launchingJobs) Launch(ctx context.Context, req api.LaunchRequest) (func(io.ReadWriteCloser), error) {
	return j.launch.Launch(ctx, req)
}

// Launcher returns the node's launch service: grants (also reachable as POST
// and DELETE /v1/grants) and the MPI daemons started for them. A coordinator
// on this node grants its own node through it.
func (a *Agent) Launcher() *launch.Service { return a.launch }

// SetDataService plugs the file store into the API, under the quota of
// Config.FileQuota for local users.
func (a *Agent) SetDataService(d api.DataService) { a.server.SetDataService(a.newQuotaFiles(d)) }

// Shards returns the node's checkpoint store (DataDir/ckpt), which the agent
// serves on the shard routes of its API whether or not it runs a coordinator. A
// coordinator on this node uses it directly for its own node.
func (a *Agent) Shards() *shardstore.Store { return a.shards }

// newRun is called when a run of job is granted on this node: a checkpoint
// request still waiting here was made for an earlier run, which ended without
// taking it (a move's relaunch can follow an interval checkpoint that came
// first), and the new run's rank 0 must not take it.
func (a *Agent) newRun(job string) {
	if err := a.shards.WithdrawRequest(job); err != nil {
		a.log.Warn("cannot withdraw an earlier run's checkpoint request", "job", job, "err", err)
	}
	if a.overlay != nil {
		a.overlay.jobGranted(job)
	}
}

// SetBeforeLeave sets the hook run first on a graceful leave (nil: none).
func (a *Agent) SetBeforeLeave(f func(ctx context.Context) error) {
	if f == nil {
		a.beforeLeave.Store(nil)
		return
	}
	a.beforeLeave.Store(&f)
}

// Done is closed once the agent has stopped, after a leave or a shutdown.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Leave leaves the cluster gracefully and then stops the agent: on the node
// that leads the job store, the hook set with [Agent.SetBeforeHandOver] (the
// coordinator stops its jobs at a checkpoint) and the lead passed on; then
// BeforeLeave (the coordinator checkpoints jobs with ranks here and moves
// them), then the departure is gossiped so that the
// other nodes show this one as left, then everything stops. It returns once the
// departure is gossiped; [Agent.Done] is closed when the agent has stopped.
// Later calls wait for the first and return its result. ctx and
// Config.LeaveTimeout bound the whole leave.
func (a *Agent) Leave(ctx context.Context) error {
	a.leaveOnce.Do(func() {
		defer close(a.leaveDone)
		// A caller that goes away (Ctrl-C on `shoal leave`) must not cut the
		// checkpoint short; only the deadlines bound the leave.
		caller := ctx
		ctx, cancel := context.WithTimeout(context.WithoutCancel(caller), a.cfg.LeaveTimeout)
		defer cancel()
		if dl, ok := caller.Deadline(); ok {
			var cancel2 context.CancelFunc
			ctx, cancel2 = context.WithDeadline(ctx, dl)
			defer cancel2()
		}
		a.log.Info("leaving the cluster")
		// Said first: a leader that takes the job store over from this node,
		// and the coordinator moving jobs away, must place nothing here.
		if err := a.members.AnnounceLeaving(); err != nil {
			a.log.Warn("leave: the leaving flag not confirmed gossiped", "err", err)
		}
		a.handOver(ctx)
		if f := a.beforeLeave.Load(); f != nil {
			if err := (*f)(ctx); err != nil {
				a.log.Error("before leave", "err", err)
			}
		}
		a.leaveErr = a.members.Leave()
		// Stop in the background: an API request asking to leave must still
		// get its answer, and the API server's shutdown waits for it.
		go a.stop()
	})
	select {
	case <-a.leaveDone:
		return a.leaveErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops the agent without leaving: the other nodes will declare it
// dead after their failure detector's timeout, as if it had crashed.
func (a *Agent) Shutdown() {
	a.stop()
}

// stop releases everything Start acquired, in reverse order.
func (a *Agent) stop() {
	a.stopOnce.Do(func() {
		defer close(a.done)
		close(a.quit)
		started := a.local != ""
		if started {
			addrFile := filepath.Join(a.cfg.DataDir, AddrFile)
			if b, err := os.ReadFile(addrFile); err == nil && string(bytes.TrimSpace(b)) == a.local {
				os.Remove(addrFile)
			}
		}
		if a.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a.server.Shutdown(ctx)
			cancel()
		} else if a.apiLn != nil {
			a.apiLn.Close()
		}
		if a.metricsHTTP != nil {
			a.metricsHTTP.Close()
		}
		if a.sockLn != nil {
			a.sockLn.Close()
			os.Remove(filepath.Join(a.cfg.DataDir, SocketFile))
		}
		a.serving.Wait()
		if a.overlay != nil {
			a.overlay.stop()
		}
		if a.launch != nil {
			a.launch.Close() // the connections of what it launched are gone
		}
		if a.store != nil {
			a.recoverMu.Lock() // a recovery under way restarts Raft first
			a.store.Close()
			a.recoverMu.Unlock()
		}
		if a.members != nil {
			a.members.Shutdown()
		}
		a.lock.release()
		if started {
			a.log.Info("agent stopped")
		}
	})
}

// listenLocal serves the API on the data dir's socket, which any local user
// may connect to: the agent knows them by their credentials (api.ServeLocal).
// The lock on the data dir makes a socket left there by a killed agent stale.
func (a *Agent) listenLocal() error {
	path := filepath.Join(a.cfg.DataDir, SocketFile)
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("local socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("local socket: %w", err)
	}
	a.sockLn = ln
	a.serve("local socket", func() error { return a.server.ServeLocal(ln) })
	return nil
}

// serve runs one of the API's servers until stop. A listener closed by stop
// before the server registered itself ends it with net.ErrClosed, which is no
// failure.
func (a *Agent) serve(what string, serve func() error) {
	a.serving.Add(1)
	go func() {
		defer a.serving.Done()
		if err := serve(); err != nil && !errors.Is(err, net.ErrClosed) {
			a.log.Error(what+" stopped", "err", err)
		}
	}()
}

// SocketPath is the path of the agent's local socket.
func (a *Agent) SocketPath() string { return filepath.Join(a.cfg.DataDir, SocketFile) }
