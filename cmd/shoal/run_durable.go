package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/shard"
)

// durableRun is what shoal run adds to a job it runs over agents with --durable:
// a resume from the epoch a store (DIR or s3://BUCKET/PREFIX) keeps when a run of
// the same job finds one there, and, where the job's coordinator does not keep
// its epochs itself (a Slurm allocation, a DIR, a coordinator without
// credentials: job.Job.CoordKeeps), the job's newest complete epoch kept there
// while this process follows the job, uploaded by the nodes that hold its shards
// (to an object store, when their agents have its credentials) or copied through
// this process. slurmJob names the allocation's job in Slurm.
type durableRun struct {
	// secret is the cluster's: the copy and the resume talk to every agent.
	secret []byte
	store  durable.Store
	// loc is the store's location as messages say it.
	loc    string
	quiet  bool
	stdout io.Writer
	// slurmJob and restarts are the Slurm job shoal run runs in and how often it
	// was requeued; slurmJob is "" outside Slurm.
	slurmJob string
	restarts int
	// endpoint is --durable-endpoint ("": each process its own AWS_ENDPOINT_URL_S3
	// …), and rate --durable-rate, the bytes a second each node's upload may take
	// (0: no bound).
	endpoint string
	rate     int64

	saver *durableSaver
	// cannotFetch are the nodes that said they cannot read the object store
	// themselves, by API address: a resume puts their shards there from this
	// process.
	cannotFetch map[string]bool
}

// openDurable opens the store of --durable and checks, before any job runs, that
// an epoch kept there for program and args is this job's. It returns the store, or
// an exit code after saying why in one line (a DIR that cannot be made, a store
// that cannot be read, another job's epoch), or -1.
func openDurable(ctx context.Context, f runFlags, program string, args []string, stderr io.Writer) (durable.Store, int) {
	if f.durableLoc.Dir != "" {
		if err := os.MkdirAll(f.durableLoc.Dir, 0o700); err != nil {
			fmt.Fprintf(stderr, "shoal run: --durable: %v\n", err)
			return nil, exitFailure
		}
	}
	store, err := durable.Open(f.durableLoc, durable.S3Options{Endpoint: f.durableEndpoint,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(stderr, "shoal: %s: "+format+"\n", append([]any{f.durable}, args...)...)
		}})
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: --durable: %v\n", err)
		return nil, exitFailure
	}
	// Its shards are read and verified when the job resumes (durableRun.resume).
	spec := f.spec()
	spec.Argv, _ = jobArgv(program, args)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = store.Peek(pctx, identity(spec))
	cancel()
	if err != nil && !errors.Is(err, durable.ErrNoEpoch) {
		fmt.Fprintln(stderr, durableRefusal(err))
		return nil, exitFailure
	}
	return store, -1
}

// identity is what makes an epoch in the store this job's (docs/durable.md).
func identity(spec job.Spec) durable.Identity { return durable.IdentityOf(spec) }

