package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"shoal/internal/testbed"
)

// tbDelayLine runs one host's delay line until it is killed (by down) or its devices
// fail: up and add start it in its own session for a host with a profile.
func tbDelayLine(c *tbCtx, args []string) int {
	fs := c.flags()
	var cfg testbed.LinkConfig
	fs.IntVar(&cfg.Host, "node", 0, "the host K of nK")
	fs.DurationVar(&cfg.Delay, "delay", 0, "delay of each frame, each direction")
	fs.DurationVar(&cfg.Jitter, "jitter", 0, "the delay spreads uniformly over delay ± jitter")
	fs.Float64Var(&cfg.Loss, "loss", 0, "chance that a frame is dropped, each direction (0 to 1)")
	fs.String("marker", "", "a name for down to find this process by")
	rest, code := c.parse(args, "--node K [--delay D] [--jitter J] [--loss P] [--marker NAME]")
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(c.stderr, "shoal testbed delay-line: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	cfg.Instance = c.instance
	if cfg.Host < 1 || cfg.Host > testbed.MaxNodes || cfg.Delay < 0 || cfg.Jitter < 0 || !(cfg.Loss >= 0 && cfg.Loss <= 1) {
		fmt.Fprintf(c.stderr, "shoal testbed delay-line: want --node 1 to %d, --delay and --jitter ≥ 0, --loss 0 to 1\n", testbed.MaxNodes)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := testbed.RunLink(ctx, cfg); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// tbNoSysVIPC is the step an android host's commands go through: it installs the
// filter that kills a process calling SysV IPC, then executes the command.
func tbNoSysVIPC(c *tbCtx, args []string) int {
	c.flags()
	rest, code := c.parse(args, "[--] COMMAND [ARGS]")
	if code >= 0 {
		return code
	}
	if len(rest) == 0 {
		fmt.Fprintln(c.stderr, "shoal testbed no-sysv-ipc: want a COMMAND")
		return exitUsage
	}
	return c.fail(testbed.ExecNoSysVIPC(rest))
}

// tbPhantomKiller runs an android host's phantom-process killer until down kills it.
func tbPhantomKiller(c *tbCtx, args []string) int {
	fs := c.flags()
	cfg := testbed.PhantomConfig{Every: 200 * time.Millisecond}
	fs.IntVar(&cfg.Host, "node", 0, "the host K of nK")
	fs.IntVar(&cfg.Limit, "limit", testbed.PhantomLimit, "processes the host keeps")
	fs.DurationVar(&cfg.Every, "every", cfg.Every, "how often the host's processes are counted")
	fs.String("marker", "", "a name for down to find this process by")
	rest, code := c.parse(args, "--node K [--limit N] [--every D] [--marker NAME]")
	if code >= 0 {
		return code
	}
	if len(rest) > 0 || cfg.Host < 1 || cfg.Host > testbed.MaxNodes || cfg.Limit < 1 || cfg.Every <= 0 {
		fmt.Fprintf(c.stderr, "shoal testbed phantom-killer: want --node 1 to %d, --limit ≥ 1, --every > 0, and no arguments\n", testbed.MaxNodes)
		return exitUsage
	}
	cfg.Instance = c.instance
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := testbed.RunPhantomKiller(ctx, cfg); err != nil {
		return c.fail(err)
	}
	return exitOK
}
