package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"shoal/internal/api"
)

func init() {
	register("nodes", command{summary: "list the cluster's nodes and their state", run: nodesCmd})
}

const nodesUsage = `Usage: shoal nodes [flags]

Lists every node the local agent knows: alive and suspect ones, and dead and
departed ones for an hour after they went.

Columns: NAME; ADDRESS (gossip); CORES; SPEED, single-core speed measured at
agent start, relative to the fastest node listed; ARCH; STATE: alive, suspect
(stopped answering probes), dead (declared failed), left (left on purpose),
with "leaving" while a node is about to leave; SINCE, how long it has been in
that state; RANKS, ranks of running jobs on the node, whichever node
coordinates them (each node announces its own count; a change reaches the
others within about a second); ROLE, the node's part in the job store: leader
(coordinates every job), voter, follower (keeps a copy of the jobs without
voting), or - (none). When no node leads, a line after the table says why:
how many voting nodes answer and how many a quorum needs.

Flags:
`

func nodesCmd(args []string, stdout, stderr io.Writer) int {
	var (
		af     localAgentFlags
		asJSON bool
	)
	fs := flag.NewFlagSet("nodes", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&asJSON, "json", false, `print the agent's answer as JSON: {"nodes": [...]}, fields in docs/api.md`)
	af.register(fs)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, nodesUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal nodes: %v (see 'shoal nodes --help')\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shoal nodes: unexpected argument %q (see 'shoal nodes --help')\n", fs.Arg(0))
		return exitUsage
	}
	c, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "shoal nodes: %s\n", errorLine(err))
		return exitFailure
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "shoal nodes: %s\n", errorLine(err))
		return exitFailure
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(api.NodeList{Nodes: nodes})
		return exitOK
	}
	printNodes(stdout, nodes, time.Now())
	if msg := api.Quorum(nodes); msg != "" {
		fmt.Fprintf(stdout, "\nwarning: %s\n", msg)
	}
	return exitOK
}

func printNodes(w io.Writer, nodes []api.Node, now time.Time) {
	var fastest uint64
	for _, n := range nodes {
		fastest = max(fastest, n.Speed)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tCORES\tSPEED\tARCH\tSTATE\tSINCE\tRANKS\tROLE")
	for _, n := range nodes {
		speed := "-"
		if n.Speed > 0 && fastest > 0 {
			speed = strconv.FormatFloat(float64(n.Speed)/float64(fastest), 'f', 2, 64)
		}
		state := n.State
		if n.Leaving && state == "alive" {
			state = "leaving"
		}
		role := n.Role
		if role == "" {
			role = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n",
			n.Name, n.Addr, n.Cores, speed, n.Arch, state, shortDuration(now.Sub(n.Since)), n.Ranks, role)
	}
	tw.Flush()
}

// shortDuration prints d as 45s, 12m or 3h.
func shortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 100*time.Second:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < 100*time.Minute:
		return strconv.Itoa(int(d.Minutes())) + "m"
	}
	return strconv.Itoa(int(d.Hours())) + "h"
}
