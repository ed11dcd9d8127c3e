package coord

import (
	"shoal/internal/job"
)

// reportCorrupt says, as a shard-corrupt event each, the copies the book
// found corrupt since it last reported: the node, the epoch, the rank, the
// check that failed and the good copies left. A copy repaired later says so
// again (epochs.RepairNote); an epoch with no good copy of a rank left is passed
// over at the next restart, and that says so too (epochs.LostError).
func (b *clusterBackend) reportCorrupt() {
	b.mu.Lock()
	found := b.corrupt
	b.corrupt = nil
	b.mu.Unlock()
	for _, c := range found {
		b.j.event(job.EventShardCorrupt, job.Event{Epoch: c.Epoch, Rank: job.RankOf(c.Rank), Message: c.Note()})
	}
}

// wasCorrupt reports whether the book last knew node's copy of rank's shard
// of epoch as corrupt.
func (b *clusterBackend) wasCorrupt(epoch uint64, rank int, node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.book.WasCorrupt(epoch, rank, node)
}
