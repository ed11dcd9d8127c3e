package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/durable"
	"shoal/internal/engine"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/userdir"
)

func init() {
	register("run", command{summary: "run an MPI program that survives lost ranks", run: runJob})
}

const runUsage = `Usage: shoal run -n N [flags] [--] PROGRAM [ARGS]
       shoal run [-n N] --min-ranks A --max-ranks B [flags] [--] PROGRAM [ARGS]

Runs PROGRAM as an MPI job of N ranks through Open MPI's mpirun (or MPICH's
mpiexec, --engine mpich). The program checkpoints through libshoal; when a rank
dies of a signal, the job is relaunched from its newest complete checkpoint epoch.
When an agent runs on this machine (or $SHOAL_AGENT names one), the job goes to
it: ranks are spread over the cluster's nodes and the program (and every --file)
is staged to them; a Python interpreter is not staged but run by its path, which
every node must have, and its script is staged instead. With no agent inside a
Slurm allocation ($SLURM_JOB_ID), shoal run starts an agent on each allocated node
(srun --no-kill), runs the job over them and stops them at the end
(docs/slurm.md). With --durable DIR or s3://BUCKET/PREFIX (an object store),
on any cluster of agents or in such an allocation, the job's newest complete
epoch is kept there: in an object store on a cluster of agents, by the job's
coordinator, whose agent needs the store's credentials (each node uploads its
own shards), so --detach may be given; elsewhere while shoal run follows the
job. A run of the same job resumes from it, even
when every node the job ran on is gone (from an object store, each node
fetches its own shards back; docs/durable.md); in an allocation,
SIGTERM (Slurm's warning signal: exec shoal run in the batch script) holds the
job at an epoch kept there and requeues it. With no agent
elsewhere, shoal run coordinates the job itself on this machine; an agent that
refuses the job (a wrong secret) is an error, not a reason to run it here
instead. Such a run, cancelled (Ctrl-C) or failed, keeps its checkpoints (24h,
or as --keep and --keep-for say); the same command with its --job-id resumes
from them. Another program, arguments or rank count is refused,
naming what differs; --fresh starts afresh (docs/retention.md).

Rank output is prefixed "[rank] "; shoal's own lines start "shoal: ".

With --min-ranks or --max-ranks the job is elastic: its rank count follows the
nodes. At its first launch (unless -n gives one), after a node is lost or
leaves, and when nodes join (--auto-rebalance, 1 by default for an elastic
job), the count within the range that is predicted fastest is chosen: one rank
per core where nothing is known of the job yet. The ranks restore from a
checkpoint of the old count; the program protects its state as distributed or
replicated regions for that (docs/libshoal.md), and one that protects a plain
per-rank region fails at its first checkpoint saying which.

With --detach, shoal run submits the job to the agent and returns at once; the
last line it prints on stdout is the job's id alone:

    id=$(shoal run --detach -n 4 -- ./heat | tail -1)
    shoal logs --follow "$id"; shoal wait "$id"

Flags:
`

const runExitCodes = `
Exit codes: 0 success; the program's own exit code when a rank exited non-zero
by itself (not retried); 1 shoal could not run the job; 2 usage error;
3 ranks kept dying (or mpirun kept failing without a rank saying why) and
--max-restarts was used up; 75 stopped on SIGTERM in a Slurm allocation with
--durable (the newest epoch is kept in the store; the job is requeued when Slurm
allows); 130 interrupted (the job is cancelled). With
--detach: 0 once the job is submitted; 'shoal wait' gives the job's code later.
`

