// Command faultbench takes nodes away from Shoal jobs on a testbed, on purpose.
// bench/failover and bench/chaos build and run it; their headers say what each
// subcommand measures.
//
//	faultbench failover [flags]   time a coordinator's loss against another node's
//	faultbench chaos [flags]      long jobs under a seeded random schedule of faults
//	faultbench interval [flags]   --ckpt-interval auto against fixed intervals under churn
//	faultbench twoloss [flags]    two hosts killed at once under rs:3+2 against one
//	faultbench traffic [flags]    what each --redundancy moves between hosts per epoch
//
// It needs root (the testbed), Open MPI and `make build`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: faultbench failover|chaos|interval|twoloss|traffic [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "failover":
		os.Exit(failoverMain(os.Args[2:]))
	case "chaos":
		os.Exit(chaosMain(os.Args[2:]))
	case "interval":
		os.Exit(intervalMain(os.Args[2:]))
	case "twoloss":
		os.Exit(twoLossMain(os.Args[2:]))
	case "traffic":
		os.Exit(trafficMain(os.Args[2:]))
	}
	fmt.Fprintf(os.Stderr, "faultbench: unknown subcommand %q: want failover, chaos, interval, twoloss or traffic\n", os.Args[1])
	os.Exit(2)
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
