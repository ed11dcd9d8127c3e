package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/shard"
)

// stage copies the job's files to the nodes of the run and grants each node its
// ranks, all in parallel, and returns once they are done. For a restart, it then
// brings each rank's shard of epoch to the node the rank will run on (a copy from
// a node of the run holding a verified one, or a rebuild from its parity group)
// in the background, while the job launches: the ranks wait for their shards
// (SHOAL_STAGE_WAIT), and poll ends the run if one cannot be staged. It reports
// the ranks whose shards are being staged, ascending.
//
// A restart on another count than epoch's (resize) has each of the epoch's
// shards brought to a node of the run (resizeSources) before the launch: the
// ranks that read them are theirs to agree on, and none waits for its own.
func (b *clusterBackend) stage(ctx context.Context, info job.Job, byNode map[string][]int, epoch uint64, resize bool) ([]int, error) {
	sources := b.shardSources
	if resize {
		sources = func(byNode map[string][]int, epoch uint64) ([]epochs.Replica, []epochs.Rebuild, error) {
			if epoch == 0 {
				return nil, nil, nil
			}
			return b.resizeSources(byNode, epoch, names(b.sources()))
		}
	}
	fetches, rebuilds, err := sources(byNode, epoch)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(byNode))
	var down downNodes
	var copiedMu sync.Mutex
	copied := map[string][]job.File{} // by node
	var meter stageMeter
	for name, ranks := range byNode {
		wg.Add(1)
		go func(name string, peer Peer, nranks int) {
			defer wg.Done()
			files, err := b.cfg.setUp(ctx, peer, name, b.nodes[name].Arch, info, nranks, &meter)
			if err != nil {
				down.note(err, name)
				errs <- fmt.Errorf("stage job %s on %s: %w", info.ID, name, err)
				return
			}
			copiedMu.Lock()
			copied[name] = files
			copiedMu.Unlock()
		}(name, b.peer(name), len(ranks))
	}
	b.waitStaged(&wg, &meter)
	close(errs)
	if loss := b.lostWhileStaged(down.list()); loss != nil {
		return nil, &lossError{loss}
	}
	if err := <-errs; err != nil {
		return nil, err
	}
	b.j.event(job.EventStage, job.Event{Message: job.DescribeStaging(copied), Data: job.StagedData(copied)})
	b.staged = nil
	if len(fetches)+len(rebuilds) == 0 {
		return nil, nil
	}
	if resize {
		b.mu.Lock()
		written := b.book.Ranks(epoch)
		b.mu.Unlock()
		s := b.stageShards(ctx, info.ID, epoch, fetches, rebuilds)
		if loss := b.lostWhileStaged(s.down); loss != nil {
			return nil, &lossError{loss}
		}
		if loss := s.corruptLoss(); loss != nil {
			b.reportCorrupt()
			return nil, &lossError{loss}
		}
		if s.err == nil {
			b.j.event(job.EventStage, job.Event{Message: describeResizeStaging(epoch, written, len(rebuilds), s)})
		}
		return nil, s.err
	}
	var ranks []int
	for _, f := range fetches {
		ranks = append(ranks, f.Rank)
	}
	for _, rb := range rebuilds {
		ranks = append(ranks, rb.Rank)
	}
	slices.Sort(ranks)
	staged := make(chan stagedShards, 1)
	b.staged = staged
	go func() {
		staged <- b.stageShards(ctx, info.ID, epoch, fetches, rebuilds)
		b.tell()
	}()
	return slices.Compact(ranks), nil
}

// waitStaged waits for the job's files to be staged, saying how far the
// copies have come when they last (stageNote).
func (b *clusterBackend) waitStaged(wg *sync.WaitGroup, meter *stageMeter) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var said time.Time
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			if note := stageNote(now.Sub(start), now.Sub(said), !said.IsZero(), meter.snapshot()); note != "" {
				said = now
				b.j.event(job.EventStage, job.Event{Message: note})
			}
		}
	}
}

