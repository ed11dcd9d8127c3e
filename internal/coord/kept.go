package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/shard"
)

// A job run with --durable s3://… has its newest complete epoch kept in an
// object store as well as on its nodes (the job's record says which:
// job.Durable). When every node that held the shards of its newer epochs is
// lost but the cluster is not, the restart takes the kept epoch
// (epochs.RestoreKept): the coordinator reads the epoch's manifest, and each
// node the new placement puts a rank on fetches that rank's shard from the
// store itself, verified against the manifest, into its shard store. The
// restart then goes on as any other, from shards on the ranks' nodes. Where
// that cannot be done (this node's agent or a placed node's has no
// credentials for the store, an object is damaged) the job's events say why
// and the job restarts as it would without the kept epoch.

// keptEpoch is an epoch kept outside the cluster that a restart takes.
type keptEpoch struct {
	job.Durable
	manifest durable.Manifest
}

// keptTimeout bounds the reading of a kept epoch's manifest.
const keptTimeout = 30 * time.Second

// restoreKept returns the job's epoch kept outside the cluster when a restart
// takes it rather than nodes, the epoch the nodes can restore (0: none), and
// its manifest was read: the book then has it, complete, its shards on no
// node yet. nil otherwise, having said in the job's events why a newer kept
// epoch is not taken. Job goroutine only.
func (b *clusterBackend) restoreKept(ctx context.Context, nodes uint64) *keptEpoch {
	kept := b.rec.Job().Durable
	if b.cfg.ReadKept == nil || !epochs.RestoreKept(nodes, kept) || b.keptRefused[kept.Epoch] {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, keptTimeout)
	m, err := b.cfg.ReadKept(rctx, *kept)
	cancel()
	spec := b.j.spec
	switch {
	case errors.Is(err, durable.ErrNoCredentials):
		if !b.keptUnread {
			b.keptUnread = true
			b.j.event(job.EventEpochBad, job.Event{Epoch: kept.Epoch, Message: fmt.Sprintf("epoch %d kept in %s is not read: the agent of the node that coordinates the job, %s, has no credentials for it; restarting without it", kept.Epoch, kept.Location, b.cfg.Node)})
		}
		return nil
	case err == nil && m.Job != spec.ID:
		err = fmt.Errorf("it holds job %s's", m.Job)
	case err == nil && !spec.Elastic() && m.Writer().Ranks != spec.Ranks:
		err = fmt.Errorf("it was written by %d ranks and the job runs %d", m.Writer().Ranks, spec.Ranks)
	}
	if err != nil {
		b.keptRefused[kept.Epoch] = true
		b.j.event(job.EventEpochBad, job.Event{Epoch: kept.Epoch, Message: fmt.Sprintf("warning: epoch %d kept in %s cannot be restarted from (%v); restarting without it", kept.Epoch, kept.Location, err)})
		return nil
	}
	shards := make([]epochs.KeptShard, len(m.Shards))
	for r, s := range m.Shards {
		shards[r] = epochs.KeptShard{Size: s.Size, Sum: s.Checksum}
	}
	b.mu.Lock()
	b.book.AddKept(m.Epoch, shards, m.World, m.CreatedNs)
	b.mu.Unlock()
	return &keptEpoch{Durable: *kept, manifest: m}
}

// fetchKept has the nodes of the run fetch the shards of the kept epoch k from
// its store: each rank's to the node it is placed on, and a shard of a rank
// the run does not have (a run of another count) to the run's nodes in turn;
// the nodes in parallel, each its shards one after another. Each shard
// fetched is counted in the book. A node that did not answer is a loss (a
// [*lossError]); one that cannot read the store, or finds an object missing
// or damaged, ends the relaunch, which is tried again without the kept epoch.
// Job goroutine only.
func (b *clusterBackend) fetchKept(ctx context.Context, k *keptEpoch, byNode map[string][]int) error {
	m := k.manifest
	run := make([]string, 0, len(byNode))
	for n := range byNode {
		run = append(run, n)
	}
	slices.Sort(run)
	toFetch := map[string][]int{}
	for r := range m.Ranks {
		n := run[r%len(run)]
		if r < len(b.placement) {
			n = b.placement[r]
		}
		toFetch[n] = append(toFetch[n], r)
	}
	start := time.Now()
	var mu sync.Mutex
	var down []string
	var failed error
	var wg sync.WaitGroup
	for n, ranks := range toFetch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range ranks {
				req := api.DownloadRequest{Location: k.Location, Endpoint: k.Endpoint, Ranks: m.Ranks, Size: m.Shards[r].Size, Checksum: m.Shards[r].Checksum}
				_, err := b.peer(n).DownloadShard(ctx, shard.Ref{Job: m.Job, Epoch: m.Epoch, Rank: r}, req)
				mu.Lock()
				switch {
				case errors.Is(err, errkind.Unreachable):
					down = append(down, n)
				case err != nil && failed == nil:
					failed = fmt.Errorf("node %s: rank %d's shard: %w", n, r, err)
				case err == nil:
					b.mu.Lock()
					b.book.AddCopy(m.Epoch, r, n)
					b.mu.Unlock()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if loss := b.lostWhileStaged(down); loss != nil {
		return &lossError{loss}
	}
	if failed != nil {
		b.keptRefused[m.Epoch] = true
		why := "its shards could not be fetched"
		if errors.Is(failed, errkind.NotAvailable) {
			why = "a node cannot fetch its shards"
		}
		reason := fmt.Sprintf("epoch %d kept in %s: %s (%v); relaunching without it", m.Epoch, k.Location, why, failed)
		return &lossError{&nodeLoss{corrupt: true, at: time.Now(), reason: reason}}
	}
	b.j.event(job.EventStage, job.Event{Epoch: m.Epoch, Message: fmt.Sprintf("%s of epoch %d fetched from %s by %s (%s)",
		job.Plural(m.Ranks, "shard"), m.Epoch, k.Location, job.Plural(len(toFetch), "node"), job.Seconds(time.Since(start)))})
	return nil
}
