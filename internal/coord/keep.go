package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// A job run with --durable s3://… outside Slurm has its coordinator keep its
// newest complete epoch in the object store (job.Spec.Durable), whether or
// not a shoal run follows the job: each time an epoch is complete, the nodes
// that hold its shards upload them, each node its own one after another and
// the nodes in parallel, and the coordinator writes the epoch's manifest
// last, with its own agent's credentials. One epoch is copied at a time; an
// epoch that completes meanwhile waits, and a newer one replaces it. The
// copy never goes through the coordinator: a node that cannot upload (its
// agent has no credentials) fails that epoch's copy, and the epoch kept
// before stays current. A new coordinator begins with the newest complete
// epoch the store does not keep yet; what a copy cut short left there is
// removed by the next copy's Begin.
//
// A copy under way when the job ends (it finished, failed or was cancelled)
// is stopped after the shard each node is uploading, not cut in the middle of
// it: an upload abandoned by the coordinator may still land in the bucket
// once the node's store has its bytes, after the end is recorded and after
// shoal run has emptied the bucket of a finished job. The coordinator waits
// for those uploads to be answered, for at most keepEndGrace, removes what
// the copy put there, and only then lets the end be recorded. A coordinator
// that stops leading cuts its copy at once: the next one's Begin removes what
// it left, and two must not write one epoch.

// EpochStore is the part of an object store a job's coordinator writes: the
// manifests, the shards being the nodes' to upload ([durable.S3Store]). Its
// methods are safe for concurrent use.
type EpochStore interface {
	// Begin readies the store for epoch m.Epoch's shards, removing what saves
	// cut short left, and reports saved when the epoch is kept already.
	Begin(ctx context.Context, m durable.Manifest) (saved bool, err error)
	// Commit writes epoch m.Epoch's manifest, which makes it current.
	Commit(ctx context.Context, m durable.Manifest) error
	// Abort removes what there is of epoch e, as far as it can.
	Abort(ctx context.Context, e uint64)
}

var _ EpochStore = (*durable.S3Store)(nil)

// keepTimeout bounds one copy of an epoch to the store: the time its nodes
// keep it pinned.
const keepTimeout = PinFor

// keepEndGrace bounds how long a job's end waits for the shards being
// uploaded when it came (at most one a node); past it they are cut, and one
// that lands later is left for the agents' collector of the job's data.
const keepEndGrace = 10 * time.Second

// errJobEnded stops a copy at the job's end.
var errJobEnded = errors.New("the job ended")

// keepState is what a job's coordinator has copied to its durable store: the
// pure rule of which epoch it copies next.
type keepState struct {
	kept  uint64 // the newest epoch the store keeps (0: none)
	tried uint64 // the newest epoch a copy was made of or tried, kept or not
}

// keepStart is where the copies of job info's epochs begin: from the epoch
// its record says is kept in its store (a coordinator taking the job over),
// or the one it resumed from there. 0 when none.
func keepStart(info job.Job) keepState {
	var s keepState
	d := info.Spec.Durable
	if d == nil {
		return s
	}
	if info.Durable != nil && info.Durable.Location == d.Location {
		s.kept = info.Durable.Epoch
	}
	if info.Spec.ResumeFrom == d.Location {
		s.kept = max(s.kept, info.Spec.ResumeEpoch)
	}
	s.tried = s.kept
	return s
}

// next is the epoch to copy now, given the newest complete epoch: that one
// when no copy was made or tried of it or of a newer one, else 0. Epochs that
// completed while a copy ran are skipped for the newest of them.
func (s keepState) next(newest uint64) uint64 {
	if newest > s.tried {
		return newest
	}
	return 0
}

// ended is the state after a copy of epoch e ended, kept or not: a failed
// copy leaves the epoch kept before current, and is not tried again (the next
// complete epoch is).
func (s keepState) ended(e uint64, kept bool) keepState {
	s.tried = max(s.tried, e)
	if kept {
		s.kept = max(s.kept, e)
	}
	return s
}