// stagedShards is how the staging of a run's shards ended: the nodes that
// did not answer, the first failure, and the shards copied (not found in
// place) with the bytes that crossed the network for them.
type stagedShards struct {
	down   []string
	err    error
	copied []epochs.Replica
	wire   int64
	// corrupt are the copies found corrupt as they were read, in words
	// ("rank 1's shard of epoch 2 on n2"): the book counts them no more.
	corrupt []string
}

// corruptLoss is the end of a run whose shards could not all be staged because
// copies the book counted turned out corrupt when read (s.corrupt): not a
// failure of the job, since the book no longer counts them, but a relaunch
// from the newest epoch that is still whole, as a loss relaunches. nil when
// some other error stopped the staging.
func (s stagedShards) corruptLoss() *nodeLoss {
	if s.err == nil || len(s.corrupt) == 0 || !errors.Is(s.err, errkind.Corrupt) {
		return nil
	}
	slices.Sort(s.corrupt)
	return &nodeLoss{corrupt: true, at: time.Now(),
		reason: fmt.Sprintf("%s corrupt when staged", strings.Join(s.corrupt, ", "))}
}

// corruptCheck is the check a corrupt copy failed, from the error of a copy
// refused for it: "checksum mismatch", or "verification".
func corruptCheck(err error) string {
	for _, c := range []string{"checksum mismatch", "bad magic", "truncated"} {
		if strings.Contains(err.Error(), c) {
			return c
		}
	}
	return "verification"
}

// downNodes collects the nodes that did not answer a call; safe for
// concurrent use.
type downNodes struct {
	mu    sync.Mutex
	nodes map[string]bool
}

// note records node when err says it did not answer.
func (d *downNodes) note(err error, node string) {
	if !errors.Is(err, errkind.Unreachable) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nodes == nil {
		d.nodes = map[string]bool{}
	}
	d.nodes[node] = true
}

func (d *downNodes) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.nodes))
	for n := range d.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// lostWhileStaged is the loss of the nodes that did not answer while the run
// was staged, nil when there are none: a node loss like any other, the job is
// placed again without them. Job goroutine only.
func (b *clusterBackend) lostWhileStaged(down []string) *nodeLoss {
	if len(down) == 0 {
		return nil
	}
	b.mu.Lock()
	for _, n := range down {
		b.excluded[n] = true
	}
	b.mu.Unlock()
	b.recordAvoid()
	return &nodeLoss{nodes: down, reason: "its agent did not answer while the run was staged", at: time.Now()}
}