type runFlags struct {
	nranks int
	// minRanks, maxRanks, rankMultiple and ranksPow2 make the job elastic
	// (job.Spec.Elastic).
	minRanks, maxRanks, rankMultiple int
	ranksPow2                        bool
	ckptInterval                     intervalFlag
	mtbf                             time.Duration
	maxRestarts                      int
	hangAfter                        hangFlag
	jobID                            string
	quiet                            bool
	local                            bool
	detach                           bool
	files                            multiFlag
	// programFor is --program-for ARCH=PATH: builds of the program for other
	// instruction sets.
	programFor programForFlag
	mixArch    bool
	env        multiFlag
	relocation string
	layout     string
	noReplan   bool
	mpiOverlay bool
	mpiEncrypt bool
	// maxOversubscribe is how many ranks per core a cluster job may place on a node.
	maxOversubscribe float64
	// ranksPerNode bounds the ranks of any one node (0: no bound).
	ranksPerNode  int
	waitForNodes  time.Duration
	autoRebalance float64
	engine        string
	redundancy    redundancyFlag
	// keep and keepFor are --keep and --keep-for: how long the job's data
	// stays on the nodes after it ends (docs/retention.md).
	keep    bool
	keepFor time.Duration
	// durable is --durable DIR (made absolute) or s3://BUCKET/PREFIX: where the
	// newest complete epoch is kept, with agents (docs/durable.md);
	// durableLoc is it parsed, and durableEndpoint --durable-endpoint URL.
	durable         string
	durableLoc      durable.Location
	durableEndpoint string
	// durableRate is --durable-rate: the bytes a second each node may take to
	// upload its shards, or to fetch them when the job resumes (0: no bound).
	durableRate int64
	// fresh is --fresh: a run on this machine alone starts from the
	// beginning, removing what an earlier run of the job id kept.
	fresh bool
	// user is --user NAME, and owner the user it names (jobOwner): who the
	// job's ranks run as, instead of the agents' user.
	user  string
	owner *job.Owner
}

// jobSpec is the job the flags ask for, of argv and the staged files: the one
// spec, whether it runs on this machine alone or is submitted to a cluster.
// The --file inputs are added once uploaded (addInputs).
func (f runFlags) jobSpec(argv []string, files []job.File) job.Spec {
	spec := job.Spec{
		ID: f.jobID, Ranks: f.nranks, Argv: argv, Files: files,
		MinRanks: f.minRanks, MaxRanks: f.maxRanks, RankMultiple: f.rankMultiple, RanksPow2: f.ranksPow2, MixArch: f.mixArch,
		CheckpointInterval: job.Duration(f.ckptInterval.d), CheckpointAuto: f.ckptInterval.auto, MTBF: job.Duration(f.mtbf), MaxRestarts: f.maxRestarts,
		HangAfter:        job.Duration(f.hangAfter),
		MaxOversubscribe: f.maxOversubscribe, RanksPerNode: f.ranksPerNode, Relocation: f.relocation,
		Layout: f.layout, NoReplan: f.noReplan, MPIOverlay: f.mpiOverlay, MPIEncrypt: f.mpiEncrypt, Engine: f.engine,
		WaitForNodes: job.Duration(f.waitForNodes), AutoRebalance: f.autoRebalance,
		Keep: f.keepSpec(), Redundancy: f.redundancy.copies, Parity: f.redundancy.parity,
		Owner: f.owner, Env: envMap(f.env),
	}
	return spec
}

