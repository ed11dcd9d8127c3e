package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/job"
	"shoal/internal/localrun"
	"shoal/internal/retention"
)

func init() {
	register("gc", command{summary: "remove job data the cluster no longer needs, now", run: gcCmd})
}

const gcUsage = `Usage: shoal gc [flags]

Applies the retention policy now, on every live node (or --node NAME): the
policy every agent also applies by itself, at start and as jobs end
(docs/retention.md). A node that is down does it when it comes back.

    checkpoint epochs older than the ones a restart may use     at once
    a job's spares (pruned shards kept to be written over)      at its end
    a succeeded job's checkpoints                               at its end
    a succeeded job's job directories and staged files          1h after (agent --keep-succeeded)
    everything of a failed or cancelled job                     24h after (agent --keep-failed)
    a job run with 'shoal run --keep-for D'                     D after, whatever the outcome
    a job run with 'shoal run --keep'                           never
    data of a job the job store does not know                   never

With --job ID, removes everything of that job now, whatever its grace period or
--keep; refused while the job has not ended. Only this removes the data of a
job the job store does not know (a standalone 'shoal run --local' that wrote
into the agent's data dir).

With no agent running (or with --local), shoal gc applies the same policy, with
its defaults, to the jobs 'shoal run' ran on this machine alone: their
checkpoints ($SHOAL_DATA_DIR/ckpt, else /dev/shm/shoal-UID/ckpt) and run
directories ($SHOAL_DATA_DIR/jobs, else /tmp/shoal-UID/jobs). Each such run
collects the others' data as it starts, too.

Prints one line per item removed: NODE, JOB, WHAT (shards: the job's checkpoint
directory; epoch N; spares: its r*.spare files; job-dir: DATA/jobs/JOB;
coord-dir: DATA/coord/JOB; durable: with --job, the job's epochs in an object
store, removed by the job store's leader with its agent's credentials; file: a
cached job file), SIZE and why. With --dry-run it removes nothing and lists
everything with what would happen to it and why.

Exit codes: 0 done (nodes that are down are listed, not a failure); 1 the
request failed, or a node or an item could not be collected; 2 usage error.

Flags:
`

func gcCmd(args []string, stdout, stderr io.Writer) int {
	var (
		req    api.GCRequest
		asJSON bool
		local  bool
	)
	af, _, code := parseAgentCommand("gc", gcUsage, 0, args, stdout, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&req.DryRun, "dry-run", false, "remove nothing: list what would be removed, and what is kept and why")
		fs.Func("job", "remove everything of this job now, whatever its grace period or --keep (refused while it runs)", func(id string) error {
			if !job.ValidID(id) {
				return errors.New("want 1 to 63 bytes of [A-Za-z0-9._-]")
			}
			req.Job = id
			return nil
		})
		fs.StringVar(&req.Node, "node", "", "collect on this node only (default: every live node)")
		fs.BoolVar(&asJSON, "json", false, `print the agent's answer as JSON: {"nodes": [...]}, fields in docs/api.md`)
		fs.BoolVar(&local, "local", false, "collect the data of the jobs 'shoal run' ran on this machine alone, even when an agent is running (the default when none is)")
	})
	if code >= 0 {
		return code
	}
	var c *api.Client
	if !local {
		var err error
		c, err = af.client()
		named := af.addr != "" || af.dataDir != "" || os.Getenv("SHOAL_AGENT") != ""
		if errors.Is(err, agent.ErrNoAgent) && !named {
			local = true
		} else if err != nil {
			fmt.Fprintf(stderr, "shoal gc: %s\n", errorLine(err))
			return exitFailure
		}
	}
	if local && req.Node != "" {
		fmt.Fprintln(stderr, "shoal gc: --node: names a node of a cluster; the data of runs on this machine alone is collected here")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	collect := c.Collect
	if local {
		collect = collectLocal
	}
	res, err := collect(ctx, req)
	if err != nil {
		fmt.Fprintf(stderr, "shoal gc: %s\n", errorLine(err))
		return exitFailure
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		printGC(stdout, res, req.DryRun)
	}
	code = exitOK
	for _, n := range res.Nodes {
		if n.Error != "" {
			fmt.Fprintf(stderr, "shoal gc: node %s: %s\n", n.Node, n.Error)
			code = exitFailure
		}
		for _, it := range n.Items {
			if it.Error != "" {
				fmt.Fprintf(stderr, "shoal gc: node %s: removing %s: %s\n", n.Node, it.Path, it.Error)
				code = exitFailure
			}
		}
	}
	return code
}

// printGC prints what was removed (with dryRun: everything, and what would
// happen to it), then one line per node that was not asked, and a total.
func printGC(w io.Writer, res api.GCResult, dryRun bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tACTION\tJOB\tWHAT\tSIZE\tWHY")
	var removed, kept int
	var bytes int64
	for _, n := range res.Nodes {
		for _, it := range n.Items {
			action := "removed"
			switch {
			case it.Error != "":
				action = "failed"
			case !it.Removed:
				action = "kept"
				kept++
			case dryRun:
				action = "would remove"
			}
			if it.Removed {
				removed++
				bytes += it.Bytes
			}
			if !it.Removed && !dryRun && it.Error == "" {
				continue
			}
			id, what, size := it.Job, it.What, "-"
			if id == "" {
				id = "-"
			}
			switch {
			case it.What == "epoch":
				what = fmt.Sprintf("epoch %d", it.Epoch)
			case it.SHA256 != "":
				what = "file " + it.SHA256[:min(12, len(it.SHA256))]
			}
			if it.Removed || dryRun {
				size = job.Bytes(it.Bytes)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, action, id, what, size, it.Reason)
		}
	}
	tw.Flush()
	for _, n := range res.Nodes {
		if n.Skipped != "" {
			fmt.Fprintf(w, "node %s not asked: %s\n", n.Node, n.Skipped)
		}
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%s %d items, %s; kept %d", verb, removed, job.Bytes(bytes), kept)
	if !dryRun && kept > 0 {
		fmt.Fprint(w, " ('shoal gc --dry-run' says why)")
	}
	fmt.Fprintln(w)
}

// collectLocal is shoal gc on this machine alone: the retention policy's
// defaults applied to the jobs shoal run ran here without an agent, reported
// as an agent reports its node, as node "local".
func collectLocal(_ context.Context, req api.GCRequest) (api.GCResult, error) {
	ckptRoot, runRoot, err := localDirs()
	if err != nil {
		return api.GCResult{}, err
	}
	store := localrun.Store{CkptRoot: ckptRoot, RunRoot: runRoot}
	removed, err := store.Collect(retention.DefaultPolicy(), time.Now(), req.Job, req.DryRun)
	if err != nil {
		return api.GCResult{}, err
	}
	rep := api.GCReport{Node: "local", Items: []api.GCItem{}}
	for _, r := range removed {
		it := api.GCItem{Job: r.Job, What: string(r.Kind), Epoch: r.Epoch, Path: r.Path, Bytes: r.Bytes, Removed: r.Remove, Reason: r.Reason}
		if r.Err != nil {
			it.Error = r.Err.Error()
		}
		rep.Items = append(rep.Items, it)
	}
	return api.GCResult{Nodes: []api.GCReport{rep}}, nil
}
