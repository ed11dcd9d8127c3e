package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/internal/job"
	nodepkg "shoal/internal/node"
)

// failoverConfig is what one invocation of the failover benchmark measures.
type failoverConfig struct {
	root, shoal string
	instance    int
	reps        int
	hosts       int // testbed hosts, cores each
	cores       int
	nranks      int
	mb          float64       // protected state per rank
	interval    time.Duration // checkpoint interval
}

// sample is one node loss, timed. Phases not reached are NaN.
type sample struct {
	coordinator bool   // the Raft leader was killed (else a node that runs ranks only)
	victim      string // the killed host
	failure     string // why the job did not run again, "" when it did
	from        string // "epoch 2" or "the beginning": where the job started again
	killCmd     float64
	detect      float64
	election    float64
	decision    float64
	relaunch    float64
	total       float64
	toCoord     float64  // new leader -> coordinator event
	toRestart   float64  // new leader (or node-lost) -> restart event
	poll        float64  // length of the `shoal nodes` call that first showed the new leader
	endedBy     string   // what ended the election: "poll" or "event" (the coordinator event came first)
	declared    float64  // kill -> membership on a survivor declares the victim failed
	again       []string // the runs launched after the one that ran again: the event before each
}

var nan = math.NaN()

func failoverMain(args []string) int {
	cfg := failoverConfig{hosts: 4, cores: 2, nranks: 4, mb: 1, reps: 5, interval: time.Second}
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.IntVar(&cfg.reps, "reps", cfg.reps, "repetitions of each kind of loss")
	fs.Float64Var(&cfg.mb, "mb", cfg.mb, "protected state per rank in MB")
	fs.IntVar(&cfg.nranks, "np", cfg.nranks, "ranks of the job")
	fs.IntVar(&cfg.hosts, "hosts", cfg.hosts, "testbed hosts")
	fs.IntVar(&cfg.cores, "cores", cfg.cores, "cores of each testbed host (one at 128 hosts: each agent then runs with GOMAXPROCS=1)")
	fs.IntVar(&cfg.instance, "instance", 71, "testbed instance")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.reps < 1 || cfg.hosts < 3 || cfg.cores < 1 || cfg.nranks < 1 || cfg.mb <= 0 {
		fmt.Fprintln(os.Stderr, "failover: want --reps ≥ 1, --hosts ≥ 3 (a quorum must survive), --cores ≥ 1, --np ≥ 1, --mb > 0")
		return 2
	}
	var err error
	if cfg.root, cfg.shoal, err = built(); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		return 1
	}
	ctx, stop := interruptible()
	defer stop()
	defer down(cfg.instance)

	n := gridSize(cfg.mb, cfg.nranks)
	var samples []sample
	for r := 1; r <= cfg.reps; r++ {
		for _, coord := range []bool{true, false} {
			if ctx.Err() != nil {
				return 1
			}
			s, err := failoverOnce(ctx, cfg, n, coord)
			if err != nil {
				fmt.Fprintf(os.Stderr, "failover: run %d (%s): %v\n", r, kindName(coord), err)
				return 1
			}
			logf("run %d, %s %s killed: %s", r, kindName(coord), s.victim, s.line())
			samples = append(samples, s)
		}
	}
	return failoverReport(os.Stdout, cfg, n, samples)
}

func kindName(coord bool) string {
	if coord {
		return "coordinator"
	}
	return "other node"
}

// gridSize is heat's N for mb of state per rank (its rows of N+2 doubles).
func gridSize(mb float64, nranks int) int {
	return max(nranks, int(math.Round(math.Sqrt(mb*(1<<20)*float64(nranks)/8))))
}

