package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/internal/job"
)

// twoLossConfig is what one invocation of the two-loss benchmark measures.
type twoLossConfig struct {
	root, shoal string
	instance    int
	reps        int
	hosts       int
	cores       int
	mb          float64
	steps       int
	redundancy  string
}

// lossRun is one trial: victims killed at the same moment, and how the job
// came back.
type lossRun struct {
	victims  []string
	total    float64 // kill -> rank 0 resumed
	staging  float64 // the job's first event after the kill (a node lost) -> the launch: placement, fencing, staging, rebuilds
	relaunch float64 // the launch -> rank 0 resumed
	lost     float64 // the work the restart said was lost: since the epoch it restarted from
	rebuilt  string  // the staging event naming the shards rebuilt from parity, if any
	from     string  // the epoch the job restarted from
	exact    bool    // the job ended with the uninterrupted checksum
	failure  string
}

func twoLossMain(args []string) int {
	cfg := twoLossConfig{hosts: 6, cores: 2, mb: 16, reps: 3, steps: 600, redundancy: "rs:3+2"}
	fs := flag.NewFlagSet("twoloss", flag.ContinueOnError)
	fs.IntVar(&cfg.reps, "reps", cfg.reps, "repetitions of each kind of loss")
	fs.Float64Var(&cfg.mb, "mb", cfg.mb, "protected state per rank in MB")
	fs.IntVar(&cfg.steps, "steps", cfg.steps, "heat's steps: the job must run past the kill and end")
	fs.IntVar(&cfg.hosts, "hosts", cfg.hosts, "testbed hosts, one rank on each")
	fs.StringVar(&cfg.redundancy, "redundancy", cfg.redundancy, "the jobs' --redundancy")
	fs.IntVar(&cfg.instance, "instance", 72, "testbed instance")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.reps < 1 || cfg.hosts < 5 || cfg.mb <= 0 || cfg.steps < 100 {
		fmt.Fprintln(os.Stderr, "twoloss: want --reps ≥ 1, --hosts ≥ 5 (three must survive two losses with a quorum), --mb > 0, --steps ≥ 100")
		return 2
	}
	var err error
	if cfg.root, cfg.shoal, err = built(); err != nil {
		fmt.Fprintln(os.Stderr, "twoloss:", err)
		return 1
	}
	ctx, stop := interruptible()
	defer stop()
	defer down(cfg.instance)

	n := gridSize(cfg.mb, cfg.hosts)
	heatArgs := []string{"--size", strconv.Itoa(n), "--steps", strconv.Itoa(cfg.steps)}
	want, err := reference(cfg.root, cfg.hosts, "checksum", "heat", heatArgs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "twoloss:", err)
		return 1
	}
	runs := map[int][]lossRun{}
	for r := 1; r <= cfg.reps; r++ {
		for _, lose := range []int{1, 2} {
			if ctx.Err() != nil {
				return 1
			}
			run, err := twoLossOnce(ctx, cfg, heatArgs, want, lose)
			if err != nil {
				fmt.Fprintf(os.Stderr, "twoloss: run %d (%d lost): %v\n", r, lose, err)
				return 1
			}
			logf("run %d, %s killed: total %s (staging %s, relaunch %s), from %s (%s of work lost), exact %v %s",
				r, strings.Join(run.victims, " and "), secs(run.total), secs(run.staging), secs(run.relaunch), run.from, secs(run.lost), run.exact, run.failure)
			runs[lose] = append(runs[lose], run)
		}
	}
	return twoLossReport(cfg, n, runs)
}