// resume readies spec to begin from the epoch the store keeps for the same job, if there
// is one: its shards go into the stores of the agents, two nodes each, and the
// job takes the shards' job id. It returns an exit code after saying why in one
// line (a corrupt or foreign epoch, shards the agents would not take), or -1.
func (r *durableRun) resume(ctx context.Context, c *api.Client, spec *job.Spec, stderr io.Writer) int {
	ident := identity(*spec)
	// From an object store the nodes read the shards themselves and verify them:
	// only the manifest is read here. A directory's are verified here first.
	_, byNodes := r.store.(*durable.S3Store)
	newest := r.store.Newest
	if byNodes {
		newest = r.store.Peek
	}
	m, err := newest(ctx, ident)
	if errors.Is(err, durable.ErrNoEpoch) {
		r.saver = newDurableSaver(r, c, durable.Manifest{Identity: ident, SlurmJob: r.slurmJob}, 0)
		return -1
	}
	if err != nil {
		fmt.Fprintln(stderr, durableRefusal(err))
		return exitFailure
	}
	if spec.ID != "" && spec.ID != m.Job {
		fmt.Fprintf(stderr, "shoal run: --job-id %s: the epoch kept in %s is job %s's; give that id or none\n", spec.ID, r.loc, m.Job)
		return exitFailure
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %s\n", errorLine(err))
		return exitFailure
	}
	var addrs []string
	for _, n := range nodes {
		if n.State == "alive" && n.API != "" {
			addrs = append(addrs, n.API)
		}
	}
	slices.Sort(addrs)
	if len(addrs) == 0 {
		fmt.Fprintln(stderr, "shoal run: no agent alive to resume on")
		return exitFailure
	}
	fetched, err := r.putShards(ctx, m, addrs, byNodes)
	if byNodes && (errors.Is(err, errkind.Corrupt) || errors.Is(err, durable.ErrCorrupt)) {
		// A node, or this process for a node that cannot read the store, found
		// an object of the newest epoch missing or damaged: the store's own
		// reading, which verifies every shard, refuses that epoch (saying so)
		// and takes the one before, if it is whole.
		if m, err = r.store.Newest(ctx, ident); err != nil {
			fmt.Fprintln(stderr, durableRefusal(err))
			return exitFailure
		}
		fetched, err = r.putShards(ctx, m, addrs, byNodes)
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: resuming from epoch %d kept in %s: %s\n", m.Epoch, r.loc, errorLine(err))
		return exitFailure
	}
	if !r.quiet {
		by := ""
		if fetched > 0 {
			by = ", fetched by " + job.Plural(fetched, "node")
		}
		slurmJob := ""
		if r.slurmJob != "" {
			slurmJob = fmt.Sprintf("; Slurm job %s, restart %d", r.slurmJob, r.restarts)
		}
		fmt.Fprintf(r.stdout, "shoal: resuming from epoch %d kept in %s (job %s%s%s)\n", m.Epoch, r.loc, m.Job, by, slurmJob)
	}
	if s3, ok := r.store.(*durable.S3Store); ok {
		// The run numbers its epochs from m.Epoch+1 on: one the store refused
		// under such a number would pass for kept.
		if n, err := s3.DropAfter(ctx, m.Job, m.Epoch); err != nil {
			fmt.Fprintf(stderr, "shoal: warning: %s keeps epochs of job %s newer than %d that were not resumed, and they could not be removed: %s\n", r.loc, m.Job, m.Epoch, errorLine(err))
		} else if n > 0 && !r.quiet {
			fmt.Fprintf(r.stdout, "shoal: %s removed from %s: newer than epoch %d and not resumed\n", job.Plural(n, "epoch"), r.loc, m.Epoch)
		}
	}
	spec.ID, spec.ResumeEpoch, spec.ResumeFrom, spec.ResumeWorld = m.Job, m.Epoch, r.loc, m.World
	r.saver = newDurableSaver(r, c, durable.Manifest{Identity: ident, Job: m.Job, SlurmJob: r.slurmJob}, m.Epoch)
	return -1
}

// durableRefusal is shoal run's line for an epoch in the --durable store it will not
// resume from.
func durableRefusal(err error) string {
	if errors.Is(err, durable.ErrForeign) {
		return fmt.Sprintf("shoal run: --durable: %v; give another DIR, or remove it to start afresh", err)
	}
	return fmt.Sprintf("shoal run: --durable: %v; nothing was changed there", err)
}

// putShards puts every rank's shard of the epoch m describes into the stores of two
// of the agents at addrs (one when there is one): any single node lost before the
// job's next epoch is complete loses nothing. With byNodes each node reads its
// shards from the object store itself (fetchByNodes), the nodes in parallel; the
// shards of a node that cannot, and every shard of a directory, this process puts
// there (putThrough). It returns how many nodes fetched their own. An object a node
// finds missing or damaged is an error wrapping errkind.Corrupt.
func (r *durableRun) putShards(ctx context.Context, m durable.Manifest, addrs []string, byNodes bool) (int, error) {
	copies := min(2, len(addrs))
	byNode := map[string][]int{}
	for rank := range m.Ranks {
		for k := range copies {
			addr := addrs[(rank+k)%len(addrs)]
			byNode[addr] = append(byNode[addr], rank)
		}
	}
	if !byNodes {
		return 0, r.putThrough(ctx, m, byNode)
	}
	left, err := r.fetchByNodes(ctx, m, byNode)
	if err != nil || len(left) == 0 {
		return len(byNode) - len(left), err
	}
	return len(byNode) - len(left), r.putThrough(ctx, m, left)
}

