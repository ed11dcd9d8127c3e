package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/engine"
	"shoal/internal/files"
	"shoal/internal/jobstore"
	"shoal/internal/membership"
	"shoal/internal/retention"
)

func init() {
	register("agent", command{summary: "run this node's agent: membership, API, jobs", run: agentCmd})
}

const agentUsage = `Usage: shoal agent [flags]

Runs this node's agent in the foreground until the node leaves the cluster:
'shoal leave', SIGTERM or Ctrl-C make it leave gracefully (a second signal
stops it at once; a killed agent is declared dead by the others). SIGHUP
opens --log-file again under its name, for logrotate (deploy/ has an example).

As a service, the agent takes its flags from a file (deploy/ has a systemd
unit and an example):
    shoal agent --config /etc/shoal/agent.toml
one TOML key per flag, named as the flag; flags on the command line win.

The first agent of a cluster creates the cluster secret (kept if it exists):
    shoal agent --init
writes DATA-DIR/secret, mode 0600 (or --secret-file FILE). Every other node
joins with a copy of that file:
    shoal agent --join HOST:7946 --secret-file FILE

Gossip (UDP and TCP) listens on --bind; the HTTP API on --api. Commands on the
same node (shoal nodes, shoal leave, shoal run) find the agent through its data
dir: --data-dir, else $SHOAL_DATA_DIR, else /var/lib/shoal for root and ~/.shoal
for others. The agent writes DATA-DIR/agent.addr (its API address) and keeps a
copy of the secret in DATA-DIR/secret; only one agent may use a data dir.
SHOAL_SPARE=0 in its environment (and so its ranks') removes retired
checkpoint shards instead of keeping one per rank for the next to be written
over (docs/shard-format.md).

The agent removes job data it no longer needs (docs/retention.md): checkpoint
epochs older than the ones a restart may use at once; a succeeded job's
checkpoints at its end, its directories and files --keep-succeeded later; all of
a failed or cancelled job --keep-failed later; never the data of a job the job
store does not know. It does so at start (a node that was down cleans up when it
returns) and as jobs end; 'shoal gc' does it now.

Flags:
`

func agentCmd(args []string, stdout, stderr io.Writer) int {
	return runAgent(args, nil, stdout, stderr)
}

// agentOptions are shoal agent's flags, set from the command line and from
// its --config file.
type agentOptions struct {
	init                            bool
	join, secretFile, bind, apiAddr string
	dataDir, name, labels, profile  string
	mpi                             string
	cores                           int
	cpus                            float64
	speed                           uint64
	verbose                         bool
	policy                          retention.Policy
	gcInterval                      time.Duration
	reachInterval                   time.Duration
	storeLease                      time.Duration
	overlay                         string
	mpiEncrypt                      bool
	fileQuota                       string
	connsPerUser                    int
	metricsListen                   string
	metricsPublic                   bool
	config, logFile, logFormat      string
}