// twoLossOnce brings up a testbed, runs heat with one rank a host until its
// epoch 2 is complete, kills lose hosts that run ranks (neither the leader
// nor the submitter) at the same moment, and follows the job to its end.
func twoLossOnce(ctx context.Context, cfg twoLossConfig, heatArgs []string, want string, lose int) (lossRun, error) {
	c, err := up(ctx, cfg.instance, cfg.hosts, cfg.cores, cfg.shoal)
	if err != nil {
		return lossRun{}, err
	}
	defer down(cfg.instance)
	var hosts []string
	for i := range cfg.hosts {
		hosts = append(hosts, fmt.Sprintf("n%d", i+1))
	}
	view, err := c.nodes(hosts[0])
	if err != nil {
		return lossRun{}, err
	}
	leader, submitter := leaderOf(view), hosts[0]
	if submitter == leader {
		submitter = hosts[1]
	}
	id, err := c.submit(submitter, append([]string{"-n", strconv.Itoa(cfg.hosts), "--ckpt-interval", "1s",
		"--layout", "cyclic", "--redundancy", cfg.redundancy, "--", cfg.root + "/build/examples/heat"}, heatArgs...)...)
	if err != nil {
		return lossRun{}, err
	}
	if err := waitEvent(ctx, c, submitter, id, 2*time.Minute, func(e job.Event) bool {
		return completeFrom(e, 2)
	}); err != nil {
		evs, _ := c.events(submitter, id)
		for _, e := range evs {
			logf("  %s %s %s", e.Time.Format("15:04:05.000"), e.Type, e.Message)
		}
		return lossRun{}, err
	}
	run := lossRun{total: nan, staging: nan, relaunch: nan, lost: nan}
	for i := len(hosts) - 1; i >= 0 && len(run.victims) < lose; i-- {
		if hosts[i] != leader && hosts[i] != submitter {
			run.victims = append(run.victims, hosts[i])
		}
	}
	slices.Sort(run.victims)
	errs := make(chan error, lose)
	for _, v := range run.victims {
		go func() { _, err := c.bed.Kill(ctx, v); errs <- err }()
	}
	for range lose {
		if err := <-errs; err != nil {
			return lossRun{}, err
		}
	}
	killed := time.Now()
	evs, running, launch, err := waitRunningAgain(ctx, c, submitter, id, killed, 2*time.Minute)
	if err != nil {
		return lossRun{}, err
	}
	if !running.IsZero() {
		run.total = running.Sub(killed).Seconds()
		run.relaunch = running.Sub(launch.Time).Seconds()
		for _, e := range evs {
			if e.Time.After(killed) {
				run.staging = launch.Time.Sub(e.Time).Seconds()
				break
			}
		}
	}
	if i := strings.Index(launch.Message, "from epoch "); i >= 0 {
		run.from = launch.Message[i+len("from "):]
	}
	// The last restart's word on the work lost: two hosts declared one
	// after the other make two.
	for _, e := range evs {
		if e.Time.Before(killed) || e.Time.After(launch.Time) {
			continue
		}
		if m := workLost.FindStringSubmatch(e.Message); m != nil {
			run.lost, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	// The job ends: its result against the uninterrupted run's.
	out, code, err := c.run(submitter, 5*time.Minute, "wait", id)
	if err != nil {
		return run, err
	}
	if code != 0 {
		run.failure = fmt.Sprintf("shoal wait exited %d: %s", code, lastLine(out))
	}
	logs, _, err := c.run(submitter, 30*time.Second, "logs", id)
	if err != nil {
		return run, err
	}
	run.exact = field(logs, "checksum") == want
	if evs, err := c.events(submitter, id); err == nil {
		for _, e := range evs {
			if strings.HasPrefix(e.Message, "rebuilt from parity") {
				run.rebuilt = e.Message
			}
		}
	}
	return run, nil
}

// workLost finds the seconds of work a restart's event says were lost.
var workLost = regexp.MustCompile(`([0-9.]+) s of work lost`)

// twoLossReport prints the medians of both kinds of loss, the extra time two
// cost against one, and whether every job ended exactly. It returns 1 when one
// did not.
func twoLossReport(cfg twoLossConfig, n int, runs map[int][]lossRun) int {
	state := float64((n/cfg.hosts+2)*(n+2)*8) / (1 << 20)
	fmt.Printf("two-loss: %d hosts of %d cores, heat on %d ranks (one a host, --layout cyclic), %.1f MB per rank (N=%d),\n",
		cfg.hosts, cfg.cores, cfg.hosts, state, n)
	fmt.Printf("--redundancy %s, a checkpoint a second; hosts killed once epoch 2 is complete; medians of %d runs, each on a fresh testbed\n\n", cfg.redundancy, cfg.reps)
	fmt.Printf("%-16s %9s %9s %9s %10s   %s\n", "hosts killed", "staging", "relaunch", "total", "work lost", "exact")
	med := map[int]float64{}
	bad := 0
	for _, lose := range []int{1, 2} {
		var total, staging, relaunch, lost []float64
		exact := 0
		for _, r := range runs[lose] {
			total, staging, relaunch, lost = append(total, r.total), append(staging, r.staging), append(relaunch, r.relaunch), append(lost, r.lost)
			if r.exact && r.failure == "" {
				exact++
			}
		}
		bad += len(runs[lose]) - exact
		med[lose], _ = median(total)
		s, _ := median(staging)
		l, _ := median(relaunch)
		w, _ := median(lost)
		fmt.Printf("%-16s %9s %9s %9s %10s   %d of %d\n", map[int]string{1: "one (baseline)", 2: "two at once"}[lose], secs(s), secs(l), secs(med[lose]), secs(w), exact, len(runs[lose]))
	}
	for _, r := range runs[2] {
		if r.rebuilt != "" {
			fmt.Printf("\n%s killed: %s\n", strings.Join(r.victims, ", "), r.rebuilt)
			break
		}
	}
	for _, lose := range []int{1, 2} {
		for _, r := range runs[lose] {
			if r.failure != "" || !r.exact {
				fmt.Printf("not exact (%s killed): %s\n", strings.Join(r.victims, ", "), r.failure)
			}
		}
	}
	fmt.Printf("load average at the end: %s\n", loadavg())
	fmt.Printf("RESULT two_loss_extra_s=%.2f ratio=%.2f exact=%s\n", med[2]-med[1], med[2]/med[1], map[bool]string{true: "all", false: "no"}[bad == 0])
	if bad > 0 {
		return 1
	}
	return 0
}