// stageShards makes the copies and rebuilds that bring the ranks' shards of
// epoch to their nodes, in parallel, and says how that went.
func (b *clusterBackend) stageShards(ctx context.Context, id string, epoch uint64, fetches []epochs.Replica, rebuilds []epochs.Rebuild) stagedShards {
	var wg sync.WaitGroup
	errs := make(chan error, len(fetches)+len(rebuilds))
	var down downNodes
	var mu sync.Mutex
	var out stagedShards
	sources := b.sources()
	for _, f := range fetches {
		wg.Add(1)
		go func(f epochs.Replica, to Peer, from string) {
			defer wg.Done()
			ref := shard.Ref{Job: id, Epoch: f.Epoch, Rank: f.Rank}
			corrupt := b.wasCorrupt(f.Epoch, f.Rank, f.To)
			got, err := to.Fetch(ctx, ref, from)
			if errors.Is(err, errkind.Corrupt) {
				// The holder's copy failed verification as it was read: damaged
				// since its node's index was taken. Counted no more, the run
				// restarts from an epoch whose shards are good (shardsStaged).
				b.mu.Lock()
				if c, fresh := b.book.FoundCorrupt(f.Epoch, f.Rank, f.From, corruptCheck(err)); fresh {
					b.corrupt = append(b.corrupt, c)
				}
				b.mu.Unlock()
				mu.Lock()
				out.corrupt = append(out.corrupt, fmt.Sprintf("rank %d's shard of epoch %d on %s", f.Rank, f.Epoch, f.From))
				mu.Unlock()
			}
			if err != nil {
				down.note(err, f.To)
				if errors.Is(err, errkind.BadGateway) {
					down.note(errkind.Unreachable, f.From) // the holder did not answer the copy
				}
				errs <- fmt.Errorf("stage rank %d's shard of epoch %d from %s to %s: %w", f.Rank, f.Epoch, f.From, f.To, err)
				return
			}
			// Kept until f.To's index shows it: one taken before the copy
			// still lists a corrupt copy it replaced.
			b.mu.Lock()
			b.copyMade(epochs.ShardCopy{Epoch: f.Epoch, Rank: f.Rank, Node: f.To})
			b.mu.Unlock()
			if corrupt {
				b.j.event(job.EventShardCorrupt, job.Event{Epoch: f.Epoch, Rank: job.RankOf(f.Rank), Message: epochs.RepairNote(f.Epoch, f.Rank, f.To, f.From)})
			}
			if got.Copied {
				mu.Lock()
				out.copied = append(out.copied, f)
				out.wire += got.Wire
				mu.Unlock()
			}
		}(f, b.peer(f.To), sources[f.From].API)
	}
	for _, rb := range rebuilds {
		wg.Add(1)
		go func(rb epochs.Rebuild, to Peer) {
			defer wg.Done()
			ref := shard.Ref{Job: id, Epoch: rb.Epoch, Rank: rb.Rank}
			req := api.RebuildRequest{Group: rb.Group, M: rb.M, Data: b.apiMembers(rb.Members)}
			for _, r := range rb.Rows {
				req.Parity = append(req.Parity, api.ParitySource{Row: r.Row, From: sources[r.Holder].API})
			}
			if err := to.Rebuild(ctx, ref, req); err != nil {
				down.note(err, rb.To)
				errs <- fmt.Errorf("rebuild rank %d's shard of epoch %d on %s from its parity group: %w", rb.Rank, rb.Epoch, rb.To, err)
				return
			}
			b.addCopy(rb.Epoch, rb.Rank, rb.To)
		}(rb, b.peer(rb.To))
	}
	wg.Wait()
	close(errs)
	out.down, out.err = down.list(), <-errs
	sort.Slice(out.copied, func(i, j int) bool { return out.copied[i].Rank < out.copied[j].Rank })
	if out.err == nil && len(rebuilds) > 0 {
		ranks := make([]string, len(rebuilds))
		for i, rb := range rebuilds {
			ranks[i] = fmt.Sprintf("%d on %s", rb.Rank, rb.To)
		}
		b.j.event(job.EventStage, job.Event{Message: fmt.Sprintf("rebuilt from parity the shards of epoch %d no live node held: rank %s", epoch, strings.Join(ranks, ", rank "))})
	}
	return out
}

// shardsStaged says how the background staging of the run's shards ended,
// once it has: a loss when a node did not answer, a failure (the run cannot
// go on) when a shard could not be staged otherwise; nil while it goes on or
// when it went well. Job goroutine only.
func (b *clusterBackend) shardsStaged() *nodeLoss {
	if b.staged == nil {
		return nil
	}
	select {
	case s := <-b.staged:
		b.staged = nil
		if loss := b.lostWhileStaged(s.down); loss != nil {
			return loss
		}
		if loss := s.corruptLoss(); loss != nil {
			b.reportCorrupt()
			return loss
		}
		if s.err != nil {
			return &nodeLoss{failed: s.err, at: time.Now()}
		}
	default:
	}
	return nil
}

