package coord

import (
	"context"
	"slices"
	"time"

	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/staging"
)

// stage copies the job's files to the nodes of the run and grants each node its
// ranks, all in parallel, and returns once they are done. For a restart, it then
// brings each rank's shard of epoch to the node the rank will run on (a copy from
// a node of the run holding a verified one, or a rebuild from its parity group)
// in the background, while the job launches: the ranks wait for their shards
// (SHOAL_STAGE_WAIT), and poll ends the run if one cannot be staged. It reports
// the ranks whose shards are being staged, ascending.
//
// An epoch kept outside the cluster that no node holds (kept.go) is fetched
// from its store by the nodes of the run first.
//
// A restart on another count than epoch's (resize) has each of the epoch's
// shards brought to a node of the run (staging.ResizeSources) before the
// launch: the ranks that read them are theirs to agree on, and none waits for
// its own.
func (b *clusterBackend) stage(ctx context.Context, info job.Job, byNode map[string][]int, epoch uint64, resize bool) ([]int, error) {
	if k := b.kept; k != nil && k.Epoch == epoch {
		// The epoch is kept outside the cluster only: its shards come from
		// there to the nodes first, and then are where a restart wants them.
		b.kept = nil
		if err := b.fetchKept(ctx, k, byNode); err != nil {
			return nil, err
		}
	}
	sources := staging.Sources
	if resize {
		sources = staging.ResizeSources
	}
	run := names(b.sources())
	b.mu.Lock()
	fetches, rebuilds, err := sources(&b.book, byNode, epoch, run)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	targets := map[string]staging.Target{}
	for name, ranks := range byNode {
		targets[name] = staging.Target{Peer: b.peer(name), Arch: b.nodes[name].Arch, Ranks: len(ranks)}
	}
	copied, down, err := staging.Files(ctx, b.cfg.origin(), info, targets, func(note string) {
		b.j.event(job.EventStage, job.Event{Message: note})
	})
	if loss := b.lostWhileStaged(down); loss != nil {
		return nil, &lossError{loss}
	}
	if err != nil {
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
		s := staging.Shards(ctx, b.stagingRun(info.ID), epoch, fetches, rebuilds)
		if loss := b.lostWhileStaged(s.Down); loss != nil {
			return nil, &lossError{loss}
		}
		if loss := corruptLoss(s); loss != nil {
			b.reportCorrupt()
			return nil, &lossError{loss}
		}
		if s.Err == nil {
			b.j.event(job.EventStage, job.Event{Message: s.DescribeResize(epoch, written, len(rebuilds))})
		}
		return nil, s.Err
	}
	var ranks []int
	for _, f := range fetches {
		ranks = append(ranks, f.Rank)
	}
	for _, rb := range rebuilds {
		ranks = append(ranks, rb.Rank)
	}
	slices.Sort(ranks)
	staged := make(chan staging.Outcome, 1)
	b.staged = staged
	go func() {
		staged <- staging.Shards(ctx, b.stagingRun(info.ID), epoch, fetches, rebuilds)
		b.tell()
	}()
	return slices.Compact(ranks), nil
}

// stagingRun is the current run as the staging of job id's shards sees it.
func (b *clusterBackend) stagingRun(id string) staging.Run {
	return staging.Run{Job: id, Peer: func(n string) staging.Peer { return b.peer(n) }, Sources: b.sources(), Book: stagingBook{b}, Event: b.j.event}
}

// stagingBook is the backend's epoch book, under its lock, as the staging of
// shards changes it.
type stagingBook struct{ b *clusterBackend }

func (s stagingBook) WasCorrupt(epoch uint64, rank int, node string) bool {
	return s.b.wasCorrupt(epoch, rank, node)
}

// FoundCorrupt keeps the copy found corrupt for reportCorrupt to say.
func (s stagingBook) FoundCorrupt(epoch uint64, rank int, node, check string) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if c, fresh := s.b.book.FoundCorrupt(epoch, rank, node, check); fresh {
		s.b.corrupt = append(s.b.corrupt, c)
	}
}

func (s stagingBook) Copied(c epochs.ShardCopy) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.copyMade(c)
}

// corruptLoss is the end of a run whose shards could not all be staged because
// copies the book counted turned out corrupt when read: not a failure of the
// job, since the book no longer counts them, but a relaunch from the newest
// epoch that is still whole, as a loss relaunches. nil when some other error
// stopped the staging.
func corruptLoss(s staging.Outcome) *nodeLoss {
	reason := s.CorruptReason()
	if reason == "" {
		return nil
	}
	return &nodeLoss{corrupt: true, at: time.Now(), reason: reason}
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
		if loss := b.lostWhileStaged(s.Down); loss != nil {
			return loss
		}
		if loss := corruptLoss(s); loss != nil {
			b.reportCorrupt()
			return loss
		}
		if s.Err != nil {
			return &nodeLoss{failed: s.Err, at: time.Now()}
		}
	default:
	}
	return nil
}

// lossError is a node loss found while preparing a run: the run is not launched
// and the job restarts without the node.
type lossError struct{ loss *nodeLoss }

func (e *lossError) Error() string { return e.loss.String() }
