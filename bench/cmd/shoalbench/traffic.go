package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// trafficRun is one job of the traffic benchmark: the bytes every host sent
// while it ran, and the epochs it completed.
type trafficRun struct {
	redundancy string
	bytes      int64
	epochs     int
	seconds    float64
	// raw and wire sum the job's "copies sent compressed: RAW MB as WIRE MB"
	// lines: what the copies that crossed compressed weighed before and after.
	raw, wire float64
}

// trafficMain measures what each --redundancy moves between hosts per epoch:
// the same heat job runs once without checkpoints (the halo exchange and the
// agents' own traffic: the baseline) and once per mode, one after the other on
// one testbed; the hosts' eth0 transmit counters are read before and after
// each, and a mode's checkpoint traffic is its bytes less the baseline's.
func trafficMain(args []string) int {
	hosts, cores, mb, steps := 6, 2, 16.0, 900
	modes, interval := "copy,rs:3+2", "3s"
	fs := flag.NewFlagSet("traffic", flag.ContinueOnError)
	fs.IntVar(&hosts, "hosts", hosts, "testbed hosts, one rank on each")
	fs.Float64Var(&mb, "mb", mb, "protected state per rank in MB")
	fs.IntVar(&steps, "steps", steps, "heat's steps")
	fs.StringVar(&modes, "modes", modes, "the --redundancy modes measured, comma-separated (copy first: the others are compared with it)")
	fs.StringVar(&interval, "interval", interval, "the jobs' --ckpt-interval: long enough for an epoch's copies or rows to be made before the next")
	inst := fs.Int("instance", 73, "testbed instance")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	root, shoal, err := built()
	if err != nil {
		fmt.Fprintln(os.Stderr, "traffic:", err)
		return 1
	}
	ctx, stop := interruptible()
	defer stop()
	defer down(*inst)
	c, err := up(ctx, *inst, hosts, cores, shoal)
	if err != nil {
		fmt.Fprintln(os.Stderr, "traffic:", err)
		return 1
	}
	n := gridSize(mb, hosts)
	heat := []string{root + "/build/examples/heat", "--size", strconv.Itoa(n), "--steps", strconv.Itoa(steps)}
	var runs []trafficRun
	for _, mode := range append([]string{""}, strings.Split(modes, ",")...) {
		run, err := trafficOnce(ctx, c, hosts, mode, interval, heat)
		if err != nil {
			fmt.Fprintf(os.Stderr, "traffic: %s: %v\n", orBaseline(mode), err)
			return 1
		}
		logf("%s: %.1f MB sent in %.1f s, %d epochs", orBaseline(mode), float64(run.bytes)/1e6, run.seconds, run.epochs)
		runs = append(runs, run)
	}
	state := float64((n/hosts+2)*(n+2)*8) * float64(hosts)
	fmt.Printf("traffic: %d hosts of %d cores, heat on %d ranks (one a host), %.1f MB of state per epoch (N=%d), a checkpoint every %s\n",
		hosts, cores, hosts, state/1e6, n, interval)
	fmt.Printf("bytes sent by all hosts' eth0 while each job ran, less those of the same job without checkpoints, per complete epoch\n\n")
	fmt.Printf("%-14s %10s %7s %14s %9s %8s\n", "redundancy", "MB sent", "epochs", "MB per epoch", "× state", "× copy")
	base := runs[0]
	fmt.Printf("%-14s %10.1f %7d %14s %9s %8s\n", "none", float64(base.bytes)/1e6, base.epochs, "-", "-", "-")
	per := map[string]float64{}
	var result []string
	for _, r := range runs[1:] {
		per[r.redundancy] = float64(r.bytes-base.bytes) / float64(max(r.epochs, 1))
		vsCopy := "-"
		if c, ok := per["copy"]; ok && c > 0 {
			vsCopy = fmt.Sprintf("%.2f", per[r.redundancy]/c)
		}
		fmt.Printf("%-14s %10.1f %7d %14.1f %9.2f %8s\n", r.redundancy, float64(r.bytes)/1e6, r.epochs, per[r.redundancy]/1e6, per[r.redundancy]/state, vsCopy)
		result = append(result, fmt.Sprintf("state_moved_per_epoch_%s=%.2f", strings.ReplaceAll(r.redundancy, ":", "_"), per[r.redundancy]/state))
	}
	// Shards cross compressed when it pays (copies, and the shards a parity
	// node reads); parity rows cross raw. With the copies' ratio, the model.
	for _, r := range runs[1:] {
		if r.redundancy != "copy" || r.raw <= 0 {
			continue
		}
		ratio := r.wire / r.raw
		fmt.Printf("\ncopies crossed compressed to %.2f of their size (the copy job's own lines)\n", ratio)
		for _, q := range runs[1:] {
			var k, m int
			if _, err := fmt.Sscanf(q.redundancy, "rs:%d+%d", &k, &m); err != nil {
				continue
			}
			fmt.Printf("%s predicts %.2f × state: the group's shards read once, compressed (%.2f), and %d row(s) of 1/%d pushed raw; one node per row reading the shards would move %d × %.2f = %.2f\n",
				q.redundancy, ratio+float64(m-1)/float64(k), ratio, m-1, k, m, ratio, float64(m)*ratio)
		}
	}
	fmt.Printf("\nRESULT %s\n", strings.Join(result, " "))
	return 0
}