// envMap is the environment of --env KEY=VALUE words, checked already; nil for none.
func envMap(words []string) map[string]string {
	var env map[string]string
	for _, kv := range words {
		k, v, _ := strings.Cut(kv, "=")
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	return env
}

// keepSpec is the JobSpec.Keep the flags ask for.
func (f runFlags) keepSpec() job.Duration {
	if f.keep {
		return job.KeepForever
	}
	return job.Duration(f.keepFor)
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// redundancyFlag is --redundancy: copy (two copies of each shard), copy:N,
// or rs:K+M (Reed–Solomon parity).
type redundancyFlag struct {
	copies int
	parity *job.Parity
}

func (f *redundancyFlag) String() string {
	switch {
	case f.parity != nil:
		return fmt.Sprintf("rs:%d+%d", f.parity.K, f.parity.M)
	case f.copies != 0:
		return fmt.Sprintf("copy:%d", f.copies)
	}
	return "copy"
}

func (f *redundancyFlag) Set(v string) error {
	const want = "want copy, copy:N (N copies of each shard, N ≥ 1) or rs:K+M (K ≥ 1, M ≥ 1, K+M ≤ 256)"
	switch {
	case v == "copy":
		*f = redundancyFlag{}
	case strings.HasPrefix(v, "copy:"):
		n, err := strconv.Atoi(v[len("copy:"):])
		if err != nil || n < 1 {
			return errors.New(want)
		}
		*f = redundancyFlag{copies: n}
	case strings.HasPrefix(v, "rs:"):
		k, m, ok := strings.Cut(v[len("rs:"):], "+")
		kn, kerr := strconv.Atoi(k)
		mn, merr := strconv.Atoi(m)
		if !ok || kerr != nil || merr != nil || kn < 1 || mn < 1 || kn+mn > job.MaxParity {
			return errors.New(want)
		}
		*f = redundancyFlag{parity: &job.Parity{K: kn, M: mn}}
	default:
		return errors.New(want)
	}
	return nil
}

// intervalFlag is --ckpt-interval: auto, or seconds or a duration as
// SHOAL_CKPT_INTERVAL takes them (0: no interval checkpoints).
type intervalFlag struct {
	d    time.Duration
	auto bool
}

func (f *intervalFlag) String() string {
	if f.auto {
		return "auto"
	}
	return f.d.String()
}

func (f *intervalFlag) Set(v string) error {
	if v == "auto" {
		*f = intervalFlag{auto: true}
		return nil
	}
	d, err := parseSeconds(v)
	if err != nil {
		return errors.New("want auto, seconds (30, 0.5) or a duration (500ms, 30s, 2m; 0 turns interval checkpoints off)")
	}
	*f = intervalFlag{d: d}
	return nil
}

func parseRunFlags(args []string, stdout, stderr io.Writer) (runFlags, []string, int) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&f.nranks, "n", 0, "number of ranks (1 to 65536; required unless the job is elastic, where it is the first launch's count, default one per core)")
	fs.IntVar(&f.minRanks, "min-ranks", 0, "make the job elastic: at least `A` ranks at every launch (see above)")
	fs.IntVar(&f.maxRanks, "max-ranks", 0, "make the job elastic: at most `B` ranks at every launch (default 65536 when --min-ranks is given)")
	fs.IntVar(&f.rankMultiple, "rank-multiple", 0, "an elastic job's count is a multiple of `K` (a program that needs an even count: 2)")
	fs.BoolVar(&f.ranksPow2, "ranks-pow2", false, "an elastic job's count is a power of two")
	f.ckptInterval = intervalFlag{auto: true}
	fs.Var(&f.ckptInterval, "ckpt-interval", "time between checkpoints: auto (chosen from what a checkpoint costs and how often the cluster loses nodes, Young/Daly's optimum between 1 s and 10 min), or seconds (30, 0.5) or a duration (500ms, 2m) as SHOAL_CKPT_INTERVAL takes them; 0 turns interval checkpoints off")
	fs.Var((*secondsValue)(&f.mtbf), "mtbf", "how often each node fails, for --ckpt-interval auto: one node's mean time between failures, above 0, in seconds or a duration (`DURATION`: 3600, 90m; default: learned from the cluster's record of nodes lost, starting from one a node-hour)")
	fs.IntVar(&f.maxRestarts, "max-restarts", 3, "how often the job may be relaunched after losing ranks")
	fs.Var(&f.hangAfter, "hang-after", hangUsage)
	fs.StringVar(&f.jobID, "job-id", "", "job id (default: the program's name and a random suffix); on this machine alone, the id of a run that kept checkpoints resumes from them")
	fs.BoolVar(&f.local, "local", false, "run on this machine only, even when an agent is running")
	fs.BoolVar(&f.fresh, "fresh", false, "on this machine alone: start from the beginning, removing the checkpoints an earlier run of the --job-id kept (without it, a run with the same program and arguments resumes from them, and one with others is refused)")
	fs.BoolVar(&f.detach, "detach", false, "submit the job to the agent and return; the last line printed is the job id (with an agent; see shoal wait, shoal logs)")
	fs.Var(&f.env, "env", "`KEY=VALUE` in every rank's environment (repeatable; e.g. OMPI_MCA_btl=self,tcp)")
	fs.StringVar(&f.relocation, "relocation", "rank", "after a node is lost: rank (place every rank anew) or block (move its ranks together to one node, for comparison)")
	fs.StringVar(&f.layout, "layout", "", "where ranks go: the planner's choice (the default), or for comparison blocks (contiguous, in proportion to cores × speed), cyclic (round-robin) or packed (the fewest nodes) (with an agent)")
	fs.BoolVar(&f.mpiOverlay, "mpi-overlay", false, "carry MPI's traffic between nodes over the overlay the agents run (shoal agent --overlay; docs/overlay.md), encrypted by their TLS: a pair of nodes that connects one way only still works; the job goes only on nodes with the overlay (with an agent)")
	fs.BoolVar(&f.mpiEncrypt, "mpi-encrypt", false, "encrypt and authenticate every byte MPI sends between nodes: all of it goes over the overlay's TLS tunnels, as with --mpi-overlay, and the job's record says so (shoal job); the job goes only on nodes with the overlay. An agent started with --mpi-encrypt sets it on every job (with an agent; docs/security.md)")
	fs.BoolVar(&f.noReplan, "no-replan", false, "keep the ranks in contiguous blocks in proportion to cores × speed: no placing by the measured links and the traffic the ranks report, and no move at a checkpoint for it (with an agent)")
	fs.Var(&f.programFor, "program-for", "`ARCH=PATH`: a build of the program for another instruction set (arm64, amd64), staged to that set's nodes, so that the job may run there too: one MPI world per instruction set, on the set that fits it best (repeatable; with an agent)")
	fs.BoolVar(&f.mixArch, "mix-arch", false, "let one MPI world span the nodes of every instruction set the program is built for (--program-for), each running its own build; Open MPI 4.1 and MPICH 4.0 run such a world between x86-64 and arm64 for every MPI basic type but long double (with an agent)")
	fs.Var(&f.files, "file", "input `FILE` to stage into every node's job directory (repeatable; with an agent)")
	fs.Float64Var(&f.maxOversubscribe, "max-oversubscribe", 1, "ranks per core a node may run, up to 64; below 1 spreads them thinner, 0.5 one per two cores (with an agent; this machine alone always allows more)")
	fs.IntVar(&f.ranksPerNode, "ranks-per-node", 0, "at most `N` ranks on any one node, whatever its cores; 1 spreads them one per node (with an agent; 0: no bound)")
	fs.DurationVar(&f.waitForNodes, "wait-for-nodes", 0, "when the ranks do not fit the live nodes, wait this long for nodes to join, then fail (with an agent; 0: relaunch on the survivors, oversubscribed if need be)")
	fs.Float64Var(&f.autoRebalance, "auto-rebalance", 0, "when nodes join, relaunch over them if that saves `RATIO` times what a checkpoint and restart cost (with an agent; 0: off, else at least 1)")
	fs.Var(&f.redundancy, "redundancy", "how each checkpoint survives lost nodes: copy, the default (each shard on two nodes), copy:N (on N nodes), or rs:K+M (one copy, and Reed–Solomon parity over groups of K shards on M other nodes: any M nodes lost at once lose nothing, for (K+M)/K of the state in storage; with an agent; docs/architecture.md)")
	fs.StringVar(&f.engine, "engine", "", "the MPI that launches the job: openmpi or mpich (the program must be built with that MPI: build/mpich/ holds the MPICH builds); default: the MPI the program is linked with, else the agent's --engine, else openmpi; a program built with the other MPI, or linked with a libshoal built for the other, is refused")
	fs.BoolVar(&f.keep, "keep", false, "keep the job's data (checkpoints, job directories, staged files) on every node after it ends, until 'shoal gc --job ID' removes it (default: the retention policy, of the agents or of this machine alone: 1h after success and 24h after a failure or cancel; docs/retention.md)")
	fs.DurationVar(&f.keepFor, "keep-for", 0, "keep the job's data `DURATION` after it ends, whatever the outcome, instead of the retention policy")
	fs.StringVar(&f.durable, "durable", "", "keep the newest complete checkpoint epoch in `DIR` on a shared file system, or in an object store at s3://BUCKET/PREFIX (endpoint, region and credentials from the AWS_* environment variables and ~/.aws/credentials), copied as each epoch is complete (with an agent, or in a Slurm allocation): to an object store on a cluster of agents the job's coordinator has each node upload its own shards with its agent's credentials (--durable-rate bounds each) and writes the manifest, with or without --detach, when its agent has credentials, else this shoal run does while it follows the job; in a Slurm allocation, or to a DIR (not with --detach), shoal run has them copied while it follows the job (through itself for a DIR and from nodes without credentials); a run with the same location, program, arguments and rank count resumes from it, even when every node the job ran on is gone (from an object store each node fetches its own shards), and the job's success clears it; in a Slurm allocation, SIGTERM (Slurm's warning signal) checkpoints, keeps the epoch there, and requeues the job (exit 75); docs/durable.md")
	fs.Func("durable-rate", "with --durable s3://…: at most `BYTES` a second (20M, 1G) for each node's upload of its shards (and its fetch of them on a resume), so that the copy leaves the job most of the node's link (default: no bound)", func(v string) error {
		n, err := files.ParseBytes(v)
		if err != nil || n <= 0 {
			return errors.New("want a size a second, such as 20M")
		}
		f.durableRate = n
		return nil
	})
	fs.StringVar(&f.durableEndpoint, "durable-endpoint", "", "with --durable s3://…: the S3-compatible server's `URL`, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS S3)")
	fs.StringVar(&f.user, "user", "", "run the job's ranks as `NAME` (a login name or uid of this node, not root) on every node instead of as the agents' user; for root (or the agents' user) only: any other user's jobs run as that user (with an agent)")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the ranks' output and errors, not shoal's progress lines")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, runUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprint(stdout, runExitCodes)
		return f, nil, exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %v (see 'shoal run --help')\n", err)
		return f, nil, exitUsage
	}
	rest := fs.Args()
	elastic := job.Spec{Ranks: f.nranks, MinRanks: f.minRanks, MaxRanks: f.maxRanks, RankMultiple: f.rankMultiple, RanksPow2: f.ranksPow2}
	explicit := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	switch {
	case !elastic.Elastic() && (f.rankMultiple != 0 || f.ranksPow2):
		fmt.Fprintln(stderr, "shoal run: --rank-multiple and --ranks-pow2 constrain an elastic job's count: give --min-ranks or --max-ranks too")
		return f, nil, exitUsage
	case elastic.Elastic() && elastic.RangeProblem() != "":
		fmt.Fprintf(stderr, "shoal run: %s\n", elastic.RangeProblem())
		return f, nil, exitUsage
	case !elastic.Elastic() && !explicit["n"]:
		fmt.Fprintln(stderr, "shoal run: -n N is required: the job's number of ranks (or --min-ranks/--max-ranks for an elastic job)")
		return f, nil, exitUsage
	case !elastic.Elastic() && f.nranks < 1:
		fmt.Fprintf(stderr, "shoal run: -n %d: need at least 1 rank (or --min-ranks/--max-ranks for an elastic job)\n", f.nranks)
		return f, nil, exitUsage
	case f.nranks > job.MaxRanks:
		fmt.Fprintf(stderr, "shoal run: -n %d: at most %d ranks (docs/api.md says why)\n", f.nranks, job.MaxRanks)
		return f, nil, exitUsage
	case f.ckptInterval.d < 0:
		fmt.Fprintf(stderr, "shoal run: --ckpt-interval %v: must not be negative\n", f.ckptInterval.d)
		return f, nil, exitUsage
	case f.mtbf < 0 || (explicit["mtbf"] && f.mtbf == 0):
		fmt.Fprintf(stderr, "shoal run: --mtbf %v: must be positive\n", f.mtbf)
		return f, nil, exitUsage
	case f.mtbf > 0 && !f.ckptInterval.auto:
		fmt.Fprintf(stderr, "shoal run: --mtbf %v: only sets --ckpt-interval auto, not %v\n", f.mtbf, f.ckptInterval.d)
		return f, nil, exitUsage
	case f.layout != "" && f.layout != "blocks" && f.layout != "cyclic" && f.layout != "packed":
		fmt.Fprintf(stderr, "shoal run: --layout %q: want blocks, cyclic or packed\n", f.layout)
		return f, nil, exitUsage
	case f.relocation != "rank" && f.relocation != "block":
		fmt.Fprintf(stderr, "shoal run: --relocation %q: want rank or block\n", f.relocation)
		return f, nil, exitUsage
	case !(f.maxOversubscribe > 0 && f.maxOversubscribe <= job.MaxOversubscribe):
		fmt.Fprintf(stderr, "shoal run: --max-oversubscribe %g: want more than 0 and at most %d ranks per core\n", f.maxOversubscribe, job.MaxOversubscribe)
		return f, nil, exitUsage
	case f.ranksPerNode < 0 || f.ranksPerNode > job.MaxRanks:
		fmt.Fprintf(stderr, "shoal run: --ranks-per-node %d: want 0 (no bound) to %d\n", f.ranksPerNode, job.MaxRanks)
		return f, nil, exitUsage
	case f.waitForNodes < 0:
		fmt.Fprintf(stderr, "shoal run: --wait-for-nodes %v: must not be negative\n", f.waitForNodes)
		return f, nil, exitUsage
	case f.autoRebalance != 0 && !(f.autoRebalance >= 1):
		fmt.Fprintf(stderr, "shoal run: --auto-rebalance %g: want 0 (off) or a ratio of at least 1\n", f.autoRebalance)
		return f, nil, exitUsage
	case f.engine != "" && !slices.Contains(engine.Names, f.engine):
		fmt.Fprintf(stderr, "shoal run: --engine %q: want %s\n", f.engine, strings.Join(engine.Names, " or "))
		return f, nil, exitUsage
	case f.maxRestarts < 0:
		fmt.Fprintf(stderr, "shoal run: --max-restarts %d: must not be negative\n", f.maxRestarts)
		return f, nil, exitUsage
	case f.keepFor < 0:
		fmt.Fprintf(stderr, "shoal run: --keep-for %v: must not be negative\n", f.keepFor)
		return f, nil, exitUsage
	case f.keep && f.keepFor > 0:
		fmt.Fprintln(stderr, "shoal run: --keep and --keep-for: give one (--keep keeps the data until removed by hand)")
		return f, nil, exitUsage
	case f.detach && f.durable != "" && !strings.HasPrefix(f.durable, "s3://"):
		fmt.Fprintln(stderr, "shoal run: --detach and --durable DIR: only the attached shoal run copies the job's epochs to a directory (the agents never write a path a user named); give s3://BUCKET/PREFIX, whose copies the job's coordinator makes")
		return f, nil, exitUsage
	case f.detach && f.local:
		fmt.Fprintln(stderr, "shoal run: --detach and --local: a detached job needs an agent to run it")
		return f, nil, exitUsage
	case len(rest) == 0:
		fmt.Fprintln(stderr, "shoal run: no program given (see 'shoal run --help')")
		return f, nil, exitUsage
	}
	if elastic.Elastic() && !explicit["auto-rebalance"] {
		f.autoRebalance = 1 // an elastic job grows onto nodes that join when that pays
	}
	if f.user != "" {
		owner, err := jobOwner(f.user)
		if err != nil {
			fmt.Fprintf(stderr, "shoal run: %v\n", err)
			return f, nil, exitUsage
		}
		f.owner = owner
	}
	if f.durable != "" {
		if !strings.Contains(f.durable, "://") {
			abs, err := filepath.Abs(f.durable)
			if err != nil {
				fmt.Fprintf(stderr, "shoal run: --durable %s: %v\n", f.durable, err)
				return f, nil, exitUsage
			}
			f.durable = abs
		}
		loc, err := durable.ParseLocation(f.durable)
		if err != nil {
			fmt.Fprintf(stderr, "shoal run: --durable: %v\n", err)
			return f, nil, exitUsage
		}
		f.durableLoc, f.durable = loc, loc.String()
	}
	if f.durableRate > 0 && f.durableLoc.Bucket == "" {
		fmt.Fprintln(stderr, "shoal run: --durable-rate: only with --durable s3://BUCKET/PREFIX (the nodes upload to an object store)")
		return f, nil, exitUsage
	}
	if f.durableEndpoint != "" && f.durableLoc.Bucket == "" {
		fmt.Fprintln(stderr, "shoal run: --durable-endpoint: only with --durable s3://BUCKET/PREFIX")
		return f, nil, exitUsage
	}
	return f, rest, -1
}

