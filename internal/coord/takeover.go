package coord

import (
	"context"
	"maps"
	"slices"
	"time"

	"shoal/internal/fanout"
	"shoal/internal/place"
)

// seedRun gives a backend taking a job over the previous coordinator's run: its
// placement (node → ranks), so that the shards that run wrote are counted and the
// restart line says where its ranks went, and the nodes not to place on until
// membership declares them gone: those the previous run found lost (avoid) and
// the lost coordinator's. Which nodes to ask and to fence, the backend finds from
// the live nodes (choose).
func (b *clusterBackend) seedRun(byNode map[string][]int, avoid []string, lost string) {
	b.mu.Lock()
	for _, n := range avoid {
		b.excluded[n] = true
	}
	if lost != "" {
		b.excluded[lost] = true
	}
	b.mu.Unlock()
	b.recordAvoid()
	n := 0
	for _, ranks := range byNode {
		n += len(ranks)
	}
	p := make(place.Placement, n) // an elastic job's last count, not its spec's
	for name, ranks := range byNode {
		for _, r := range ranks {
			if r < 0 || r >= len(p) {
				return // not this job's placement: start without one
			}
			p[r] = name
		}
	}
	for _, n := range p {
		if n == "" {
			return
		}
	}
	b.placement = p
}

// fenceAll revokes the job on every live node, in parallel and bounded
// (fanout.Limit at a time): a new coordinator stops the old run's ranks
// before it reads what the nodes hold, so that no rank of the old run writes
// on while the epoch to restart from is chosen.
func (b *clusterBackend) fenceAll(ctx context.Context) {
	live, err := b.liveNodes(ctx, "")
	if err != nil {
		return
	}
	id := b.rec.Job().ID
	nodes := slices.Collect(maps.Values(live))
	fanout.Each(len(nodes), fanout.Limit, func(i int) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		b.cfg.Peer(nodes[i]).Revoke(cctx, id)
	})
}