func orBaseline(mode string) string {
	if mode == "" {
		return "no checkpoints"
	}
	return mode
}

var (
	epochComplete    = regexp.MustCompile(`^epoch \d+ complete`)
	copiesCompressed = regexp.MustCompile(`copies sent compressed: ([0-9.]+) MB as ([0-9.]+) MB`)
)

// trafficOnce runs heat to its end with --redundancy mode (none: no
// checkpoint in the run's time) and returns what the hosts sent meanwhile.
func trafficOnce(ctx context.Context, c *cluster, hosts int, mode, interval string, heat []string) (trafficRun, error) {
	args := []string{"-n", strconv.Itoa(hosts), "--layout", "cyclic", "--ckpt-interval", interval}
	if mode == "" {
		args[len(args)-1] = "24h"
	} else {
		args = append(args, "--redundancy", mode)
	}
	before, err := txBytes(ctx, c, hosts)
	if err != nil {
		return trafficRun{}, err
	}
	start := time.Now()
	out, code, err := c.run("n1", 10*time.Minute, append(append([]string{"run"}, args...), append([]string{"--"}, heat...)...)...)
	if err != nil {
		return trafficRun{}, err
	}
	if code != 0 {
		return trafficRun{}, fmt.Errorf("shoal run exited %d: %s", code, lastLine(out))
	}
	run := trafficRun{redundancy: mode, seconds: time.Since(start).Seconds()}
	after, err := txBytes(ctx, c, hosts)
	if err != nil {
		return trafficRun{}, err
	}
	run.bytes = after - before
	for _, line := range strings.Split(out, "\n") {
		m := strings.TrimPrefix(line, "shoal: ")
		if m == line || !epochComplete.MatchString(m) {
			continue
		}
		run.epochs++
		if c := copiesCompressed.FindStringSubmatch(m); c != nil {
			raw, _ := strconv.ParseFloat(c[1], 64)
			wire, _ := strconv.ParseFloat(c[2], 64)
			run.raw, run.wire = run.raw+raw, run.wire+wire
		}
	}
	return run, nil
}

// txBytes is the sum of the hosts' eth0 transmit counters, read from each
// host's /proc/net/dev (its network namespace's; /sys/class/net would be the
// machine's, the hosts share its mount namespace).
func txBytes(ctx context.Context, c *cluster, hosts int) (int64, error) {
	var sum int64
	for i := 1; i <= hosts; i++ {
		cmd, err := c.bed.Command(ctx, fmt.Sprintf("n%d", i), "cat", "/proc/net/dev")
		if err != nil {
			return 0, err
		}
		out, err := cmd.Output()
		if err != nil {
			return 0, fmt.Errorf("reading n%d's /proc/net/dev: %w", i, err)
		}
		v, err := ethTx(string(out))
		if err != nil {
			return 0, fmt.Errorf("n%d: %w", i, err)
		}
		sum += v
	}
	return sum, nil
}

// ethTx returns eth0's transmitted bytes from the text of /proc/net/dev: the
// ninth number after "eth0:".
func ethTx(dev string) (int64, error) {
	for _, line := range strings.Split(dev, "\n") {
		name, counters, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != "eth0" {
			continue
		}
		f := strings.Fields(counters)
		if len(f) < 9 {
			break
		}
		return strconv.ParseInt(f[8], 10, 64)
	}
	return 0, fmt.Errorf("no eth0 counters in /proc/net/dev")
}