// resolveProgram finds the executable as a shell would and checks it can run.
func resolveProgram(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("program %q not found", name)
		}
		var pe *os.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, os.ErrNotExist) {
			return "", fmt.Errorf("program %q does not exist", name)
		}
		return "", fmt.Errorf("program %q is not executable", name)
	}
	return filepath.Abs(path)
}

func runJob(args []string, stdout, stderr io.Writer) int {
	f, rest, code := parseRunFlags(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	program, err := resolveProgram(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return exitUsage
	}
	if f.engine, err = chooseEngine(f.engine, program, linkedMPI(program)); err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return exitUsage
	}
	for _, in := range f.files {
		if st, err := os.Stat(in); err != nil || !st.Mode().IsRegular() {
			fmt.Fprintf(stderr, "shoal run: --file %s: not a readable file\n", in)
			return exitUsage
		}
	}
	for _, kv := range f.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			fmt.Fprintf(stderr, "shoal run: --env %q: want KEY=VALUE\n", kv)
			return exitUsage
		}
	}
	if !f.local {
		c, secret, err := localAgent(stderr)
		if err != nil {
			fmt.Fprintf(stderr, "shoal run: %v\n", err)
			return exitFailure
		}
		if c != nil && f.durable != "" && secret == nil {
			fmt.Fprintf(stderr, "shoal run: --durable: shoal run has every node copy the job's epochs, which needs the cluster's secret, and you cannot read the agent's (at %s)\n", c.Addr())
			return exitUsage
		}
		if c != nil && f.fresh {
			fmt.Fprintf(stderr, "shoal run: --fresh: only for a run on this machine alone, not with the agent at %s\n", c.Addr())
			return exitUsage
		}
		if c != nil {
			var dr *durableRun
			if f.durable != "" {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				store, code := openDurable(ctx, f, program, rest[1:], stderr)
				stop()
				if code >= 0 {
					return code
				}
				dr = &durableRun{secret: secret, store: store, loc: f.durable, endpoint: f.durableEndpoint, rate: f.durableRate, quiet: f.quiet, stdout: stdout}
			}
			return runOnCluster(c, f, program, rest[1:], stdout, stderr, dr, nil)
		}
		if alloc, ok := allocationOf(stderr); ok {
			if f.owner != nil && os.Getuid() != 0 {
				fmt.Fprintf(stderr, "shoal run: --user %s: the agents shoal run starts in a Slurm allocation run as you (uid %d), who cannot run ranks as another user\n", f.user, os.Getuid())
				return exitUsage
			}
			if f.detach {
				fmt.Fprintln(stderr, "shoal run: --detach inside a Slurm allocation: the agents shoal run starts there stop when it returns")
				return exitUsage
			}
			if f.fresh {
				fmt.Fprintln(stderr, "shoal run: --fresh inside a Slurm allocation: only for a run on this machine alone (a run with --durable DIR starts afresh when DIR is removed)")
				return exitUsage
			}
			return runInAllocation(alloc, f, program, rest[1:], stdout, stderr)
		}
	}
	if given := clusterFlags(f); len(given) > 0 {
		verb := "needs"
		if len(given) > 1 {
			verb = "need"
		}
		fmt.Fprintf(stderr, "shoal run: %s %s an agent, and none runs on this node (or --local was given)\n", strings.Join(given, " and "), verb)
		return exitUsage
	}
	return runHere(f, program, rest[1:], stdout, stderr)
}

