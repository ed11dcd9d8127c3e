package coord

import (
	"sort"
	"time"

	"shoal/internal/shard"

	"shoal/internal/job"
	"shoal/internal/place"
)

// A run whose ranks stopped making snapshot calls (docs/architecture.md, "A
// rank that stops"): the nodes report their silent ranks in their indexes,
// and job.Hung decides at every poll.

// nodeIndex is a node's index as the run's watch last received it.
type nodeIndex struct {
	idx shard.Index
	at  time.Time // when it was received (this node's clock)
}

// silentRanks gathers the silent ranks of the current run, launched at
// launch with placement, from the nodes' latest indexes, each silence as of
// now: the silence a node measured plus the time since its index came. A
// silence that began before the launch is an earlier run's rank (a process
// not yet reaped, its file not yet replaced), and so is a rank a node reports
// that the run does not place there; neither counts. Pure.
func silentRanks(indexes map[string]nodeIndex, placement place.Placement, launch, now time.Time) []job.Silent {
	var out []job.Silent
	for node, ni := range indexes {
		for _, s := range ni.idx.Silent {
			if s.Rank < 0 || s.Rank >= len(placement) || placement[s.Rank] != node ||
				ni.at.Add(-time.Duration(s.For)).Before(launch) {
				continue
			}
			s.Node = node
			s.For += job.Duration(max(now.Sub(ni.at), 0))
			out = append(out, s)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Rank < out[b].Rank })
	return out
}

// checkHung returns the loss that ends the current run when it is hung, or
// nil. A run held at a checkpoint for a move or a hand-over makes no calls on
// purpose, and is not weighed (its ranks' alive files say hold, too).
func (b *clusterBackend) checkHung(now time.Time) *nodeLoss {
	if b.pending != nil || b.handed || b.j.spec.HangAfter == job.HangOff {
		return nil
	}
	b.mu.Lock()
	silent := silentRanks(b.received, b.placement, b.launchAt, now)
	b.mu.Unlock()
	h, ok := job.Hung(silent, b.j.spec.HangAfter)
	if !ok {
		return nil
	}
	return &nodeLoss{nodes: []string{h.Node}, hung: &h, reason: h.String(), at: now.Add(-time.Duration(h.For))}
}