// failoverOnce brings up a testbed, runs heat until its epoch 2 is complete,
// kills the coordinator's host (coord) or another host that runs ranks, and
// times the way back to running ranks.
func failoverOnce(ctx context.Context, cfg failoverConfig, n int, coord bool) (sample, error) {
	t, err := startTrial(ctx, cfg, n)
	if err != nil {
		return sample{}, err
	}
	victim := t.leader
	if !coord {
		if victim, err = t.rankHost(); err != nil {
			return sample{}, err
		}
	}
	o, err := t.kill(ctx, victim, coord)
	if err != nil {
		return sample{}, err
	}
	return o.sample(t.c), down(cfg.instance)
}

// trial is a testbed with heat running on it, its epoch 2 complete.
type trial struct {
	c         *cluster
	hosts     []string
	view      []nodepkg.Node // the nodes and their roles, as the first host saw them
	leader    string
	submitter string // a host that does not lead, where the job was submitted
	job       string
}

func startTrial(ctx context.Context, cfg failoverConfig, n int) (*trial, error) {
	c, err := up(ctx, cfg.instance, cfg.hosts, cfg.cores, cfg.shoal)
	if err != nil {
		return nil, err
	}
	t := &trial{c: c}
	for i := range cfg.hosts {
		t.hosts = append(t.hosts, fmt.Sprintf("n%d", i+1))
	}
	if t.view, err = c.nodes(t.hosts[0]); err != nil {
		return nil, err
	}
	t.leader, t.submitter = leaderOf(t.view), t.hosts[0]
	if t.submitter == t.leader {
		t.submitter = t.hosts[1]
	}
	t.job, err = c.submit(t.submitter, "-n", strconv.Itoa(cfg.nranks), "--ckpt-interval", cfg.interval.String(), "--",
		filepath.Join(cfg.root, "build/examples/heat"), "--size", strconv.Itoa(n), "--steps", "1000000", "--pace", "2000")
	if err != nil {
		return nil, err
	}
	// A minute at a few hosts; at 128 hosts on this machine's 2 cores the launch
	// alone took more.
	wait := max(time.Minute, time.Duration(len(t.hosts))*time.Second)
	return t, waitEvent(ctx, c, t.submitter, t.job, wait, func(e job.Event) bool {
		return completeFrom(e, 2)
	})
}

// rankHost is the host to kill for the baseline: one that runs ranks of the job
// and does not lead, one that does not vote if there is one.
func (t *trial) rankHost() (string, error) {
	jobs, err := t.c.jobs(t.submitter)
	if err != nil {
		return "", err
	}
	if h := pickRankHost(jobs, t.job, t.view, t.leader); h != "" {
		return h, nil
	}
	return "", fmt.Errorf("every rank of %s runs on the leader %s: no other node to kill", t.job, t.leader)
}

// observation is what a kill left to read: the job's events, the survivors'
// logs, and when a new leader was first seen.
type observation struct {
	coord     bool
	victim    string
	job       string
	survivors []string
	killCmd   float64
	killed    time.Time // when the kill command returned
	query     string    // the host the job's events are read from
	evs       []job.Event
	launch    job.Event // the launch of the run that runs again (or the last one)
	running   time.Time // when it ran again; zero if it did not
	seen      leaderSeen
}

// kill kills victim's host and watches the job until it runs again or ends;
// when the victim leads (coord), every surviving voter polls for a new leader meanwhile.
func (t *trial) kill(ctx context.Context, victim string, coord bool) (*observation, error) {
	o := &observation{coord: coord, victim: victim, seen: leaderSeen{poll: nan}}
	for _, h := range t.hosts {
		if h != victim {
			o.survivors = append(o.survivors, h)
		}
	}
	query := t.submitter
	if query == victim {
		query = o.survivors[0]
	}
	var polls sync.WaitGroup
	pctx, stopPolls := context.WithTimeout(ctx, 30*time.Second)
	defer stopPolls()
	if coord {
		polls.Add(1)
		go func() { defer polls.Done(); o.seen = pollLeader(pctx, t.c, pollers(t.view, o.survivors), victim) }()
	}
	t0 := time.Now()
	if _, err := t.c.bed.Kill(ctx, victim); err != nil {
		return nil, err
	}
	o.killed = time.Now()
	o.killCmd = o.killed.Sub(t0).Seconds()
	var err error
	o.query, o.job = query, t.job
	o.evs, o.running, o.launch, err = waitRunningAgain(ctx, t.c, query, t.job, o.killed, 90*time.Second)
	polls.Wait() // bounded by pctx
	return o, err
}