// agentFlags returns shoal agent's flags, set to their defaults, and what
// they set.
func agentFlags() (*flag.FlagSet, *agentOptions) {
	o := &agentOptions{policy: retention.DefaultPolicy(), fileQuota: "10G", connsPerUser: api.DefaultMaxConnsPerUser}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.config, "config", "", "read flags from this TOML file, one key per flag named as the flag (init = true, cores = 8, keep-failed = \"72h\"); flags on the command line win")
	fs.BoolVar(&o.init, "init", false, "start a new cluster: create the secret file if there is none")
	fs.StringVar(&o.join, "join", "", "join the cluster of these agents: HOST:PORT[,HOST:PORT...] (port default 7946)")
	fs.StringVar(&o.secretFile, "secret-file", "", "cluster secret file (default: DATA-DIR/secret)")
	fs.StringVar(&o.bind, "bind", agent.DefaultBind, "gossip address IP:PORT, UDP and TCP")
	fs.StringVar(&o.apiAddr, "api", "", "API address IP:PORT (default: the --bind IP, port + 1)")
	fs.StringVar(&o.dataDir, "data-dir", "", "data dir (default: $SHOAL_DATA_DIR, else /var/lib/shoal for root, ~/.shoal for others)")
	fs.StringVar(&o.name, "name", "", "node name, unique in the cluster (default: the host name)")
	fs.StringVar(&o.labels, "labels", "", "labels announced with the node: KEY=VALUE[,KEY=VALUE...]")
	fs.StringVar(&o.profile, "profile", "lan", "failure-detector timing: lan, wifi (lossy, slow networks: slower to declare a node dead) or local (agents on one machine, tests)")
	fs.IntVar(&o.cores, "cores", 0, "cores offered to ranks (default: all of this machine's)")
	fs.Float64Var(&o.cpus, "cpus", 0, "CPU time the ranks may use together, in cores, when a quota (a container's or cgroup's CPU limit) gives them less than --cores whole cores: the planner then counts that, and a rank alone still at a whole core's speed (default: --cores)")
	fs.Uint64Var(&o.speed, "speed", 0, "single-core speed to announce instead of measuring it at start, in the measurement's units (0: measure; use it to make equal machines look equal)")
	fs.DurationVar(&o.policy.Succeeded, "keep-succeeded", o.policy.Succeeded, "how long a succeeded job's job directories and staged files stay on this node after it ended (its checkpoints go at once); a job's own 'shoal run --keep' or --keep-for wins")
	fs.DurationVar(&o.policy.Failed, "keep-failed", o.policy.Failed, "how long everything of a failed or cancelled job, checkpoints included, stays on this node after it ended, for inspection")
	fs.DurationVar(&o.policy.UnusedFiles, "keep-unused-files", o.policy.UnusedFiles, "how long a cached job file that no kept job names stays after its last use")
	fs.DurationVar(&o.gcInterval, "gc-interval", agent.DefaultGCInterval, "how often to apply the retention policy, besides at start, when the job store changes and when a grace period ends")
	fs.DurationVar(&o.reachInterval, "reach-interval", agent.DefaultReachInterval, "how often to open a new connection to up to 16 live peers' agents, those checked longest ago first, to see which can be reached (shoal nodes --links, CONNECT)")
	fs.DurationVar(&o.storeLease, "store-lease", jobstore.DefaultLease, "how long the job store's leader keeps the lead without hearing from a quorum of voters; a follower waits twice this before it stands for election. Longer keeps the lead on nodes short of CPU or behind links that stall, and makes a lost leader's jobs wait as much longer for their new coordinator (docs/architecture.md, \"The lease\")")
	fs.StringVar(&o.overlay, "overlay", "", "carry the overlay MPI jobs run over with shoal run --mpi-overlay (docs/overlay.md): create the TUN device shoal0 (needs root) with this node's address `ADDR`: auto (chosen from --name, kept across restarts) or one of 100.64.0.0/10, and tunnel its packets to the other nodes' agents over their API's TLS (default: no overlay)")
	fs.BoolVar(&o.mpiEncrypt, "mpi-encrypt", false, "encrypt the MPI traffic between nodes of every job submitted to this node, as shoal run --mpi-encrypt does (its jobs need --overlay on their nodes); a job cannot opt out. Give it to every agent of the cluster: a job is encrypted when it, the node it is submitted to or the leader of the job store asks (docs/security.md)")
	fs.StringVar(&o.fileQuota, "file-quota", o.fileQuota, "bytes of files each local user other than root may have in this node's file cache, uploaded through the agent's socket: 10G, 512M, ... (0: no quota; docs/api.md#limits)")
	fs.IntVar(&o.connsPerUser, "conns-per-user", o.connsPerUser, "connections each local user other than root may hold open on the agent's socket (0: no bound; docs/api.md#limits)")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "also serve GET /metrics in plain HTTP, without a certificate, on this IP:PORT, for a scraper on this machine: a loopback address such as 127.0.0.1:9108 (docs/metrics.md)")
	fs.BoolVar(&o.metricsPublic, "metrics-listen-public", false, "allow --metrics-listen an address other machines reach: they read the metrics without a certificate (docs/security.md)")
	fs.StringVar(&o.mpi, "engine", "openmpi", "the MPI that launches the jobs this node coordinates when a job names none: openmpi or mpich")
	fs.BoolVar(&o.verbose, "verbose", false, "log debug lines, including memberlist's and raft's")
	fs.StringVar(&o.logFile, "log-file", "", "append the log to this file (created mode 0600) instead of writing it to stderr; SIGHUP opens it again under its name (logrotate)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log lines as text (key=value) or json, one object a line")
	return fs, o
}

