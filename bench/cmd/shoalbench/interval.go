package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/internal/job"
)

// intervalConfig is one invocation of the interval benchmark.
type intervalConfig struct {
	root, shoal string
	instance    int
	seed        uint64
	hosts       int
	cores       int
	nranks      int
	size, steps int
	mtbfs       []time.Duration // the cluster's mean time between kills, one testbed each
	policies    []string        // --ckpt-interval values; auto last
	restartIn   time.Duration   // a killed host's agent starts again this long after
	reps        int             // runs of each cell, and of the baseline on each testbed
}

// settleIn is how long after a killed host is started again the next kill
// may come.
const settleIn = 3 * time.Second

// intervalRun is one job under one policy and one schedule of kills.
type intervalRun struct {
	mtbf     time.Duration
	policy   string
	wall     float64 // submission to the end, seconds
	restarts int
	epochs   uint64
	kills    int
	chosen   string // the interval in use at the end, as shoal jobs says
	err      string
}

func intervalMain(args []string) int {
	cfg := intervalConfig{hosts: 4, cores: 2, nranks: 4, size: 1200, steps: 12000, restartIn: 3 * time.Second, reps: 3}
	fs := flag.NewFlagSet("interval", flag.ContinueOnError)
	fs.IntVar(&cfg.instance, "instance", 74, "testbed instance")
	fs.Uint64Var(&cfg.seed, "seed", uint64(time.Now().UnixNano()%1e6), "seed of the kill schedules")
	fs.IntVar(&cfg.hosts, "hosts", cfg.hosts, "testbed hosts")
	fs.IntVar(&cfg.size, "size", cfg.size, "heat's --size")
	fs.IntVar(&cfg.steps, "steps", cfg.steps, "heat's --steps")
	fs.IntVar(&cfg.reps, "reps", cfg.reps, "runs of each policy and of the baseline per MTBF (medians are compared)")
	mtbfs := fs.String("mtbf", "15s,45s", "the cluster's mean times between kills, comma-separated")
	policies := fs.String("policies", "2s,10s,60s,auto", "the --ckpt-interval values compared")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, s := range strings.Split(*mtbfs, ",") {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "interval: --mtbf %q: want positive durations\n", s)
			return 2
		}
		cfg.mtbfs = append(cfg.mtbfs, d)
	}
	cfg.policies = strings.Split(*policies, ",")
	var err error
	if cfg.root, cfg.shoal, err = built(); err != nil {
		fmt.Fprintf(os.Stderr, "interval: %v\n", err)
		return 1
	}
	ctx, stop := interruptible()
	defer stop()
	fmt.Printf("seed %d; %d hosts of %d cores, heat --size %d --steps %d on %d ranks; load %s\n",
		cfg.seed, cfg.hosts, cfg.cores, cfg.size, cfg.steps, cfg.nranks, loadavg())

	var runs []intervalRun
	bases := map[time.Duration]float64{}
	for _, m := range cfg.mtbfs {
		c, err := up(ctx, cfg.instance, cfg.hosts, cfg.cores, cfg.shoal)
		if err != nil {
			fmt.Fprintf(os.Stderr, "interval: %v\n", err)
			down(cfg.instance)
			return 1
		}
		// One schedule per MTBF, the same for every run: kills at exponential
		// gaps, each of a host drawn among those that do not coordinate.
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(m)))
		var schedule []time.Duration
		for at := time.Duration(0); at < 20*time.Minute; {
			at += time.Duration(rng.ExpFloat64() * float64(m))
			schedule = append(schedule, at)
		}
		// Rounds of every policy in turn, after a run without faults or
		// checkpoints (the baseline), so that the machine's drifts of speed
		// fall on all alike.
		var walls []float64
		for rep := 0; rep < cfg.reps; rep++ {
			r := intervalOnce(ctx, cfg, c, "0", nil)
			if r.err != "" {
				fmt.Fprintf(os.Stderr, "interval: the run without faults: %s\n", r.err)
				down(cfg.instance)
				return 1
			}
			walls = append(walls, r.wall)
			fmt.Printf("mtbf %-5v  without faults or checkpoints   wall %6.1f s\n", m, r.wall)
			for _, p := range cfg.policies {
				r := intervalOnce(ctx, cfg, c, p, schedule)
				r.mtbf = m
				runs = append(runs, r)
				printIntervalRun(r)
			}
		}
		bases[m], _ = median(walls)
		if err := down(cfg.instance); err != nil {
			fmt.Fprintf(os.Stderr, "interval: testbed down: %v\n", err)
		}
	}
	return reportIntervals(runs, bases, cfg.policies)
}

