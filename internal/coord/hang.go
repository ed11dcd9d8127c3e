package coord

import (
	"time"

	"shoal/internal/job"
	"shoal/internal/shard"
)

// A run whose ranks stopped making snapshot calls (docs/architecture.md, "A
// rank that stops"): the nodes report their silent ranks in their indexes,
// and job.Hung decides at every poll.

// nodeIndex is a node's index as the run's watch last received it.
type nodeIndex struct {
	idx shard.Index
	at  time.Time // when it was received (this node's clock)
}

// checkHung returns the loss that ends the current run when it is hung, or
// nil. A run held at a checkpoint for a move or a hand-over makes no calls on
// purpose, and is not weighed (its ranks' alive files say hold, too).
func (b *clusterBackend) checkHung(now time.Time) *nodeLoss {
	if b.pending != nil || b.handed || b.j.spec.HangAfter == job.HangOff {
		return nil
	}
	b.mu.Lock()
	heard := make(map[string]job.Heard, len(b.received))
	for node, ni := range b.received {
		heard[node] = job.Heard{Silent: ni.idx.Silent, At: ni.at}
	}
	placement, launch := b.placement, b.launchAt
	b.mu.Unlock()
	silent := job.Silences(heard, placement, launch, now)
	h, ok := job.Hung(silent, b.j.spec.HangAfter)
	if !ok {
		return nil
	}
	return &nodeLoss{nodes: []string{h.Node}, hung: &h, reason: h.String(), at: now.Add(-time.Duration(h.For))}
}