// check reports what is wrong with the value of the flag called name, in
// words that follow the flag's name: `"lte": want lan, wifi or local`.
func (o *agentOptions) check(name string) error {
	switch name {
	case "profile":
		if _, err := membership.Profile(o.profile); err != nil {
			return fmt.Errorf("%q: want lan, wifi or local", o.profile)
		}
	case "labels":
		if _, err := parseLabels(o.labels); err != nil {
			return fmt.Errorf("%q: %w", o.labels, err)
		}
	case "engine":
		if !slices.Contains(engine.Names, o.mpi) {
			return fmt.Errorf("%q: want %s", o.mpi, strings.Join(engine.Names, " or "))
		}
	case "cpus":
		if !(o.cpus >= 0 && o.cpus <= 1<<20) {
			return fmt.Errorf("%v: want a number of cores ≥ 0 (0: --cores)", o.cpus)
		}
	case "cores":
		if o.cores < 0 {
			return fmt.Errorf("%d: must not be negative", o.cores)
		}
	case "keep-succeeded", "keep-failed", "keep-unused-files":
		d := map[string]time.Duration{"keep-succeeded": o.policy.Succeeded, "keep-failed": o.policy.Failed, "keep-unused-files": o.policy.UnusedFiles}[name]
		if d < 0 {
			return fmt.Errorf("%v: must not be negative", d)
		}
	case "gc-interval":
		if o.gcInterval <= 0 {
			return fmt.Errorf("%v: must be positive", o.gcInterval)
		}
	case "reach-interval":
		if o.reachInterval <= 0 {
			return fmt.Errorf("%v: must be positive", o.reachInterval)
		}
	case "store-lease":
		if o.storeLease < 100*time.Millisecond || o.storeLease > time.Minute {
			return fmt.Errorf("%v: want 100ms to 1m", o.storeLease)
		}
	case "overlay":
		if err := agent.CheckOverlay(o.overlay); err != nil {
			return fmt.Errorf("%q: want auto or an address in 100.64.0.0/10", o.overlay)
		}
	case "file-quota":
		if _, err := files.ParseBytes(o.fileQuota); err != nil {
			return fmt.Errorf("%q: want a size such as 10G or 512M, or 0 for no quota", o.fileQuota)
		}
	case "conns-per-user":
		if o.connsPerUser < 0 {
			return fmt.Errorf("%d: want 0 (no bound) or more", o.connsPerUser)
		}
	case "metrics-listen":
		if err := agent.CheckMetricsListen(o.metricsListen, o.metricsPublic); err != nil {
			return fmt.Errorf("%q: %w", o.metricsListen, err)
		}
	case "log-format":
		if o.logFormat != "text" && o.logFormat != "json" {
			return fmt.Errorf("%q: want text or json", o.logFormat)
		}
	}
	return nil
}

