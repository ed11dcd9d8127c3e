package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"shoal/internal/api"
	"shoal/internal/node"
)

func init() {
	register("recover-quorum", command{summary: "make this node the only voter of a cluster that lost its voters for good", run: recoverQuorumCmd})
}

// voters asks the agent how the job store's voters stand (reading the voters
// alone: the whole list checks every node's reach, and this look comes every
// second while a job is followed); ok is false when the agent could not say.
func voters(ctx context.Context, c *api.Client) (v node.Voters, ok bool) {
	nodes, err := c.Voters(ctx)
	if err != nil {
		return node.Voters{}, false
	}
	return node.QuorumOf(nodes), true
}

// noQuorum is the line saying that the cluster the agent is part of has no
// quorum (node.Voters.NoQuorum), or "" when it has one or the agent cannot say.
func noQuorum(ctx context.Context, c *api.Client) string {
	v, _ := voters(ctx, c)
	return v.NoQuorum()
}

// warnNoQuorum warns, above a list of jobs, that the cluster has no quorum:
// the list may be stale, and its jobs are frozen.
func warnNoQuorum(ctx context.Context, c *api.Client, w io.Writer) {
	if msg := noQuorum(ctx, c); msg != "" {
		fmt.Fprintf(w, "warning: %s; the states below are the last this node knows, and none changes meanwhile\n", msg)
	}
}

// quorumChange is what a command following job id says when the quorum
// changes: a line when it is lost, one when a leader is back; lost is the state
// to compare the next look with. It is pure: watchQuorum does the looking.
func quorumChange(cmd, id string, wasLost bool, v node.Voters) (line string, lost bool) {
	switch {
	case !wasLost && v.Lost():
		return fmt.Sprintf("shoal %s: job %s waits: %s", cmd, id, v.NoQuorum()), true
	case wasLost && !v.Lost() && v.Leader != "":
		return fmt.Sprintf("shoal %s: the cluster has a quorum again (%s leads); job %s goes on", cmd, v.Leader, id), false
	}
	return "", wasLost
}

// quorumEvery is how often a command following a job looks at the quorum.
const quorumEvery = time.Second

// watchQuorum prints to w, while a command follows job id, a line when the
// cluster loses its quorum and one when it has one again, until stop is
// called: with no quorum the job's events stop without a word. A job that
// ends within a look of the quorum's return gets the line at stop, before the
// line of its end.
func watchQuorum(c *api.Client, cmd, id string, w io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	stopping := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(quorumEvery)
		defer tick.Stop()
		lost := false
		look := func(ctx context.Context) {
			if v, ok := voters(ctx, c); ok {
				var line string
				if line, lost = quorumChange(cmd, id, lost, v); line != "" {
					fmt.Fprintln(w, line)
				}
			}
		}
		for {
			look(ctx)
			select {
			case <-stopping:
				if lost {
					lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Second)
					look(lctx)
					lcancel()
				}
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(stopping); cancel(); <-done }
}

const recoverQuorumUsage = `Usage: shoal recover-quorum [--yes] [flags]

For a cluster whose job store lost a majority of its voters for good (their
machines are gone): makes this node the only voter of a new job store
configuration, from its own copy of the jobs, and returns once it leads. The
other live nodes then join it as they join any cluster: they follow its copy,
and the longest-up become voters. Unfinished jobs go on from their newest
complete epoch, as after any change of leader.

While a quorum remains (a majority of the voters alive, or a leader known),
it refuses: there is nothing to recover. Without --yes it says what it would
do and what it costs, and does nothing.

What it costs (docs/recovery.md):
  - what the lost voters had committed and this node had not yet received is
    lost: a job's last events, a job submitted at the last moment;
  - run on two sides of a partition, it makes two clusters that each run the
    same jobs: run it on one node, and only when the lost voters are gone for
    good, not merely cut off;
  - a lost voter that comes back still holds the old configuration, in which
    it could elect a leader with another lost voter: start its agent with
    --join a live node, and it sets its old copy aside (DATA-DIR/raft.stale-*)
    and joins as a new node; otherwise remove DATA-DIR/raft on it first.

Exit codes:
  0    this node leads the new configuration
  1    refused (the cluster has a quorum), or the recovery failed
  2    usage error, or --yes not given

Flags:
`

func recoverQuorumCmd(args []string, stdout, stderr io.Writer) int {
	var (
		af  localAgentFlags
		yes bool
	)
	fs := flag.NewFlagSet("recover-quorum", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&yes, "yes", false, "do it: force the new configuration")
	af.register(fs)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, recoverQuorumUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal recover-quorum: %v (see 'shoal recover-quorum --help')\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shoal recover-quorum: unexpected argument %q (see 'shoal recover-quorum --help')\n", fs.Arg(0))
		return exitUsage
	}
	c, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "shoal recover-quorum: %s\n", errorLine(err))
		return exitFailure
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "shoal recover-quorum: %s\n", errorLine(err))
		return exitFailure
	}
	v, self := node.QuorumOf(nodes), ""
	for _, n := range nodes {
		if n.Local {
			self = n.Name
		}
	}
	if msg := recoverRefusal(v); msg != "" {
		fmt.Fprintf(stderr, "shoal recover-quorum: %s\n", msg)
		return exitFailure
	}
	if !yes {
		fmt.Fprint(stderr, recoverPlan(v, self))
		return exitUsage
	}
	resp, err := c.RecoverQuorum(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "shoal recover-quorum: %s\n", errorLine(err))
		return exitFailure
	}
	fmt.Fprintf(stdout, "node %s leads the job store alone; the other live nodes join it. Start %s again only with --join a live node (docs/recovery.md)\n",
		resp.Name, downNames(resp.Lost))
	return exitOK
}

// recoverRefusal says why a recovery is refused, or "" when the cluster has
// lost its quorum.
func recoverRefusal(v node.Voters) string {
	switch {
	case len(v.Nodes) == 0:
		return "the local agent knows no voter of the job store: nothing to recover"
	case !v.Lost() && v.Leader != "":
		return fmt.Sprintf("the cluster has a quorum (%s; %s leads): nothing to recover", v, v.Leader)
	case !v.Lost():
		return fmt.Sprintf("the cluster has a quorum (%s), electing a leader: nothing to recover", v)
	}
	return ""
}

// recoverPlan says what recover-quorum --yes would do on node self, and what
// it costs.
func recoverPlan(v node.Voters, self string) string {
	lost := downNames(v.Down())
	return fmt.Sprintf(`shoal recover-quorum: %s.
This makes %s the only voter of a new job store configuration, from its copy
of the jobs; the other live nodes join it. What it costs:
  - what %s had committed and %s had not received yet is lost;
  - on two sides of a partition it makes two clusters: run it on one node,
    and only if %s are gone for good;
  - start %s again only with --join a live node (they then set their old
    copies aside), or after removing DATA-DIR/raft on each.
Run it again with --yes to do it.
`, "the cluster has no quorum: "+v.String(), self, lost, self, lost, lost)
}

// downNames is the names in an node.Voters.Down list: "n1 dead, n3 suspect"
// gives "n1, n3".
func downNames(down string) string {
	var names []string
	for _, d := range strings.Split(down, ", ") {
		if name, _, _ := strings.Cut(d, " "); name != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "the lost voters"
	}
	return strings.Join(names, ", ")
}