// sample times the phases of o (see bench/failover's header).
func (o *observation) sample(c *cluster) sample {
	s := sample{coordinator: o.coord, victim: o.victim, killCmd: o.killCmd, detect: nan, election: nan, decision: nan,
		relaunch: nan, total: nan, toCoord: nan, toRestart: nan, poll: o.seen.poll, declared: nan}
	sec := func(a, b time.Time) float64 {
		if a.IsZero() || b.IsZero() {
			return nan
		}
		return b.Sub(a).Seconds()
	}
	first := func(typ string) time.Time {
		for _, e := range o.evs {
			if e.Type == typ && !e.Time.Before(o.killed) {
				return e.Time
			}
		}
		return time.Time{}
	}
	for _, e := range o.evs {
		if e.Type == "done" && e.Time.After(o.killed) {
			s.failure = e.Message
		}
	}
	// Membership may declare the victim dead only after the job runs again.
	for end := o.killed.Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		s.declared = sec(o.killed, firstLog(c, o.survivors, o.killed, func(l logLine) bool {
			return l.Msg == "node failed" && strings.Contains(l.Text, "node="+o.victim+" ")
		}))
		if !math.IsNaN(s.declared) || time.Now().After(end) {
			break
		}
	}
	if !o.running.IsZero() {
		// A coordinator reacts to membership's verdict at its next look: a relaunch
		// that follows it is one more restart the loss cost the job.
		time.Sleep(3 * time.Second)
		if evs, err := c.events(o.query, o.job); err == nil {
			s.again = launchedAgain(evs, o.launch.Time)
		}
	}

	var decided time.Time // a new leader exists, or the coordinator knows the node is lost
	if o.coord {
		elect := firstLog(c, o.survivors, o.killed, func(l logLine) bool {
			return strings.Contains(l.Msg, "heartbeat timeout reached, starting election")
		})
		coordEv := first("coordinator")
		decided, s.endedBy = o.seen.at, "poll"
		if !coordEv.IsZero() && (decided.IsZero() || coordEv.Before(decided)) {
			decided, s.endedBy = coordEv, "event"
		}
		s.detect, s.election = sec(o.killed, elect), sec(elect, decided)
		s.toCoord = sec(decided, coordEv)
	} else {
		decided = first("node-lost")
		s.detect, s.election = sec(o.killed, decided), 0
	}
	s.toRestart = sec(decided, first("restart"))
	if o.launch.Type != "" {
		s.decision = sec(decided, o.launch.Time)
		s.from = "the beginning"
		if m := regexp.MustCompile(`from epoch (\d+)`).FindStringSubmatch(o.launch.Message); m != nil {
			s.from = "epoch " + m[1]
		}
	}
	if !o.running.IsZero() {
		s.relaunch, s.total = sec(o.launch.Time, o.running), sec(o.killed, o.running)
	} else if s.failure == "" {
		s.failure = "not running again 90 s after the kill"
	}
	return s
}

// pickRankHost is a host that runs ranks of job and does not lead the job store,
// preferring one that does not vote; "" if there is none.
func pickRankHost(jobs []job.Job, id string, view []nodepkg.Node, leader string) string {
	role := map[string]string{}
	for _, n := range view {
		role[n.Name] = n.Role
	}
	var cands []string
	for _, j := range jobs {
		if j.ID != id {
			continue
		}
		for h, ranks := range j.Placement {
			if h != leader && len(ranks) > 0 {
				cands = append(cands, h)
			}
		}
	}
	sort.Slice(cands, func(a, b int) bool {
		fa, fb := role[cands[a]] != nodepkg.RoleVoter, role[cands[b]] != nodepkg.RoleVoter
		if fa != fb {
			return fa
		}
		return cands[a] < cands[b]
	})
	if len(cands) == 0 {
		return ""
	}
	return cands[0]
}

