package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/testbed"
)

// chaosConfig is one chaos run.
type chaosConfig struct {
	root, shoal string
	instance    int
	seed        uint64
	faults      int
	minutes     float64
	hosts       int // hosts at the start
	maxHosts    int // `testbed add` stops here
	cores       int
	jobTimeout  time.Duration // a job not ended this long after its submission hangs
	stall       time.Duration // a job with no new event for this long hangs
	keep        string        // directory that keeps the agents' logs
}

// The kinds of fault, each injected and later repaired.
const (
	faultKillHost   = "kill-host"   // SIGKILL every process of a host that does not lead; testbed restart later
	faultKillLeader = "kill-leader" // the same to the host that leads the job store (coordinates every job)
	faultKillTwo    = "kill-two"    // two hosts at once
	faultKillAgent  = "kill-agent"  // SIGKILL the agent process only; its ranks live on; restart it later
	faultCut        = "cut"         // a host's link down; healed later
	faultLeave      = "leave"       // `shoal leave` in a host; its agent started again later
	faultAdd        = "add"         // `testbed add`: a new host joins
)

var faultKinds = []string{faultKillHost, faultKillLeader, faultKillTwo, faultKillAgent, faultCut, faultLeave, faultAdd}

// Why a host is down, in a window.
const (
	whyKilled      = "killed"
	whyAgentKilled = "agent killed"
	whyCut         = "cut"
	whyLeft        = "left" // not down: it must be seen as left, not dead
)

// downOnPurpose are the windows in which a node may rightly be declared dead.
var downOnPurpose = []string{whyKilled, whyAgentKilled, whyCut}

// window is a time a host was down on purpose: killed, cut, its agent killed,
// or left. A node declared dead then is no false declaration.
type window struct {
	host, why string
	from, to  time.Time // to is zero while it lasts
}

// world is the chaos run's shared state: the cluster, what the faults hold
// down now, and every window so far.
type world struct {
	cfg     chaosConfig
	c       *cluster
	mu      sync.Mutex
	down    map[string]int // host → index in windows of the window it is in
	windows []window
	counts  map[string]int // faults injected by kind
	notes   []string       // what went wrong with the faults themselves
}

