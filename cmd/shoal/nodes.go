package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/links"
	"shoal/internal/membership"
	"shoal/internal/node"
)

func init() {
	register("nodes", command{summary: "list the cluster's nodes and their state", run: nodesCmd})
}

const nodesUsage = `Usage: shoal nodes [flags]

Lists every node the local agent knows: alive and suspect ones, and dead and
departed ones for an hour after they went.

Columns: NAME; ADDRESS (gossip); CORES, with "/Q" when a quota gives the ranks
Q CPUs in all (shoal agent --cpus); SPEED, single-core speed measured at
agent start, relative to the fastest node listed; ARCH; STATE: alive, suspect
(stopped answering probes), dead (declared failed), left (left on purpose),
unreachable (its machine answers but its agent refuses connections, so the
agent is gone: shown at once, where membership declares it dead seconds
later), with "leaving" while a node is about to leave; SINCE, how long it has been in
that state; RANKS, ranks of running jobs on the node, whichever node
coordinates them (each node announces its own count; a change reaches the
others within about a second), - for a dead, left or unreachable node, which
runs none;
ROLE, the node's part in the job store: leader (coordinates every job), voter,
follower (a standby: keeps a copy of the jobs without voting, ready to vote),
client (keeps no copy: at most 5 voters and 2 standbys do, and every other node
follows the jobs from one of them), or - (none). A dead,
left or unreachable node keeps its place in the job store until the leader
takes it out, within seconds: its role is shown marked "(gone)" meanwhile (it
counts in the quorum's size and casts no vote), and "-" from then on; a voter
taken out is replaced by a live node. When no node leads, a line after the table says why: how many
voting nodes answer and how many a quorum needs.

With --links, lists instead the links between the live nodes as they measure
them (a small request's round trip, and the bandwidth of a transfer; every
node measures its peers soon after they join and every few minutes): FROM, TO,
RTT, BANDWIDTH in Mbit/s, AGE of the measurement; a pair no node measured is
estimated from the reverse direction or through a third node, marked
"(estimated)". The placement of a job's ranks uses these. CONNECT is what FROM
met when it last opened a new connection to TO's agent (every 30 s): reachable,
refused, timed out or no route, and how long ago; a pair that cannot connect
and was never measured shows - for RTT and BANDWIDTH. After the table, a line
for each direction that cannot connect, with what the other direction does:
"n2 -> n3 timed out 12s ago; n3 -> n2 reachable (one way only)", as behind a
NAT or a firewall. A pair that connects in neither direction is carried by the
overlay through a relay (docs/overlay.md): its AGE says "(via n4)", and its RTT
and BANDWIDTH are the path's (round trips added, the narrower bandwidth), as
the node asked sees it (its own pairs also by its own dials that went
unanswered; "via" in --json).

Flags:
`

func nodesCmd(args []string, stdout, stderr io.Writer) int {
	var (
		af        localAgentFlags
		asJSON    bool
		withLinks bool
	)
	fs := flag.NewFlagSet("nodes", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&asJSON, "json", false, `print the agent's answer as JSON: {"nodes": [...]}, or with --links {"links": [...]}; fields in docs/api.md`)
	fs.BoolVar(&withLinks, "links", false, "list the measured links between the nodes instead")
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
	if withLinks {
		return printLinks(ctx, c, asJSON, stdout, stderr)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "shoal nodes: %s\n", errorLine(err))
		return exitFailure
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(node.List{Nodes: nodes})
		return exitOK
	}
	printNodes(stdout, nodes, time.Now())
	if msg := node.Quorum(nodes); msg != "" {
		fmt.Fprintf(stdout, "\nwarning: %s\n", msg)
	}
	return exitOK
}