// fetchByNodes has each node of byNode read its ranks' shards of the epoch m
// describes from the object store, verified, into its shard store, one after
// another and the nodes in parallel, at most --durable-rate bytes a second each.
// It returns the ranks of the nodes that cannot (no credentials), saying so once
// for each, and not asking them again.
func (r *durableRun) fetchByNodes(ctx context.Context, m durable.Manifest, byNode map[string][]int) (map[string][]int, error) {
	type answer struct {
		addr string
		err  error
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer, len(byNode))
	fetch := func(addr string, ranks []int) {
		nc := api.NewClient(addr, r.secret)
		for _, rank := range ranks {
			req := api.DownloadRequest{Location: r.loc, Endpoint: r.endpoint, Ranks: m.Ranks,
				Size: m.Shards[rank].Size, Checksum: m.Shards[rank].Checksum, Rate: r.rate}
			if _, err := nc.DownloadShard(fctx, shard.Ref{Job: m.Job, Epoch: m.Epoch, Rank: rank}, req); err != nil {
				answers <- answer{addr, err}
				return
			}
		}
		answers <- answer{addr, nil}
	}
	left := map[string][]int{}
	asked := 0
	for addr, ranks := range byNode {
		if r.cannotFetch[addr] {
			left[addr] = ranks
			continue
		}
		asked++
		go fetch(addr, ranks)
	}
	var err error
	for range asked {
		a := <-answers
		switch {
		case a.err == nil:
		case errors.Is(a.err, errkind.NotAvailable):
			left[a.addr] = byNode[a.addr]
			if r.cannotFetch == nil {
				r.cannotFetch = map[string]bool{}
			}
			r.cannotFetch[a.addr] = true
			fmt.Fprintf(r.stdout, "shoal: the node at %s does not fetch its shards from %s itself (%s): shoal run puts them there\n", a.addr, r.loc, errorLine(a.err))
		case err == nil:
			err = fmt.Errorf("the node at %s: %w", a.addr, a.err)
			cancel()
		}
	}
	return left, err
}

