// Command shoalbench holds the Go parts of Shoal's benches, one subcommand
// each. The scripts under bench/ build and run it (bench/lib.sh,
// bench_shoalbench); their headers, and bench/README.md, say what each
// measures and against what.
//
//	shoalbench failover [flags]   a coordinator's loss against another node's (bench/failover)
//	shoalbench chaos [flags]      long jobs under a seeded random schedule of faults (bench/chaos)
//	shoalbench interval [flags]   --ckpt-interval auto against fixed intervals under churn (bench/interval)
//	shoalbench twoloss [flags]    two hosts killed at once under rs:3+2 against one (bench/two-loss)
//	shoalbench traffic [flags]    what each --redundancy moves between hosts per epoch (bench/parity-traffic)
//	shoalbench compress [flags]   compressing shards between agents, raw against zstd (bench/compress)
//	shoalbench tlscost [flags]    the CPU time of moving bytes over TCP and TLS (bench/tls-cost)
//	shoalbench scrape [flags]     GET /metrics of an agent against GET /v1/nodes (bench/metrics-scrape)
//	shoalbench scalesim [flags]   the cluster simulated to 10,000 nodes in one process (bench/scale-sim)
//
// The fault subcommands need root (the testbed), Open MPI and `make build`.
// Each subcommand that measures ends its report with one `RESULT key=value …`
// line, which the scripts turn into the bench's JSON line (bench/README.md).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// subcommands are shoalbench's subcommands, in the order usage names them.
var subcommands = []struct {
	name string
	main func(args []string) int
}{
	{"failover", failoverMain},
	{"chaos", chaosMain},
	{"interval", intervalMain},
	{"twoloss", twoLossMain},
	{"traffic", trafficMain},
	{"compress", compressMain},
	{"tlscost", tlsCostMain},
	{"scrape", scrapeMain},
	{"scalesim", scaleSimMain},
}

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// run runs the subcommand args names and returns the exit code: 2, with a line
// on stderr, for no subcommand or an unknown one.
func run(args []string, stderr io.Writer) int {
	var names []string
	for _, c := range subcommands {
		names = append(names, c.name)
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: shoalbench %s [flags]\n", strings.Join(names, "|"))
		return 2
	}
	for _, c := range subcommands {
		if c.name == args[0] {
			return c.main(args[1:])
		}
	}
	fmt.Fprintf(stderr, "shoalbench: unknown subcommand %q: want one of %s\n", args[0], strings.Join(names, ", "))
	return 2
}

// built returns the repository's root and bin/shoal, from $SHOAL_ROOT or the
// working directory, once it has checked that `make build` made what is needed.
func built() (root, shoal string, err error) {
	root = os.Getenv("SHOAL_ROOT")
	if root == "" {
		if root, err = os.Getwd(); err != nil {
			return "", "", err
		}
	}
	for _, rel := range []string{"bin/shoal", "build/examples/heat", "build/examples/heat-plain",
		"build/examples/nqueens", "build/examples/nqueens-plain"} {
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			return "", "", fmt.Errorf("%s missing: run 'make build' first", rel)
		}
	}
	if os.Geteuid() != 0 {
		return "", "", fmt.Errorf("needs root: the testbed makes network namespaces")
	}
	return root, filepath.Join(root, "bin/shoal"), nil
}

// interruptible is a context that SIGINT and SIGTERM cancel, so that the
// testbed is removed on the way out.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// loadavg is /proc/loadavg's three averages, "?" when unreadable.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