// runAgent is shoal agent with args. onTerm, when not nil, is called on each SIGTERM
// instead of leaving: the agents of a Slurm allocation (slurm-agent) answer Slurm's
// SIGTERM so; SIGINT still makes the agent leave.
func runAgent(args []string, onTerm func(*slog.Logger), stdout, stderr io.Writer) int {
	fs, o := agentFlags()
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, agentUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal agent: %v (see 'shoal agent --help')\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shoal agent: unexpected argument %q (see 'shoal agent --help')\n", fs.Arg(0))
		return exitUsage
	}
	if o.config != "" {
		if err := loadAgentConfig(fs, o, o.config); err != nil {
			fmt.Fprintf(stderr, "shoal agent: %v\n", err)
			return exitUsage
		}
	}
	var bad error
	fs.VisitAll(func(f *flag.Flag) {
		if err := o.check(f.Name); err != nil && bad == nil {
			bad = fmt.Errorf("--%s %w", f.Name, err)
		}
	})
	if bad != nil {
		fmt.Fprintf(stderr, "shoal agent: %v\n", bad)
		return exitUsage
	}
	gossip, _ := membership.Profile(o.profile)
	lbls, _ := parseLabels(o.labels)
	quota, _ := files.ParseBytes(o.fileQuota)
	connsPerUser := o.connsPerUser
	if quota == 0 {
		quota = -1 // none: the agent's 0 is its default
	}
	if connsPerUser == 0 {
		connsPerUser = -1
	}
	log, file, err := agentLogger(o.logFile, o.logFormat, o.verbose, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "shoal agent: --log-file: %v\n", err)
		return exitFailure
	}
	if file != nil {
		defer file.Close()
	}
	mpi, encrypt := o.mpi, o.mpiEncrypt
	cfg := agent.Config{
		DataDir:       o.dataDir,
		Name:          o.name,
		Bind:          o.bind,
		API:           o.apiAddr,
		SecretFile:    o.secretFile,
		Init:          o.init,
		Labels:        lbls,
		Gossip:        gossip,
		Cores:         o.cores,
		CPUs:          o.cpus,
		Speed:         o.speed,
		Retention:     &o.policy,
		GCInterval:    o.gcInterval,
		ReachInterval: o.reachInterval,
		RaftTiming:    jobstore.LeaseTiming(o.storeLease),
		Overlay:       o.overlay,
		Version:       version,
		Log:           log,
		Ready:         func(a *agent.Agent) error { return plugCoordinator(a, mpi, encrypt) },
	}
	cfg.FileQuota, cfg.MaxConnsPerUser = quota, connsPerUser
	cfg.MetricsListen, cfg.MetricsPublic = o.metricsListen, o.metricsPublic
	if o.join != "" {
		cfg.Join = strings.Split(o.join, ",")
	}

	// Catch signals before starting, so that none is lost in between.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	sd := takeNotifier()
	a, err := agent.Start(cfg)
	if err != nil {
		if o.logFile != "" {
			log.Error("not started", "err", errorLine(err))
		}
		fmt.Fprintf(stderr, "shoal agent: %s\n", errorLine(err))
		return exitFailure
	}
	if err := sd.notify("READY=1"); err != nil {
		log.Warn("cannot tell systemd the agent is ready", "err", err)
	}
	leaving := false
	for {
		select {
		case <-a.Done(): // left, through the API or on a signal
			return exitOK
		case bind := <-a.Moved():
			err := restartMoved(a, bind, log)
			log.Error("cannot start again at the host's new address", "err", err)
			fmt.Fprintf(stderr, "shoal agent: %v\n", err)
			return exitFailure
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGHUP:
				reopenLog(log, file)
			case sig == syscall.SIGTERM && onTerm != nil:
				onTerm(log)
			case leaving:
				log.Warn("stopping without leaving", "signal", sig.String())
				a.Shutdown()
				return exitFailure
			default:
				log.Info("leaving on signal; send another to stop at once", "signal", sig.String())
				leaving = true
				sd.notify("STOPPING=1")
				go a.Leave(context.Background())
			}
		}
	}
}

// reopenLog answers SIGHUP: the log file is opened again under its name
// (logrotate renamed it), the last line to the old file saying so and the
// first to the new one; without a log file there is nothing to do.
func reopenLog(log *slog.Logger, file *logFile) {
	if file == nil {
		log.Info("SIGHUP: no log file to reopen (the log goes to stderr)")
		return
	}
	log.Info("reopening the log file on SIGHUP", "file", file.path)
	if err := file.Reopen(); err != nil {
		log.Error("cannot reopen the log file; writing on to the one open", "file", file.path, "err", err)
		return
	}
	log.Info("log file reopened on SIGHUP", "file", file.path)
}

// parseLabels parses KEY=VALUE[,KEY=VALUE...].
func parseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want KEY=VALUE", kv)
		}
		if err := membership.CheckLabel(k, v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}