// leaderSeen is the first answer of `shoal nodes` naming a new leader: when the
// call returned, and how long it took (the resolution of that time).
type leaderSeen struct {
	at   time.Time
	poll float64
}

// pollers are the survivors that poll for a new leader: those that vote (the
// new leader is one of them, and names itself once elected), or every survivor
// when the view names no voter. At 128 hosts, every survivor running `shoal
// nodes` back to back would be 127 processes forked every few milliseconds on
// the machine whose election is being timed.
func pollers(view []nodepkg.Node, survivors []string) []string {
	alive := map[string]bool{}
	for _, h := range survivors {
		alive[h] = true
	}
	var voters []string
	for _, n := range view {
		if alive[n.Name] && (n.Role == nodepkg.RoleVoter || n.Role == nodepkg.RoleLeader) {
			voters = append(voters, n.Name)
		}
	}
	if len(voters) == 0 {
		return survivors
	}
	sort.Strings(voters)
	return voters
}

// pollLeader runs `shoal nodes --json` over and over in every host of hosts at
// once until one names a leader other than old.
func pollLeader(ctx context.Context, c *cluster, hosts []string, old string) leaderSeen {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan leaderSeen, len(hosts))
	for _, h := range hosts {
		go func() {
			for ctx.Err() == nil {
				start := time.Now()
				nodes, err := c.nodes(h)
				if l := leaderOf(nodes); err == nil && l != "" && l != old {
					found <- leaderSeen{at: time.Now(), poll: time.Since(start).Seconds()}
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	select {
	case s := <-found:
		return s
	case <-ctx.Done():
		return leaderSeen{poll: nan}
	}
}

// waitEvent polls job's events in host until one matches, for up to timeout.
func waitEvent(ctx context.Context, c *cluster, host, job string, timeout time.Duration, match func(job.Event) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		evs, err := c.events(host, job)
		if err == nil {
			for _, e := range evs {
				if match(e) {
					return nil
				}
				if e.Type == "done" {
					return fmt.Errorf("job %s ended before the kill: %s", job, e.Message)
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s: the awaited event did not come in %v (last error: %v)", job, timeout, err)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// waitRunningAgain polls job's events in host after a kill at killed until the
// program runs again or the job ends, for up to timeout. Running again is heat's
// "resumed at step" line, or, after a relaunch from the beginning, rank 0's first
// line; launch is the launch event of that run.
func waitRunningAgain(ctx context.Context, c *cluster, host, id string, killed time.Time, timeout time.Duration) (evs []job.Event, running time.Time, launch job.Event, err error) {
	deadline := time.Now().Add(timeout)
	for {
		evs, err = c.events(host, id)
		if err == nil {
			launch = job.Event{}
			for _, e := range evs {
				if e.Time.Before(killed) {
					continue
				}
				switch {
				case e.Type == "launch":
					launch = e
				case e.Type == "done":
					return evs, time.Time{}, launch, nil
				case e.Type == "output" && launch.Type != "" && strings.HasPrefix(e.Message, "[0] "):
					fresh := !strings.Contains(launch.Message, "from epoch")
					if fresh || strings.Contains(e.Message, "heat: resumed at step") {
						return evs, e.Time, launch, nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, time.Time{}, launch, err
			}
			return evs, time.Time{}, launch, nil
		}
		if !sleep(ctx, 150*time.Millisecond) {
			return nil, time.Time{}, launch, ctx.Err()
		}
	}
}

// firstLog is the time of the first line after t in the agent logs of hosts
// that match, zero if none.
func firstLog(c *cluster, hosts []string, t time.Time, match func(logLine) bool) time.Time {
	var best time.Time
	for _, h := range hosts {
		for _, l := range c.agentLog(h) {
			if l.Time.After(t) && match(l) {
				if best.IsZero() || l.Time.Before(best) {
					best = l.Time
				}
				break
			}
		}
	}
	return best
}

func (s sample) line() string {
	if s.failure != "" {
		return fmt.Sprintf("detect %s, election %s, then the job failed: %s", secs(s.detect), secs(s.election), s.failure)
	}
	l := fmt.Sprintf("detect %s, election %s, decision %s, relaunch %s, total %s (from %s)",
		secs(s.detect), secs(s.election), secs(s.decision), secs(s.relaunch), secs(s.total), s.from)
	for _, why := range s.again {
		l += "; launched again after: " + why
	}
	return l
}

// launchedAgain is, for each launch event in evs after the one at ran, the
// event before it that is not output: what made the coordinator launch once more.
func launchedAgain(evs []job.Event, ran time.Time) []string {
	var again []string
	var last job.Event
	for _, e := range evs {
		switch {
		case e.Type == "output":
		case e.Type == "launch" && e.Time.After(ran):
			again = append(again, fmt.Sprintf("%s %q", last.Type, last.Message))
		default:
			last = e
		}
	}
	return again
}

func secs(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f s", v)
}

// resultSecs is v for a RESULT line: seconds to the hundredth, "nan" when
// not measured.
func resultSecs(v float64) string {
	if math.IsNaN(v) {
		return "nan"
	}
	return fmt.Sprintf("%.2f", v)
}

// median of the values that are not NaN, and how many there were.
func median(vs []float64) (float64, int) {
	var ok []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			ok = append(ok, v)
		}
	}
	if len(ok) == 0 {
		return nan, 0
	}
	slices.Sort(ok)
	m := len(ok) / 2
	if len(ok)%2 == 1 {
		return ok[m], len(ok)
	}
	return (ok[m-1] + ok[m]) / 2, len(ok)
}

// failoverReport prints the medians of each phase for both kinds of loss, the
// total against the target, and the coordinator's loss against the baseline. It
// returns 1 when some job did not run again.
func failoverReport(w *os.File, cfg failoverConfig, n int, samples []sample) int {
	state := float64((n/cfg.nranks+2)*(n+2)*8) / (1 << 20)
	fmt.Fprintf(w, "failover: %d hosts of %d cores, heat on %d ranks, %.1f MB per rank (N=%d), checkpoint every %v,\n",
		cfg.hosts, cfg.cores, cfg.nranks, state, n, cfg.interval)
	fmt.Fprintf(w, "a host killed once epoch 2 is complete; medians of %d runs of each kind, each on a fresh testbed\n\n", cfg.reps)
	type row struct {
		name string
		meds map[string]float64
		n    map[string]int
	}
	keys := []string{"detect", "election", "decision", "relaunch", "total"}
	pick := func(s sample, k string) float64 {
		return map[string]float64{"detect": s.detect, "election": s.election, "decision": s.decision,
			"relaunch": s.relaunch, "total": s.total, "toCoord": s.toCoord, "toRestart": s.toRestart,
			"poll": s.poll, "declared": s.declared, "kill": s.killCmd}[k]
	}
	rows := map[bool]row{}
	for _, coord := range []bool{true, false} {
		r := row{meds: map[string]float64{}, n: map[string]int{}}
		for _, k := range append(keys, "toCoord", "toRestart", "poll", "declared", "kill") {
			var vs []float64
			for _, s := range samples {
				if s.coordinator == coord {
					vs = append(vs, pick(s, k))
				}
			}
			r.meds[k], r.n[k] = median(vs)
		}
		rows[coord] = r
	}
	fmt.Fprintf(w, "%-26s %9s %9s %9s %9s %9s   %s\n", "host killed", "detect", "election", "decision", "relaunch", "total", "ran again")
	for _, coord := range []bool{true, false} {
		r := rows[coord]
		name := "coordinator (Raft leader)"
		if !coord {
			name = "other node (baseline)"
		}
		fmt.Fprintf(w, "%-26s", name)
		for _, k := range keys {
			v := secs(r.meds[k])
			if !coord && k == "election" {
				v = "none"
			}
			fmt.Fprintf(w, " %9s", v)
		}
		fmt.Fprintf(w, "   %d of %d\n", r.n["total"], cfg.reps)
	}
	co, base := rows[true], rows[false]
	verdict := "MISSED"
	if co.meds["total"] < 3 {
		verdict = "ok"
	}
	if co.n["total"] == 0 {
		verdict = "not measured: the job never ran again"
	}
	fmt.Fprintf(w, "\ncoordinator loss -> ranks running again: %s (target under 3 s: %s)\n", secs(co.meds["total"]), verdict)
	if co.n["total"] > 0 && base.n["total"] > 0 {
		fmt.Fprintf(w, "against the baseline (another node's loss, %s): %+.2f s, ratio %.2f (target: the election adds under 1 s)\n",
			secs(base.meds["total"]), co.meds["total"]-base.meds["total"], co.meds["total"]/base.meds["total"])
	}
	restartEv := func(r row) string {
		if r.n["toRestart"] == 0 {
			return "none written"
		}
		return secs(r.meds["toRestart"])
	}
	fmt.Fprintf(w, "decision, coordinator: new leader -> coordinator event %s, -> restart event %s, -> launch %s\n",
		secs(co.meds["toCoord"]), restartEv(co), secs(co.meds["decision"]))
	fmt.Fprintf(w, "decision, other node:  node-lost -> restart event %s, -> launch %s\n", restartEv(base), secs(base.meds["decision"]))
	byPoll, byEvent := 0, 0
	for _, s := range samples {
		switch s.endedBy {
		case "poll":
			byPoll++
		case "event":
			byEvent++
		}
	}
	fmt.Fprintf(w, "election ended by a `shoal nodes` answer in %d runs (calls lasting %s: the resolution), by the coordinator event in %d\n",
		byPoll, secs(co.meds["poll"]), byEvent)
	fmt.Fprintf(w, "membership declared the killed host failed after %s (coordinator) and %s (other node); kill command %s (not counted)\n",
		secs(co.meds["declared"]), secs(base.meds["declared"]), secs(co.meds["kill"]))
	var froms []string
	failed := 0
	for _, s := range samples {
		if s.failure != "" {
			failed++
			continue
		}
		froms = append(froms, fmt.Sprintf("%s:%s", map[bool]string{true: "coord", false: "node"}[s.coordinator], s.from))
	}
	fmt.Fprintf(w, "restarted from: %s\n", strings.Join(froms, ", "))
	again := map[bool]int{}
	for _, s := range samples {
		again[s.coordinator] += len(s.again)
	}
	fmt.Fprintf(w, "launched again after running again (membership's verdict, a rebalance; each a restart more): %d (coordinator), %d (other node)\n",
		again[true], again[false])
	for _, s := range samples {
		if s.failure != "" {
			fmt.Fprintf(w, "job did not run again (%s %s killed): %s\n", kindName(s.coordinator), s.victim, s.failure)
		}
	}
	fmt.Fprintf(w, "load average at the end: %s\n", loadavg())
	fmt.Fprintf(w, "RESULT coordinator_total_s=%s other_total_s=%s election_extra_s=%s\n",
		resultSecs(co.meds["total"]), resultSecs(base.meds["total"]), resultSecs(co.meds["total"]-base.meds["total"]))
	if failed > 0 {
		return 1
	}
	return 0
}

// completeFrom reports whether e says an epoch of at least least is complete.
// An epoch that a newer one completes before is never said complete: at 128
// hosts a run's first epochs were "1 complete" then "5 complete", and a wait
// for "epoch 2 complete" waited in vain.
func completeFrom(e job.Event, least uint64) bool {
	var n uint64
	if e.Type != job.EventEpoch {
		return false
	}
	if _, err := fmt.Sscanf(e.Message, "epoch %d complete", &n); err != nil {
		return false
	}
	return n >= least
}