// intervalOnce runs heat from n1 with --ckpt-interval policy while killing a
// host other than n1 at each time of schedule (from the submission), each
// started again restartIn later, and returns how it went.
func intervalOnce(ctx context.Context, cfg intervalConfig, c *cluster, policy string, schedule []time.Duration) intervalRun {
	r := intervalRun{policy: policy}
	start := time.Now()
	id, err := c.submit("n1", "-n", strconv.Itoa(cfg.nranks), "--ckpt-interval", policy, "--max-restarts", "100",
		"--max-oversubscribe", "2", "--", filepath.Join(cfg.root, "build/examples/heat"),
		"--size", strconv.Itoa(cfg.size), "--steps", strconv.Itoa(cfg.steps))
	if err != nil {
		r.err = err.Error()
		return r
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var kills int
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(uint64(len(schedule)), 7))
		for _, at := range schedule {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(at))):
			}
			// One host down at a time, as a single failure rate means: a kill
			// due while the last victim is still down waits for its return
			// (two at once may take both copies of a shard, which is the
			// two-loss case, not this benchmark's).
			host := fmt.Sprintf("n%d", 2+rng.IntN(cfg.hosts-1))
			if _, err := c.bed.Kill(ctx, host); err != nil {
				continue
			}
			kills++
			time.Sleep(cfg.restartIn)
			c.bed.StartAgent(context.Background(), host)
			time.Sleep(settleIn) // its shards count again, the lost copies are made again

		}
	}()
	var j job.Job
	for {
		if !sleep(ctx, 250*time.Millisecond) {
			r.err = "interrupted"
			break
		}
		jobs, err := c.jobs("n1")
		if err != nil {
			continue
		}
		i := slices.IndexFunc(jobs, func(x job.Job) bool { return x.ID == id })
		if i >= 0 && !jobs[i].Ended.IsZero() {
			j = jobs[i]
			break
		}
		if time.Since(start) > 20*time.Minute {
			r.err = "no end after 20 minutes"
			break
		}
	}
	r.wall = time.Since(start).Seconds()
	close(done)
	wg.Wait()
	time.Sleep(time.Second) // the last restarted host has joined before the next run
	r.kills, r.restarts, r.epochs = kills, j.Restarts, j.Epoch
	if j.State != job.Succeeded && r.err == "" {
		r.err = fmt.Sprintf("%s: %s", j.State, j.Reason)
	}
	if j.Interval != nil {
		r.chosen = time.Duration(j.Interval.Every).Round(100 * time.Millisecond).String()
	}
	return r
}

func printIntervalRun(r intervalRun) {
	what := fmt.Sprintf("wall %6.1f s  kills %2d  restarts %2d  epochs %3d", r.wall, r.kills, r.restarts, r.epochs)
	if r.chosen != "" && r.policy == "auto" {
		what += "  auto chose " + r.chosen
	}
	if r.err != "" {
		what += "  FAILED: " + r.err
	}
	fmt.Printf("mtbf %-5v  --ckpt-interval %-5s            %s\n", r.mtbf, r.policy, what)
}

// reportIntervals prints, for each MTBF, each policy's median waste (its wall
// time beyond the median run without faults or checkpoints on that testbed:
// checkpoints, lost work, recoveries), auto's against the best fixed
// interval's, and the RESULT line. A policy with a failed run has no median.
func reportIntervals(runs []intervalRun, bases map[time.Duration]float64, policies []string) int {
	var ratios []string
	worst := 0.0
	for _, m := range uniqueMTBFs(runs) {
		base := bases[m]
		waste := map[string]float64{}
		for _, p := range policies {
			var walls []float64
			failed := false
			for _, r := range runs {
				if r.mtbf == m && r.policy == p {
					walls = append(walls, r.wall)
					failed = failed || r.err != ""
				}
			}
			w, _ := median(walls)
			if failed {
				w = math.NaN()
			}
			waste[p] = w - base
			fmt.Printf("mtbf %v: --ckpt-interval %-5s median wall %6.1f s, waste %6.1f s over %.1f s\n", m, p, w, w-base, base)
		}
		best, bestPolicy := math.Inf(1), ""
		for _, p := range policies {
			if p != "auto" && waste[p] < best {
				best, bestPolicy = waste[p], p
			}
		}
		auto := waste["auto"]
		ratio := auto / best
		fmt.Printf("mtbf %v: auto wasted %.1f s, the best fixed interval (%s) %.1f s: %.2f of its waste, %.3f of its total time\n",
			m, auto, bestPolicy, best, ratio, (base+auto)/(base+best))
		ratios = append(ratios, fmt.Sprintf("auto_vs_best_%s=%.2f", m, ratio))
		if math.IsNaN(ratio) || ratio > worst {
			worst = ratio
		}
	}
	fmt.Printf("RESULT %s worst=%.2f\n", strings.Join(ratios, " "), worst)
	return 0
}

func uniqueMTBFs(runs []intervalRun) []time.Duration {
	var out []time.Duration
	for _, r := range runs {
		if !slices.Contains(out, r.mtbf) {
			out = append(out, r.mtbf)
		}
	}
	return out
}