// shardSources returns the copies that bring each rank's shard of epoch (0: none)
// to the node it will run on (byNode), from nodes of the run, and the shards no
// node of the run holds to rebuild there from their parity groups. A node
// believed to hold the shard fetches it all the same when another node has it:
// its copy may have been damaged since, and a node holding a good copy answers
// at once without copying. The ranks past the epoch's shards, outside the
// communicator the program gave libshoal, get none: they never read one.
func (b *clusterBackend) shardSources(byNode map[string][]int, epoch uint64) ([]epochs.Replica, []epochs.Rebuild, error) {
	if epoch == 0 {
		return nil, nil, nil
	}
	run := names(b.sources())
	b.mu.Lock()
	defer b.mu.Unlock()
	shards := b.book.Ranks(epoch)
	var out []epochs.Replica
	var rebuilds []epochs.Rebuild
	for name, ranks := range byNode {
		for _, r := range ranks {
			if r >= shards {
				continue
			}
			from, have := b.book.Source(epoch, r, name, run)
			if from != "" {
				out = append(out, epochs.Replica{Epoch: epoch, Rank: r, From: from, To: name})
				continue
			}
			if have {
				continue
			}
			rb, ok := b.book.RebuildFor(epoch, r, name, run)
			if !ok {
				return nil, nil, fmt.Errorf("no live node holds rank %d's shard of epoch %d, nor enough of its parity group to rebuild it", r, epoch)
			}
			rebuilds = append(rebuilds, rb)
		}
	}
	sort.Slice(rebuilds, func(i, j int) bool { return rebuilds[i].Rank < rebuilds[j].Rank })
	return out, rebuilds, nil
}

// addCopy records a verified copy a node made.
func (b *clusterBackend) addCopy(epoch uint64, rank int, node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.book.AddCopy(epoch, rank, node)
}

// lossError is a node loss found while preparing a run: the run is not launched
// and the job restarts without the node.
type lossError struct{ loss *nodeLoss }

func (e *lossError) Error() string { return e.loss.String() }

// describeResizeStaging says what was brought where for a restart on another
// count than epoch's nranks, rebuilt of them from parity: "epoch 5's 7 shards are on the resized run's
// nodes: 2 copied there (rank 4 → n1, rank 5 → n2; 25.2 MB), 5 in place".
func describeResizeStaging(epoch uint64, nranks, rebuilt int, s stagedShards) string {
	moved := make([]string, len(s.copied))
	for i, f := range s.copied {
		moved[i] = fmt.Sprintf("rank %d → %s", f.Rank, f.To)
	}
	msg := fmt.Sprintf("epoch %d's %d shards are on the resized run's nodes", epoch, nranks)
	if len(moved) > 0 {
		msg += fmt.Sprintf(": %d copied there (%s; %.1f MB)", len(moved), strings.Join(moved, ", "), float64(s.wire)/1e6)
	}
	if rebuilt > 0 {
		msg += fmt.Sprintf(", %d rebuilt from parity", rebuilt)
	}
	if in := nranks - len(moved) - rebuilt; in > 0 {
		msg += fmt.Sprintf(", %d in place", in)
	}
	return msg
}

// setUp grants job info to the node of peer, which runs ranks of its ranks,
// and copies it the job's files it lacks from this node's cache (those of its
// instruction set, arch), returning those it copied. The grant asks which files the node lacks: a node that
// has them all (the same content hashes) costs one request. The node this
// service runs on holds them already (the submitter uploaded them here).
func (c ClusterConfig) setUp(ctx context.Context, peer Peer, node, arch string, info job.Job, ranks int, meter *stageMeter) ([]job.File, error) {
	req := api.GrantRequest{Job: info.ID, Coordinator: c.Node, Ranks: ranks, TTL: job.Duration(24 * time.Hour), Owner: info.Spec.Owner}
	files := info.Spec.FilesFor(arch)
	if node != c.Node {
		for _, f := range files {
			req.Files = append(req.Files, f.SHA256)
		}
	}
	missing, err := peer.Grant(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	var copied []job.File
	for _, f := range files {
		if slices.Contains(missing, f.SHA256) {
			meter.expect(node, f.Size)
		}
	}
	for _, f := range files {
		if !slices.Contains(missing, f.SHA256) {
			continue
		}
		r, err := os.Open(c.cache().Path(f.SHA256))
		if err != nil {
			return copied, err
		}
		err = peer.PutFile(ctx, f.SHA256, meter.reader(node, r), f.Size)
		r.Close()
		if err != nil {
			return copied, fmt.Errorf("file %s: %w", f.Name, err)
		}
		copied = append(copied, f)
	}
	return copied, nil
}
