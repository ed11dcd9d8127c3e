package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/membership"
	"shoal/internal/retention"
	"shoal/internal/userdir"
)

// Directories of job data in the data dir besides CkptDir and JobsDir, as the
// coordinator writes them.
const (
	CoordDir   = "coord"   // a coordinator's launch files and manifest, per job
	FilesDir   = "files"   // the content-addressed cache of job files
	ResultsDir = "results" // task farm results, per job
)

// DefaultGCInterval is Config.GCInterval's default. The agent also collects at
// start, soon after the job store changes and when a grace period ends, so the
// interval only bounds how late anything else is noticed.
const DefaultGCInterval = 10 * time.Minute

// gcSettle is how long the collector lets the job store settle after a change
// before it looks whether the change matters: rank output arrives every 100 ms
// while jobs run.
const gcSettle = 2 * time.Second

// collector applies the retention policy to this node's job data: in a loop,
// and on request (POST /v1/gc). One collection runs at a time.
type collector struct {
	a      *Agent
	policy retention.Policy
	every  time.Duration
	cache  files.Cache

	mu sync.Mutex
	// durable is the loop's own (see durablePass).
	durable durableRetention
}

var _ api.GCService = (*collector)(nil)

// startGC checks the retention settings, serves POST /v1/gc and starts the
// collection loop, whose first pass runs at once: a node that was down when
// jobs ended cleans up when it comes back.
func (a *Agent) startGC() error {
	p := retention.DefaultPolicy()
	if a.cfg.Retention != nil {
		p = *a.cfg.Retention
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	every := a.cfg.GCInterval
	if every < 0 {
		return fmt.Errorf("%w: gc interval %v: must not be negative", ErrConfig, every)
	}
	if every == 0 {
		every = DefaultGCInterval
	}
	c := &collector{a: a, policy: p, every: every, cache: files.Cache{Dir: filepath.Join(a.cfg.DataDir, FilesDir)}}
	a.server.SetGCService(c)
	go c.loop()
	return nil
}

// loop collects at once, then whenever a grace period ends, the job store
// changes in a way that matters (a job ended, an epoch completed), or the
// interval passes, until the agent stops.
func (c *collector) loop() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		changed := c.a.store.Changed()
		seen := c.storeDigest()
		next := c.pass()
		wait := c.every
		if !next.IsZero() {
			// A little after: the plan is made with a clock read later than now.
			wait = min(wait, time.Until(next)+100*time.Millisecond)
		}
		timer.Reset(max(wait, 0))
	waiting:
		for {
			select {
			case <-c.a.quit:
				return
			case <-timer.C:
				break waiting
			case <-changed:
				select {
				case <-c.a.quit:
					return
				case <-time.After(gcSettle):
				}
				changed = c.a.store.Changed()
				if c.storeDigest() != seen {
					timer.Stop() // since Go 1.23, no stale tick follows
					break waiting
				}
			}
		}
	}
}

// storeDigest sums up what of the job store the decisions depend on: which
// jobs exist, their states, ends, newest complete epochs and Keep.
func (c *collector) storeDigest() string {
	var b strings.Builder
	for _, j := range c.a.store.Jobs() {
		fmt.Fprintf(&b, "%s %s %d %d %d\n", j.ID, j.State, j.Ended.UnixNano(), j.Epoch, j.Spec.Keep)
	}
	return b.String()
}

// pass collects under the policy and returns when something kept now may go.
func (c *collector) pass() time.Time {
	rep, next, err := c.collectHere(api.GCRequest{})
	if d := c.durablePass(time.Now()); !d.IsZero() && (next.IsZero() || d.Before(next)) {
		next = d
	}
	if err != nil {
		c.a.log.Warn("collecting job data", "err", err)
		return next
	}
	var n int
	var bytes int64
	for _, it := range rep.Items {
		if it.Removed {
			n++
			bytes += it.Bytes
		}
	}
	if n > 0 {
		c.a.log.Info("collected job data", "items", n, "bytes", bytes)
	}
	return next
}