// clusterFlags names the flags given in f that only an agent can honour.
func clusterFlags(f runFlags) []string {
	var given []string
	for _, g := range []struct {
		name string
		set  bool
	}{
		{"--detach", f.detach}, {"--wait-for-nodes", f.waitForNodes > 0}, {"--auto-rebalance", f.autoRebalance > 0 && !f.spec().Elastic()},
		{"--user", f.user != ""},
		{"--durable", f.durable != ""},
		{"--mpi-overlay", f.mpiOverlay},
		{"--mpi-encrypt", f.mpiEncrypt},
		{"--redundancy", f.redundancy.copies > 1 || f.redundancy.parity != nil},
		// One machine holds every rank: a bound below the rank count spreads them
		// over nodes this machine alone does not have.
		{"--ranks-per-node", f.ranksPerNode > 0 && f.nranks > f.ranksPerNode},
	} {
		if g.set {
			given = append(given, g.name)
		}
	}
	return given
}

// runVerbosity is how much of a job's events shoal run prints.
func runVerbosity(f runFlags) verbosity {
	if f.quiet {
		return showOutput
	}
	return showAll
}

// localDirs returns where an embedded agent keeps shards (tmpfs when there is one) and
// job run state. Without SHOAL_DATA_DIR they are in directories of the user's in
// /tmp and /dev/shm, which every user may write: names others can guess, so each
// is checked to be the user's own ([userdir.Private]).
func localDirs() (ckptRoot, runRoot string, err error) {
	base := os.Getenv("SHOAL_DATA_DIR")
	if base == "" {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("shoal-%d", os.Getuid()))
		if err := userdir.Private(base); err != nil {
			return "", "", err
		}
	}
	runRoot = filepath.Join(base, "jobs")
	ckptRoot = filepath.Join(base, "ckpt")
	if os.Getenv("SHOAL_DATA_DIR") == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			shm := filepath.Join("/dev/shm", fmt.Sprintf("shoal-%d", os.Getuid()))
			if err := userdir.Private(shm); err != nil {
				return "", "", err
			}
			if err := os.Mkdir(filepath.Join(shm, "ckpt"), 0o700); err == nil || errors.Is(err, fs.ErrExist) {
				ckptRoot = filepath.Join(shm, "ckpt")
			}
		}
	}
	return ckptRoot, runRoot, nil
}

// lockedWriter serialises whole writes of several goroutines to one writer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// spec is the rank count and range of the flags, as a spec.
func (f runFlags) spec() job.Spec {
	return job.Spec{Ranks: f.nranks, MinRanks: f.minRanks, MaxRanks: f.maxRanks, RankMultiple: f.rankMultiple, RanksPow2: f.ranksPow2}
}

// ranksWords says the job's count for its first line: "4 ranks", or an
// elastic job's "2 to 16 ranks, a multiple of 2 (4 at first)".
func (f runFlags) ranksWords() string {
	s := f.spec()
	if !s.Elastic() {
		return job.Plural(f.nranks, "rank")
	}
	if f.nranks > 0 {
		return fmt.Sprintf("%s (%d at first)", s.RangeString(), f.nranks)
	}
	return s.RangeString()
}