// uploaders chooses, for each rank of an epoch, the node that uploads its
// shard among those holding it (holders, by rank): the one with the fewest
// ranks so far, the first listed on a tie, so that the nodes share the copy.
// It returns the ranks by node, or an error naming a rank no node holds.
func uploaders(holders [][]string) (map[string][]int, error) {
	byNode := map[string][]int{}
	for rank, nodes := range holders {
		if len(nodes) == 0 {
			return nil, fmt.Errorf("no live node holds rank %d's shard", rank)
		}
		pick := nodes[0]
		for _, n := range nodes[1:] {
			if len(byNode[n]) < len(byNode[pick]) {
				pick = n
			}
		}
		byNode[pick] = append(byNode[pick], rank)
	}
	return byNode, nil
}

// keeper copies a job's complete epochs to its durable store, beside the
// job's run.
type keeper struct {
	b      *clusterBackend
	target job.DurableTarget
	store  EpochStore
	ident  durable.Identity
	state  keepState
	// nudge is told when an epoch became complete.
	nudge chan struct{}
	// ending is closed when the job's run has ended: the copy under way stops
	// after the shards being uploaded, and no other begins.
	ending chan struct{}
}

// startKeeper starts copying the job's complete epochs to its durable store
// when its record says its coordinators do (job.Job.CoordKeeps), until stop
// is called, at the run's end: stop lets the shards being uploaded land (for
// at most keepEndGrace), removes what the unfinished copy put in the store,
// and returns once the keeper has. ctx ending with [ErrLostLead] cuts the
// copy at once. A node whose agent has no credentials for the store says so
// in the job's events, and keeps nothing.
func (b *clusterBackend) startKeeper(ctx context.Context) (stop func()) {
	info := b.rec.Job()
	d := info.Spec.Durable
	if d == nil || !info.CoordKeeps || b.cfg.OpenKeep == nil {
		return func() {}
	}
	store, err := b.cfg.OpenKeep(*d)
	if err != nil {
		why := err.Error()
		if errors.Is(err, durable.ErrNoCredentials) {
			why = "its agent has no credentials for it"
		}
		b.j.event(job.EventDurable, job.Event{Message: fmt.Sprintf("warning: no epoch of the job is kept in %s while node %s coordinates it: %s", d.Location, b.cfg.Node, why)})
		return func() {}
	}
	k := &keeper{b: b, target: *d, store: store, ident: durable.IdentityOf(b.j.spec), state: keepStart(info),
		nudge: make(chan struct{}, 1), ending: make(chan struct{})}
	b.keep = k
	// The copy outlives a cancelled run (a cancelled job's end waits for it as
	// a finished one's does), not a lost lead.
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lost := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), ErrLostLead) {
			cancel()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.run(kctx)
	}()
	return func() {
		close(k.ending)
		select {
		case <-done:
		case <-time.After(keepEndGrace):
			cancel()
			<-done
		}
		lost()
		cancel()
	}
}

// completed tells the keeper that an epoch became complete; it never blocks.
func (k *keeper) completed() {
	select {
	case k.nudge <- struct{}{}:
	default:
	}
}

// run copies each newly complete epoch until ctx ends, one at a time.
func (k *keeper) run(ctx context.Context) {
	k.completed() // a job taken over may have complete epochs not kept yet
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.ending:
			return
		case <-k.nudge:
		}
		for {
			if k.ended() {
				return
			}
			k.b.mu.Lock()
			e := k.state.next(k.b.book.Newest())
			if e != 0 {
				// Pruning keeps it, and every newer one, while it is copied.
				k.b.book.Pin, k.b.pinUntil = e, time.Now().Add(keepTimeout)
			}
			k.b.mu.Unlock()
			if e == 0 {
				break
			}
			err := k.copy(ctx, e)
			k.b.mu.Lock()
			if k.b.book.Pin == e {
				k.b.book.Pin = 0
			}
			k.b.mu.Unlock()
			if ctx.Err() != nil || errors.Is(err, errJobEnded) {
				// The node stopped leading (what is left is the next copy's to
				// remove), or the job ended (copy removed it).
				return
			}
			if err != nil {
				before := "no epoch of the job is kept there yet"
				if k.state.kept > 0 {
					before = fmt.Sprintf("epoch %d stays the one kept", k.state.kept)
				}
				k.b.j.event(job.EventDurable, job.Event{Epoch: e, Message: fmt.Sprintf("warning: keeping epoch %d in %s failed: %v; %s", e, k.target.Location, err, before)})
			}
			k.state = k.state.ended(e, err == nil)
		}
	}
}