func printNodes(w io.Writer, nodes []node.Node, now time.Time) {
	var fastest uint64
	for _, n := range nodes {
		fastest = max(fastest, n.Speed)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tCORES\tSPEED\tARCH\tSTATE\tSINCE\tRANKS\tROLE")
	gone := false
	for _, n := range nodes {
		speed := "-"
		if n.Speed > 0 && fastest > 0 {
			speed = strconv.FormatFloat(float64(n.Speed)/float64(fastest), 'f', 2, 64)
		}
		state := n.State
		if n.Leaving && state == "alive" {
			state = "leaving"
		}
		role := roleWords(n)
		gone = gone || strings.HasSuffix(role, goneMark)
		cores := strconv.Itoa(n.Cores)
		if n.CPUs > 0 && n.CPUs < float64(n.Cores) {
			cores += "/" + strconv.FormatFloat(n.CPUs, 'f', -1, 64)
		}
		ranks := strconv.Itoa(n.Ranks)
		if st, ok := membership.ParseState(n.State); (ok && !st.Member()) || n.State == agent.StateUnreachable {
			ranks = "-" // nothing runs on a node that is gone
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			n.Name, n.Addr, cores, speed, n.Arch, state, shortDuration(now.Sub(n.Since)), ranks, role)
	}
	tw.Flush()
	if gone {
		fmt.Fprintln(w, "\n(gone): the node keeps its place in the job store until the leader takes it out, within seconds; until then it counts in the quorum's size and casts no vote")
	}
}

// goneMark follows the role of a node that is gone but still in the job
// store's configuration.
const goneMark = " (gone)"

// roleWords is a node's ROLE: its part in the job store, "-" for none, marked
// gone when the node is dead, left or unreachable and still in the store's
// configuration: it counts in the quorum's size, and no longer votes or keeps
// a copy.
func roleWords(n node.Node) string {
	if n.Role == "" {
		return "-"
	}
	st, ok := membership.ParseState(n.State)
	if (ok && !st.Member()) || n.State == agent.StateUnreachable {
		return n.Role + goneMark
	}
	return n.Role
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

// writeLinks writes the table of `shoal nodes --links`, and after it a line
// for each direction in which a node could not open a connection to a peer.
func writeLinks(w io.Writer, ls []links.Link, now time.Time) {
	if len(ls) == 0 {
		fmt.Fprintln(w, "no link measured yet (nodes measure their peers a few seconds after they join)")
		return
	}
	ago := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM\tTO\tRTT\tBANDWIDTH\tAGE\tCONNECT")
	for _, x := range ls {
		rtt, bw, age := "-", "-", "-"
		if !x.Unmeasured() {
			rtt = time.Duration(x.RTT).Round(10 * time.Microsecond).String()
			bw = fmt.Sprintf("%.1f Mbit/s", x.Bandwidth*8/1e6)
		}
		if !x.Measured.IsZero() {
			age = ago(x.Measured)
		}
		switch {
		case x.Via != "":
			age += " (via " + x.Via + ")"
		case x.Estimated:
			age += " (estimated)"
		}
		connect := "-"
		if x.Reach != nil {
			connect = x.Reach.Result.String() + " " + ago(x.Reach.Checked) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.From, x.To, rtt, bw, age, connect)
	}
	tw.Flush()
	for _, b := range links.Blocks(links.Matrix(ls, now, math.MaxInt64)) {
		fmt.Fprintln(w, b.Describe(now))
	}
}

// printLinks prints the cluster's links as `shoal nodes --links` does.
func printLinks(ctx context.Context, c *api.Client, asJSON bool, stdout, stderr io.Writer) int {
	l, err := c.Links(ctx, true)
	if err != nil {
		fmt.Fprintf(stderr, "shoal nodes: %s\n", errorLine(err))
		return exitFailure
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(l)
		return exitOK
	}
	writeLinks(stdout, l.Links, time.Now())
	for name, why := range l.Skipped {
		fmt.Fprintf(stderr, "shoal nodes: the links of %s could not be read: %s\n", name, why)
	}
	return exitOK
}