func chaosMain(args []string) int {
	cfg := chaosConfig{faults: 50, minutes: 40, hosts: 5, maxHosts: 8, cores: 2, jobTimeout: 10 * time.Minute, stall: 2 * time.Minute}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	seed := fs.Int64("seed", -1, "seed of the fault schedule (default: from the time)")
	fs.IntVar(&cfg.faults, "faults", cfg.faults, "faults to inject")
	fs.Float64Var(&cfg.minutes, "minutes", cfg.minutes, "inject no fault after this many minutes")
	fs.IntVar(&cfg.hosts, "hosts", cfg.hosts, "testbed hosts at the start")
	fs.IntVar(&cfg.maxHosts, "max-hosts", cfg.maxHosts, "add no host beyond this many")
	fs.DurationVar(&cfg.jobTimeout, "job-timeout", cfg.jobTimeout, "a job not ended this long after its submission counts as hung")
	fs.DurationVar(&cfg.stall, "stall", cfg.stall, "a job with no new event for this long counts as hung")
	fs.IntVar(&cfg.instance, "instance", 72, "testbed instance")
	fs.StringVar(&cfg.keep, "keep", "", "directory to keep the agents' logs in (default build/chaos/seed-N)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.hosts < 5 || cfg.faults < 0 || cfg.minutes <= 0 || cfg.maxHosts < cfg.hosts {
		fmt.Fprintln(os.Stderr, "chaos: want --hosts ≥ 5 (two hosts down must leave a quorum of five voters), --faults ≥ 0, --minutes > 0, --max-hosts ≥ --hosts")
		return 2
	}
	cfg.seed = uint64(*seed)
	if *seed < 0 {
		cfg.seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	var err error
	if cfg.root, cfg.shoal, err = built(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	if cfg.keep == "" {
		cfg.keep = filepath.Join(cfg.root, "build/chaos", fmt.Sprintf("seed-%d", cfg.seed))
	}
	fmt.Printf("chaos: seed %d (rerun the schedule with --seed %d)\n", cfg.seed, cfg.seed)
	ctx, stop := interruptible()
	defer stop()
	defer down(cfg.instance)

	kinds, err := jobKinds(cfg.root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	c, err := up(ctx, cfg.instance, cfg.hosts, cfg.cores, cfg.shoal)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: testbed up:", err)
		return 1
	}
	w := &world{cfg: cfg, c: c, down: map[string]int{}, counts: map[string]int{}}
	jr := newJobRunner(w, kinds, cfg.seed)
	stopJobs := make(chan struct{})
	jobsDone := make(chan struct{})
	go func() { defer close(jobsDone); jr.loop(ctx, stopJobs) }()

	started := time.Now()
	w.inject(ctx, rand.New(rand.NewPCG(cfg.seed, 1)), started)
	close(stopJobs)
	<-jobsDone
	elapsed := time.Since(started)

	decl := w.declarations(jr.all())
	if err := w.keepLogs(jr.all()); err != nil {
		w.note("keeping the agents' logs: %v", err)
	}
	code := chaosReport(os.Stdout, w, jr, decl, elapsed)
	if ctx.Err() != nil {
		fmt.Println("chaos: interrupted")
		return 130
	}
	return code
}

// inject runs the fault schedule: settle, a pause, a fault, a hold, its repair,
// until cfg.faults were injected or cfg.minutes passed.
func (w *world) inject(ctx context.Context, rng *rand.Rand, started time.Time) {
	for i := 1; i <= w.cfg.faults; i++ {
		if time.Since(started).Minutes() > w.cfg.minutes {
			w.note("stopped after %d faults: --minutes %g reached", i-1, w.cfg.minutes)
			break
		}
		w.settle(ctx)
		gap := time.Duration(1000+rng.IntN(3000)) * time.Millisecond
		hold := time.Duration(3000+rng.IntN(7000)) * time.Millisecond
		kind := faultKinds[rng.IntN(len(faultKinds))]
		hosts := w.hostNames()
		if kind == faultAdd && len(hosts) >= w.cfg.maxHosts {
			kind = faultKinds[rng.IntN(len(faultKinds)-1)] // every kind but add, which is last
		}
		if !sleep(ctx, gap) {
			return
		}
		victims, repair := w.fault(ctx, rng, kind, hosts)
		if repair == nil {
			logf("fault %d/%d: %s %s", i, w.cfg.faults, kind, strings.Join(victims, " "))
			continue
		}
		logf("fault %d/%d: %s %s, repaired after %v", i, w.cfg.faults, kind, strings.Join(victims, " "), hold)
		if !sleep(ctx, hold) {
			repair()
			return
		}
		repair()
	}
	w.settle(ctx)
}

// fault injects one fault of kind and returns its victims and its repair (nil
// for none). Victims are drawn with rng from hosts, sorted.
func (w *world) fault(ctx context.Context, rng *rand.Rand, kind string, hosts []string) ([]string, func()) {
	leader := w.leader()
	others := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if h != leader {
			others = append(others, h)
		}
	}
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	w.mu.Lock()
	w.counts[kind]++
	w.mu.Unlock()
	switch kind {
	case faultAdd:
		h, err := w.c.bed.Add(ctx, testbed.HostConfig{Cores: w.cfg.cores})
		if err != nil {
			w.note("testbed add: %v", err)
		}
		return []string{h.Name}, nil
	case faultKillHost, faultKillLeader:
		v := pick(others)
		if kind == faultKillLeader && leader != "" {
			v = leader
		}
		w.kill(ctx, v, whyKilled)
		return []string{v}, func() { w.restart(ctx, v) }
	case faultKillTwo:
		a := pick(hosts)
		rest := make([]string, 0, len(hosts))
		for _, h := range hosts {
			if h != a {
				rest = append(rest, h)
			}
		}
		b := pick(rest)
		var wg sync.WaitGroup
		for _, v := range []string{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); w.kill(ctx, v, whyKilled) }()
		}
		wg.Wait()
		return []string{a, b}, func() { w.restart(ctx, a); w.restart(ctx, b) }
	case faultKillAgent:
		v := pick(hosts)
		w.open(v, whyAgentKilled)
		if st, err := w.c.hosts(); err == nil && st[v].AgentAlive {
			if err := syscall.Kill(st[v].AgentPID, syscall.SIGKILL); err != nil {
				w.note("kill the agent of %s (pid %d): %v", v, st[v].AgentPID, err)
			}
		}
		return []string{v}, func() { w.restart(ctx, v) }
	case faultCut:
		v := pick(hosts)
		w.open(v, whyCut)
		if err := w.c.bed.Cut(ctx, v); err != nil {
			w.note("cut %s: %v", v, err)
		}
		return []string{v}, func() {
			if err := w.c.bed.Heal(ctx, v); err != nil {
				w.note("heal %s: %v", v, err)
			}
			w.close(v)
		}
	case faultLeave:
		v := pick(hosts)
		w.open(v, whyLeft)
		if out, code, err := w.c.run(v, 3*time.Minute, "leave", "--timeout", "60s"); err != nil || code != 0 {
			w.note("shoal leave in %s: exit %d, %v: %s", v, code, err, lastLine(out))
		}
		return []string{v}, func() { w.restart(ctx, v) }
	}
	panic("unknown fault " + kind)
}

