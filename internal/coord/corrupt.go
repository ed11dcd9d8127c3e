package coord

import (
	"fmt"
	"strings"

	"shoal/internal/epochs"
	"shoal/internal/job"
)

// reportCorrupt says, as a shard-corrupt event each, the copies the book
// found corrupt since it last reported: the node, the epoch, the rank, the
// check that failed and the good copies left. A copy repaired later says so
// again (repairNote); an epoch with no good copy of a rank left is passed
// over at the next restart, and that says so too (epochs.LostError).
func (b *clusterBackend) reportCorrupt() {
	b.mu.Lock()
	found := b.corrupt
	b.corrupt = nil
	b.mu.Unlock()
	for _, c := range found {
		b.j.event(job.EventShardCorrupt, job.Event{Epoch: c.Epoch, Rank: job.RankOf(c.Rank), Message: corruptNote(c)})
	}
}

// corruptNote says that c is corrupt and what holds the shard besides.
func corruptNote(c epochs.CorruptCopy) string {
	what := fmt.Sprintf("node %s: rank %d's shard of epoch %d is corrupt (%s)", c.Node, c.Rank, c.Epoch, c.Error)
	if len(c.Good) == 0 {
		return what + "; no good copy of it is left: a restart cannot use epoch " + fmt.Sprint(c.Epoch)
	}
	return fmt.Sprintf("%s; not used: a good copy is on %s", what, strings.Join(c.Good, ", "))
}

// repairNote says that node's corrupt copy of rank's shard of epoch was
// replaced by a copy of from's.
func repairNote(epoch uint64, rank int, node, from string) string {
	return fmt.Sprintf("node %s: rank %d's shard of epoch %d, corrupt there, repaired from %s's copy", node, rank, epoch, from)
}

// wasCorrupt reports whether the book last knew node's copy of rank's shard
// of epoch as corrupt.
func (b *clusterBackend) wasCorrupt(epoch uint64, rank int, node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.book.WasCorrupt(epoch, rank, node)
}