// ended reports whether the job's run has ended.
func (k *keeper) ended() bool {
	select {
	case <-k.ending:
		return true
	default:
		return false
	}
}

// copy has the nodes holding epoch e's shards upload them to the store, then
// writes its manifest, and says so in the job's events. The job's end stops
// it with errJobEnded once the shards being uploaded are answered, and what
// it uploaded is removed.
func (k *keeper) copy(ctx context.Context, e uint64) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, keepTimeout)
	defer cancel()
	k.b.mu.Lock()
	holders := make([][]string, k.b.book.Ranks(e))
	for r := range holders {
		holders[r] = k.b.book.Holders(e, r)
	}
	k.b.mu.Unlock()
	nodes, err := k.b.cfg.Nodes(ctx)
	if err != nil {
		return err
	}
	live := map[string]node.Node{}
	for _, n := range nodes {
		if n.State == "alive" {
			live[n.Name] = n
		}
	}
	for r, hs := range holders {
		holders[r] = slices.DeleteFunc(hs, func(n string) bool { _, ok := live[n]; return !ok })
	}
	byNode, err := uploaders(holders)
	if err != nil {
		return err
	}
	m := k.ident.ForEpoch(k.b.j.spec.ID, e, len(holders))
	saved, err := k.store.Begin(ctx, m)
	if err != nil {
		return err
	}
	var size int64
	if !saved {
		if size, err = k.upload(ctx, &m, byNode, live); err == nil {
			err = k.store.Commit(ctx, m)
		}
		if err != nil {
			if ctx.Err() == nil {
				k.store.Abort(ctx, e)
			}
			return err
		}
	}
	how := fmt.Sprintf(" (%s by %s, %s)", job.Bytes(size), job.Plural(len(byNode), "node"), job.Seconds(time.Since(start)))
	if saved {
		how = " (there already)"
	}
	data, _ := json.Marshal(job.Durable{Epoch: e, Location: k.target.Location, Endpoint: k.target.Endpoint})
	k.b.j.event(job.EventDurable, job.Event{Epoch: e, Data: data,
		Message: fmt.Sprintf("epoch %d kept in %s%s", e, k.target.Location, how)})
	return nil
}

// upload has each node of byNode upload its ranks' shards of epoch m.Epoch,
// one after another and the nodes in parallel, and lists them in m; the first
// failure stops the others, and the job's end stops each node after its
// shard under way. It returns the bytes uploaded.
func (k *keeper) upload(ctx context.Context, m *durable.Manifest, byNode map[string][]int, live map[string]node.Node) (int64, error) {
	m.Shards = make([]durable.ShardEntry, m.Ranks)
	created := make([]uint64, m.Ranks)
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := api.UploadRequest{Location: k.target.Location, Endpoint: k.target.Endpoint, Ranks: m.Ranks, Rate: k.target.Rate}
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for name, ranks := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := k.b.cfg.Peer(live[name])
			for _, r := range ranks {
				if k.ended() {
					mu.Lock()
					if first == nil {
						first = errJobEnded
					}
					mu.Unlock()
					return
				}
				u, err := p.UploadShard(uctx, shard.Ref{Job: m.Job, Epoch: m.Epoch, Rank: r}, req)
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("node %s, rank %d: %w", name, r, err)
					cancel()
				}
				if err == nil {
					m.Shards[r], created[r] = durable.ShardEntry{Size: u.Size, Checksum: u.Checksum}, u.CreatedNs
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	var size int64
	for _, s := range m.Shards {
		size += s.Size
	}
	m.CreatedNs = created[0]
	return size, nil
}