// Collect serves POST /v1/gc: on this node, on the node named, or on every
// live node. A job that has not ended is refused before any node is asked.
func (c *collector) Collect(ctx context.Context, req api.GCRequest) (api.GCResult, error) {
	self := c.a.Name()
	if req.Job != "" {
		if j, _, err := c.a.store.Job(req.Job); err == nil && !(job.Terminal(j.State) && !j.Ended.IsZero()) {
			return api.GCResult{}, fmt.Errorf("%w: job %s is %s: its data goes once it has ended", errkind.Conflict, req.Job, j.State)
		}
	}
	if req.Node == self {
		rep, _, err := c.collectHere(req)
		if err != nil {
			return api.GCResult{}, err
		}
		return api.GCResult{Nodes: []api.GCReport{rep}}, nil
	}
	var targets []membership.Node
	for _, n := range c.a.members.Nodes() {
		if req.Node == "" || n.Name == req.Node {
			targets = append(targets, n)
		}
	}
	if req.Node != "" && len(targets) == 0 {
		return api.GCResult{}, fmt.Errorf("%w: node %q: not a member of the cluster", errkind.NotFound, req.Node)
	}
	reports := make([]api.GCReport, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		reports[i] = api.GCReport{Node: n.Name, Items: []api.GCItem{}}
		switch {
		case n.Local:
		case n.State == membership.StateLeft:
			reports[i].Skipped = "left the cluster"
			continue
		case n.State == membership.StateDead:
			reports[i].Skipped = "down: it collects by itself when it comes back"
			continue
		case n.Meta.API == "":
			reports[i].Skipped = "announces no API address yet"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n.Local {
				rep, _, err := c.collectHere(req)
				if err != nil {
					rep.Error = err.Error()
				}
				reports[i] = rep
				return
			}
			fwd := req
			fwd.Node = n.Name
			res, err := c.a.peers.Get(n.Meta.API).Collect(ctx, fwd)
			switch {
			case err != nil:
				reports[i].Error = err.Error()
			case len(res.Nodes) != 1:
				reports[i].Error = fmt.Sprintf("answered with %d reports, want 1", len(res.Nodes))
			default:
				reports[i] = res.Nodes[0]
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(reports, func(a, b api.GCReport) int { return strings.Compare(a.Node, b.Node) })
	return api.GCResult{Nodes: reports}, nil
}

// collectHere applies the policy (or, with req.Job, removes that job's data)
// on this node, and returns the report and when something kept may go next.
func (c *collector) collectHere(req api.GCRequest) (api.GCReport, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rep := api.GCReport{Node: c.a.Name(), Items: []api.GCItem{}}
	node, err := c.scan()
	if err != nil {
		return rep, time.Time{}, err
	}
	jobs := c.jobs(node)
	now := time.Now()
	var plan retention.Plan
	if req.Job != "" {
		if plan, err = retention.Drop(c.policy, now, jobs, node, req.Job); err != nil {
			return rep, time.Time{}, fmt.Errorf("%w: %v", errkind.Conflict, err)
		}
	} else {
		plan = retention.Decide(c.policy, now, jobs, node)
	}
	for _, it := range plan.Items {
		gi := api.GCItem{Job: it.Job, What: string(it.Kind), Epoch: it.Epoch, SHA256: it.Sum,
			Path: c.path(it), Removed: it.Remove, Reason: it.Reason}
		if it.Remove || req.DryRun {
			gi.Bytes = c.usage(it)
		}
		if it.Remove && !req.DryRun {
			if err := c.remove(it); err != nil {
				gi.Removed, gi.Error = false, err.Error()
				c.a.log.Warn("could not remove job data", "job", it.Job, "what", it.Kind, "path", gi.Path, "err", err)
			} else {
				attrs := []any{"what", it.Kind}
				if it.Job != "" {
					attrs = append(attrs, "job", it.Job)
				}
				if it.Kind == retention.KindEpoch {
					attrs = append(attrs, "epoch", it.Epoch)
				}
				if it.Sum != "" {
					attrs = append(attrs, "sha256", it.Sum)
				}
				c.a.log.Info("removed job data", append(attrs, "bytes", gi.Bytes, "reason", it.Reason)...)
			}
		}
		rep.Items = append(rep.Items, gi)
	}
	if req.Job != "" {
		if it, ok := c.dropDurable(req.Job, req.DryRun); ok {
			rep.Items = append(rep.Items, it)
		}
	}
	return rep, plan.Next, nil
}

// scan lists the job data this node holds.
func (c *collector) scan() (retention.Node, error) {
	node := retention.Node{Jobs: map[string]retention.Held{}}
	ckptJobs, err := c.a.shards.Jobs()
	if err != nil {
		return node, fmt.Errorf("list %s: %w", c.a.shards.Dir, err)
	}
	for _, id := range ckptJobs {
		jd := jobdir.Dir{Root: c.a.shards.Dir, Job: id}
		epochs, err := jd.Epochs()
		if err != nil {
			return node, fmt.Errorf("list the epochs of job %s: %w", id, err)
		}
		spares, err := jd.Spares()
		if err != nil {
			return node, fmt.Errorf("list the spares of job %s: %w", id, err)
		}
		node.Jobs[id] = retention.Held{Shards: true, Epochs: epochs, Spares: len(spares) > 0}
	}
	for _, d := range []struct {
		dir string
		set func(*retention.Held)
	}{
		{JobsDir, func(h *retention.Held) { h.JobDir = true }},
		{CoordDir, func(h *retention.Held) { h.CoordDir = true }},
		{ResultsDir, func(h *retention.Held) { h.Results = true }},
	} {
		ids, err := jobDirs(filepath.Join(c.a.cfg.DataDir, d.dir))
		if err != nil {
			return node, err
		}
		for _, id := range ids {
			h := node.Jobs[id]
			d.set(&h)
			node.Jobs[id] = h
		}
	}
	cached, err := c.cache.List()
	if err != nil {
		return node, fmt.Errorf("list %s: %w", c.cache.Dir, err)
	}
	for _, f := range cached {
		node.Files = append(node.Files, retention.File{Sum: f.Sum, Used: f.Used})
	}
	return node, nil
}

// jobDirs lists the directories in dir named like job ids.
func jobDirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && job.ValidID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// jobs is what this node's replica of the job store says of every job. The
// epoch book is read only for jobs whose epochs the node holds. A replica
// behind the leader errs on the side of keeping: a job it has yet to hear of
// is unknown, one whose end it has yet to hear of still runs, and its epoch
// floor is older.
func (c *collector) jobs(node retention.Node) []retention.Job {
	var out []retention.Job
	for _, j := range c.a.store.Jobs() {
		rj := retention.Job{ID: j.ID, State: j.State, Ended: j.Ended, Keep: time.Duration(j.Spec.Keep)}
		for _, f := range j.Spec.Files {
			rj.Files = append(rj.Files, f.SHA256)
		}
		if h, ok := node.Jobs[j.ID]; ok && len(h.Epochs) > 0 {
			if _, raw, err := c.a.store.Job(j.ID); err == nil && len(raw) > 0 {
				var book epochs.Book
				if err := json.Unmarshal(raw, &book); err == nil {
					rj.KeepFrom = book.KeepFrom()
				} else {
					c.a.log.Warn("reading a job's epoch book: keeping all its epochs", "job", j.ID, "err", err)
				}
			}
		}
		out = append(out, rj)
	}
	return out
}

// path is where an item lives on this node.
func (c *collector) path(it retention.Item) string {
	switch it.Kind {
	case retention.KindShards:
		return jobdir.Dir{Root: c.a.shards.Dir, Job: it.Job}.Path()
	case retention.KindEpoch:
		return jobdir.Dir{Root: c.a.shards.Dir, Job: it.Job}.EpochPath(it.Epoch)
	case retention.KindSpares:
		return filepath.Join(jobdir.Dir{Root: c.a.shards.Dir, Job: it.Job}.Path(), "r*.spare")
	case retention.KindJobDir:
		return filepath.Join(c.a.cfg.DataDir, JobsDir, it.Job)
	case retention.KindCoordDir:
		return filepath.Join(c.a.cfg.DataDir, CoordDir, it.Job)
	case retention.KindResults:
		return filepath.Join(c.a.cfg.DataDir, ResultsDir, it.Job)
	case retention.KindFile:
		return c.cache.Path(it.Sum)
	}
	return ""
}

// remove deletes an item. Shards go through the shard store, which forgets
// their verifications with them.
func (c *collector) remove(it retention.Item) error {
	if !job.ValidID(it.Job) && it.Kind != retention.KindFile {
		return fmt.Errorf("job id %q: not one", it.Job) // never a path outside the data dir
	}
	switch it.Kind {
	case retention.KindShards:
		_, err := c.a.shards.RemoveJob(it.Job)
		return err
	case retention.KindEpoch:
		return c.a.shards.RemoveEpoch(it.Job, it.Epoch)
	case retention.KindSpares:
		return c.a.shards.RemoveSpares(it.Job)
	case retention.KindJobDir, retention.KindCoordDir, retention.KindResults:
		return c.tree(it).RemoveAll(c.path(it))
	case retention.KindFile:
		return c.cache.Remove(it.Sum)
	}
	return fmt.Errorf("unknown kind %q", it.Kind)
}

// tree is the directory an item lives in, as its top: a job's directories may
// belong to the job's owner, and nothing in them is followed.
func (c *collector) tree(it retention.Item) userdir.Tree {
	switch it.Kind {
	case retention.KindJobDir:
		return userdir.Tree{Base: filepath.Join(c.a.cfg.DataDir, JobsDir)}
	case retention.KindCoordDir:
		return userdir.Tree{Base: filepath.Join(c.a.cfg.DataDir, CoordDir)}
	case retention.KindResults:
		return userdir.Tree{Base: filepath.Join(c.a.cfg.DataDir, ResultsDir)}
	case retention.KindFile:
		return userdir.Tree{Base: c.cache.Dir}
	}
	return userdir.Tree{Base: c.a.shards.Dir}
}

// usage is the size of an item's files in bytes; what it cannot read counts
// as nothing.
func (c *collector) usage(it retention.Item) int64 {
	if it.Kind != retention.KindSpares {
		n, _ := c.tree(it).Usage(c.path(it))
		return n
	}
	spares, _ := jobdir.Dir{Root: c.a.shards.Dir, Job: it.Job}.Spares()
	var n int64
	for _, path := range spares {
		if fi, err := c.tree(it).Lstat(path); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}