func (w *world) kill(ctx context.Context, host, why string) {
	w.open(host, why)
	if _, err := w.c.bed.Kill(ctx, host); err != nil {
		w.note("kill %s: %v", host, err)
	}
}

// restart starts host's agent again and closes its window.
func (w *world) restart(ctx context.Context, host string) {
	if err := w.c.bed.StartAgent(ctx, host); err != nil {
		w.note("testbed restart %s: %v", host, firstLine(err.Error()))
	}
	w.close(host)
}

func (w *world) open(host, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down[host] = len(w.windows)
	w.windows = append(w.windows, window{host: host, why: why, from: time.Now()})
}

func (w *world) close(host string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i, ok := w.down[host]; ok {
		w.windows[i].to = time.Now()
		delete(w.down, host)
	}
}

func (w *world) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	logf("note: %s", msg)
	w.mu.Lock()
	w.notes = append(w.notes, msg)
	w.mu.Unlock()
}

// hostNames is every host of the testbed, sorted.
func (w *world) hostNames() []string {
	st, err := w.c.hosts()
	if err != nil {
		return nil
	}
	var names []string
	for n := range st {
		names = append(names, n)
	}
	sort.Slice(names, func(a, b int) bool { return hostIndex(names[a]) < hostIndex(names[b]) })
	return names
}

func hostIndex(name string) int {
	var k int
	fmt.Sscanf(name, "n%d", &k)
	return k
}

// healthy is the hosts that no fault holds down, whose link is up and whose
// agent runs, shuffled with rng (sorted when rng is nil).
func (w *world) healthy(rng *rand.Rand) []string {
	st, err := w.c.hosts()
	if err != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for n, h := range st {
		if _, down := w.down[n]; !down && h.State == "up" && h.AgentAlive {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if rng != nil {
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// leader is the job store's leader as a healthy host sees it, "" if none.
func (w *world) leader() string {
	for _, h := range w.healthy(nil) {
		if nodes, err := w.c.nodes(h); err == nil {
			if l := leaderOf(nodes); l != "" {
				return l
			}
		}
	}
	return ""
}

// settle waits until the cluster is whole again (every host up, seen alive by
// all, one leader, the full set of voters), repairing what a failed repair
// left; after 90 s it notes what is still wrong and goes on.
func (w *world) settle(ctx context.Context) {
	for attempt := 0; attempt < 2; attempt++ {
		st, err := w.c.hosts()
		if err != nil {
			w.note("testbed status: %v", err)
			return
		}
		for n, h := range st {
			if h.State == "cut" {
				w.c.bed.Heal(ctx, n)
			}
			if !h.AgentAlive {
				if err := w.c.bed.StartAgent(ctx, n); err != nil {
					w.note("settle: start the agent of %s: %v", n, firstLine(err.Error()))
				}
			}
		}
		if st, err = w.c.hosts(); err != nil {
			return
		}
		problem := w.c.waitSettled(ctx, st, 90*time.Second)
		if problem == "" || ctx.Err() != nil {
			return
		}
		w.note("the cluster did not settle in 90 s: %s", problem)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// keepLogs copies every host's agent log to cfg.keep, and writes there each
// job's events (JSON lines) and output.
func (w *world) keepLogs(jobs []*chaosJob) error {
	if err := os.MkdirAll(w.cfg.keep, 0o755); err != nil {
		return err
	}
	for _, h := range w.hostNames() {
		b, err := os.ReadFile(filepath.Join(w.c.bed.Dir(), h, "agent.log"))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(w.cfg.keep, h+".agent.log"), b, 0o644); err != nil {
			return err
		}
	}
	for _, j := range jobs {
		var evs bytes.Buffer
		enc := json.NewEncoder(&evs)
		for _, e := range j.events {
			enc.Encode(e)
		}
		if err := os.WriteFile(filepath.Join(w.cfg.keep, j.id+".events"), evs.Bytes(), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(w.cfg.keep, j.id+".log"), []byte(j.logs), 0o644); err != nil {
			return err
		}
	}
	return nil
}
