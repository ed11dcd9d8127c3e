package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

func init() {
	register("leave", command{summary: "make this node leave the cluster gracefully", run: leaveCmd})
}

const leaveUsage = `Usage: shoal leave [flags]

Tells the local agent to leave the cluster: its jobs checkpoint first, then the
other nodes are told, and show this node as "left" (not "dead"); then the agent
stops. Returns once the node has left.

Flags:
`

func leaveCmd(args []string, stdout, stderr io.Writer) int {
	var (
		af      localAgentFlags
		timeout time.Duration
	)
	fs := flag.NewFlagSet("leave", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.DurationVar(&timeout, "timeout", 0, "give up after this long, checkpointing included (default: the agent's, 2m)")
	af.register(fs)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, leaveUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal leave: %v (see 'shoal leave --help')\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shoal leave: unexpected argument %q (see 'shoal leave --help')\n", fs.Arg(0))
		return exitUsage
	}
	if timeout < 0 {
		fmt.Fprintf(stderr, "shoal leave: --timeout %v: must not be negative\n", timeout)
		return exitUsage
	}
	c, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "shoal leave: %s\n", errorLine(err))
		return exitFailure
	}
	wait := 3 * time.Minute
	if timeout > 0 {
		wait = timeout + 10*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := c.Leave(ctx, timeout)
	if err != nil {
		fmt.Fprintf(stderr, "shoal leave: %s\n", errorLine(err))
		return exitFailure
	}
	fmt.Fprintf(stdout, "node %s left the cluster\n", resp.Name)
	return exitOK
}