// putThrough puts the shards byNode lists (ranks by node) of the epoch m describes
// into those nodes' stores from this process, in parallel. A directory's files are
// streamed from it, as Newest has just verified them; an object store's shards are
// first read into a private temporary directory, verified as they arrive, since an
// agent takes a shard it can read twice. Each agent verifies what it stores.
func (r *durableRun) putThrough(ctx context.Context, m durable.Manifest, byNode map[string][]int) error {
	open := func(rank int) (*os.File, error) { return os.Open(durable.ShardPath(r.loc, m, rank)) }
	if _, isDir := r.store.(*durable.DirStore); !isDir {
		tmp, err := os.MkdirTemp("", "shoal-resume-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		var ranks []int
		for _, rs := range byNode {
			ranks = append(ranks, rs...)
		}
		slices.Sort(ranks)
		if err := r.fetchShards(ctx, m, slices.Compact(ranks), tmp); err != nil {
			return err
		}
		open = func(rank int) (*os.File, error) { return os.Open(filepath.Join(tmp, strconv.Itoa(rank))) }
	}
	var n int
	for _, rs := range byNode {
		n += len(rs)
	}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for addr, ranks := range byNode {
		for _, rank := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f, err := open(rank)
				if err == nil {
					defer f.Close()
					ref := shard.Ref{Job: m.Job, Epoch: m.Epoch, Rank: rank}
					err = api.NewClient(addr, r.secret).PutShard(ctx, ref, f)
				}
				if err != nil {
					errs <- fmt.Errorf("rank %d to %s: %w", rank, addr, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when the channel is empty
}

// fetchShards reads ranks' shards of the epoch m describes from the store into
// dir/RANK, verified as they are read, four at a time.
func (r *durableRun) fetchShards(ctx context.Context, m durable.Manifest, ranks []int, dir string) error {
	errs := make(chan error, len(ranks))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, rank := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rc, _, err := r.store.OpenShard(ctx, m, rank)
			if err != nil {
				errs <- err
				return
			}
			defer rc.Close()
			f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(rank)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err == nil {
				_, err = io.Copy(f, rc)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				errs <- fmt.Errorf("rank %d: %w", rank, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// saveTimeout bounds one save of an epoch into the store.
const saveTimeout = 10 * time.Minute

// durableSaver keeps the job's newest complete epoch in the store: it follows the job's
// newest complete epoch through the agent, and has each new one uploaded by the nodes
// that hold its shards (saveByNodes), or copies it from them itself, apart from the
// ranks: they never wait for it.
type durableSaver struct {
	r  *durableRun
	c  *api.Client
	m  durable.Manifest // Identity, SlurmJob, and Job once known
	mu sync.Mutex
	// saved is the epoch the store keeps; changed is closed and replaced when it changes.
	saved   uint64
	changed chan struct{}
	done    chan struct{} // closed when run returns
	// uploaders is how many nodes uploaded the epoch saved last (0: this
	// process); nodesCannot is set once a node could not upload to the store.
	uploaders   int
	nodesCannot bool
}

func newDurableSaver(r *durableRun, c *api.Client, m durable.Manifest, saved uint64) *durableSaver {
	return &durableSaver{r: r, c: c, m: m, saved: saved, changed: make(chan struct{}), done: make(chan struct{})}
}

// wait returns once run has.
func (s *durableSaver) wait() { <-s.done }

// clear removes the epochs the store keeps, once the job has finished.
func (r *durableRun) clear(stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.store.Clear(ctx); err != nil {
		fmt.Fprintf(stderr, "shoal: warning: the job finished, but its epoch stays in %s: %v\n", r.loc, err)
		return
	}
	if !r.quiet {
		fmt.Fprintf(r.stdout, "shoal: the job finished: %s keeps no epoch of it any more\n", r.loc)
	}
}

// run keeps the store up to date with job id's newest complete epoch until ctx ends.
func (s *durableSaver) run(ctx context.Context, id string) {
	defer close(s.done)
	s.m.Job = id
	var failed uint64 // the last epoch a save failed for, tried again at retry
	var retry time.Time
	failing := false // said so since the last save that worked
	for {
		info, err := s.c.Job(ctx, id)
		if err == nil && info.Epoch > s.savedEpoch() && (info.Epoch != failed || time.Now().After(retry)) {
			start := time.Now()
			// A save under way is finished, not cut short, when ctx ends (the job
			// ended or was held): an upload cancelled midway may still land in a bucket
			// after the clear that follows, and a directory's save was never cut short.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
			// The nodes keep the epoch while it is copied, however many newer ones
			// complete meanwhile (an agent that does not know the report refuses
			// it: nothing is lost but that).
			s.c.KeptDurable(sctx, id, api.DurableRequest{Epoch: info.Epoch, Location: s.r.loc, Endpoint: s.r.endpoint, Copying: true})
			err := s.save(sctx, info.Epoch)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				failed, retry = info.Epoch, time.Now().Add(2*time.Second)
				if !failing {
					fmt.Fprintf(s.r.stdout, "shoal: warning: keeping epoch %d in %s failed: %s\n", info.Epoch, s.r.loc, errorLine(err))
				}
				failing = true
			case err == nil:
				took := time.Since(start).Seconds()
				s.mu.Lock()
				uploaders := s.uploaders
				s.mu.Unlock()
				// Recorded in the job's record, whose event prints the line with the
				// job's other events; said here when it cannot be (the job just
				// ended) or when --quiet would hide the end of a run of failures.
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				rerr := s.c.KeptDurable(rctx, id, api.DurableRequest{Epoch: info.Epoch, Location: s.r.loc, Endpoint: s.r.endpoint, Took: took, Uploaders: uploaders})
				rcancel()
				if rerr != nil && !s.r.quiet || failing && s.r.quiet {
					by := ""
					if uploaders > 0 {
						by = ", uploaded by " + job.Plural(uploaders, "node")
					}
					fmt.Fprintf(s.r.stdout, "shoal: epoch %d kept in %s (%.1f s%s)\n", info.Epoch, s.r.loc, took, by)
				}
				failing = false
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (s *durableSaver) savedEpoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved
}

// save copies epoch from the nodes that hold its shards into the store.
func (s *durableSaver) save(ctx context.Context, epoch uint64) error {
	holders, _, err := s.index(ctx, epoch)
	if err != nil {
		return err
	}
	if len(holders) == 0 {
		return fmt.Errorf("no agent holds a shard of epoch %d", epoch)
	}
	m := s.m.Identity.ForEpoch(s.m.Job, epoch, len(holders))
	m.SlurmJob = s.m.SlurmJob
	if up, ok := s.r.store.(*durable.S3Store); ok && !s.nodesCannot {
		nodes, err := s.saveByNodes(ctx, up, m, holders)
		if !errors.Is(err, errkind.NotAvailable) {
			if err == nil {
				s.kept(epoch, nodes)
			}
			return err
		}
		// A node without credentials for the store: this process copies the
		// epochs from now on, as it does for a directory.
		s.nodesCannot = true
		fmt.Fprintf(s.r.stdout, "shoal: the nodes do not upload to %s themselves (%s): shoal run copies the epochs\n", s.r.loc, errorLine(err))
	}
	err = s.r.store.Save(ctx, m, func(rank int) (io.ReadCloser, int64, error) {
		var last error = fmt.Errorf("no agent holds rank %d's shard", rank)
		for _, addr := range holders[rank] {
			rc, size, err := api.NewClient(addr, s.r.secret).GetShard(ctx, shard.Ref{Job: m.Job, Epoch: epoch, Rank: rank})
			if err == nil {
				return rc, size, nil
			}
			last = err
		}
		return nil, 0, last
	})
	if err != nil {
		return err
	}
	s.kept(epoch, 0)
	return nil
}

// kept records that the store keeps epoch, uploaded by that many nodes (0: by this
// process).
func (s *durableSaver) kept(epoch uint64, nodes int) {
	s.mu.Lock()
	s.saved = max(s.saved, epoch)
	s.uploaders = nodes
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// saveByNodes has the nodes that hold epoch m.Epoch's shards upload them into the
// store themselves, each node its own one after another and the nodes in
// parallel, each rank's by the holder with the fewest so far; then it writes the
// manifest. An upload that fails removes what the others uploaded; a node that
// cannot reach the store answers errkind.NotAvailable. It returns how many nodes
// uploaded.
func (s *durableSaver) saveByNodes(ctx context.Context, store *durable.S3Store, m durable.Manifest, holders [][]string) (int, error) {
	saved, err := store.Begin(ctx, m)
	if err != nil || saved {
		return 0, err
	}
	byNode := map[string][]int{}
	for rank, addrs := range holders {
		if len(addrs) == 0 {
			return 0, fmt.Errorf("no agent holds rank %d's shard", rank)
		}
		pick := addrs[0]
		for _, a := range addrs[1:] {
			if len(byNode[a]) < len(byNode[pick]) {
				pick = a
			}
		}
		byNode[pick] = append(byNode[pick], rank)
	}
	m.Shards = make([]durable.ShardEntry, m.Ranks)
	created := make([]uint64, m.Ranks)
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(byNode))
	req := api.UploadRequest{Location: s.r.loc, Endpoint: s.r.endpoint, Ranks: m.Ranks, Rate: s.r.rate}
	for addr, ranks := range byNode {
		go func() {
			c := api.NewClient(addr, s.r.secret)
			for _, rank := range ranks {
				u, err := c.UploadShard(uctx, shard.Ref{Job: m.Job, Epoch: m.Epoch, Rank: rank}, req)
				if err != nil {
					errs <- fmt.Errorf("the node at %s: %w", addr, err)
					return
				}
				m.Shards[rank] = durable.ShardEntry{Size: u.Size, Checksum: u.Checksum}
				created[rank] = u.CreatedNs
			}
			errs <- nil
		}()
	}
	for range byNode {
		if e := <-errs; e != nil && err == nil {
			err = e
			cancel()
		}
	}
	if err != nil {
		store.Abort(context.WithoutCancel(ctx), m.Epoch)
		return 0, err
	}
	m.CreatedNs = created[0]
	return len(byNode), store.Commit(ctx, m)
}

// index asks every live agent which shards of the job it holds: by rank, the
// agents holding epoch's (as many ranks as wrote it), and the highest epoch any
// holds.
func (s *durableSaver) index(ctx context.Context, epoch uint64) ([][]string, uint64, error) {
	nodes, err := s.c.Nodes(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out [][]string
	var highest uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.State != "alive" || n.API == "" {
			continue
		}
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			idx, err := api.NewClient(addr, s.r.secret).Shards(cctx, s.m.Job)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, sh := range idx.Shards {
				highest = max(highest, sh.Epoch)
				if sh.Epoch != epoch || sh.Rank < 0 || sh.Rank >= sh.NRanks {
					continue
				}
				if len(out) < sh.NRanks {
					out = append(out, make([][]string, sh.NRanks-len(out))...)
				}
				out[sh.Rank] = append(out[sh.Rank], addr)
			}
		}(n.API)
	}
	wg.Wait()
	return out, highest, nil
}

// waitSaved waits until the store keeps epoch or a newer one, or ctx ends.
func (s *durableSaver) waitSaved(ctx context.Context, epoch uint64) bool {
	for {
		s.mu.Lock()
		saved, changed := s.saved, s.changed
		s.mu.Unlock()
		if saved >= epoch {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}
