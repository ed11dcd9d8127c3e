package coord

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"shoal/internal/fanout"
)

// defaultProbe is what a node's checkpoint store is asked to take for each of
// its ranks when none of the job's shards is known yet.
const defaultProbe = 1 << 20

// storeFaults probes the checkpoint store of every node of the run that runs
// ranks, asking it to take what the job's shards there would need (the largest
// shard seen, for each rank it runs): a rank that cannot write its shard (disk
// full, I/O errors) fails the way a program that failed by itself does, and
// only this tells the two apart. It returns the nodes whose store failed as a
// loss, and excludes them from the job's placements.
func (b *clusterBackend) storeFaults(ctx context.Context) *nodeLoss {
	id := b.rec.Job().ID
	largest := int64(0)
	b.mu.Lock()
	for _, idx := range b.indexes {
		for _, s := range idx.Shards {
			largest = max(largest, s.Size)
		}
	}
	b.mu.Unlock()
	if largest == 0 {
		largest = defaultProbe
	}
	var (
		mu     sync.Mutex
		faulty = map[string]string{} // node → why its store failed
	)
	counts := b.placement.Counts()
	names := slices.Collect(maps.Keys(counts))
	fanout.Each(len(names), fanout.Limit, func(i int) {
		name := names[i]
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := b.peer(name).Probe(cctx, id, largest*int64(counts[name]))
		if err != nil || res.Error == "" {
			return // a node that does not answer is found silent elsewhere
		}
		mu.Lock()
		faulty[name] = res.Error
		mu.Unlock()
	})
	if len(faulty) == 0 {
		return nil
	}
	nodes := make([]string, 0, len(faulty))
	for n := range faulty {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	whys := make([]string, len(nodes))
	b.mu.Lock()
	for i, n := range nodes {
		b.excluded[n] = true
		whys[i] = faulty[n]
	}
	b.mu.Unlock()
	b.recordAvoid()
	slices.Sort(whys) // one of each, whichever nodes it came from
	return &nodeLoss{nodes: nodes, fault: true, at: time.Now(),
		reason: fmt.Sprintf("cannot store checkpoints: %s", strings.Join(slices.Compact(whys), "; "))}
}
