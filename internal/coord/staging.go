package coord

import (
	"context"
	"fmt"
	"sync"
	"time"

	"shoal/internal/api"
)

// stage copies the job's files and, for a restart, each rank's shard to the node the
// rank will run on, from any live node holding a verified copy; all in parallel.
func (b *clusterBackend) stage(ctx context.Context, info api.Job, byNode map[string][]int, epoch uint64) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(byNode)*(1+info.Spec.Ranks))
	var copiedMu sync.Mutex
	copied := map[string][]api.File{} // by node
	for name, ranks := range byNode {
		peer := b.peer(name)
		wg.Add(1)
		go func(name string, nranks int) {
			defer wg.Done()
			var files []api.File
			if name != b.s.cfg.Node { // the submitter uploaded them here
				var err error
				if files, err = b.s.stage(ctx, peer, info); err != nil {
					errs <- fmt.Errorf("stage job %s on %s: %w", info.ID, name, err)
					return
				}
			}
			copiedMu.Lock()
			copied[name] = files
			copiedMu.Unlock()
			if err := peer.Grant(ctx, info.ID, b.s.cfg.Node, nranks, 24*time.Hour); err != nil {
				errs <- fmt.Errorf("grant job %s on %s: %w", info.ID, name, err)
			}
		}(name, len(ranks))
		if epoch == 0 {
			continue
		}
		for _, r := range ranks {
			b.mu.Lock()
			holders := b.holders[epoch][r]
			var from string
			have := holders[name]
			for h := range holders {
				if _, ok := b.nodes[h]; ok && h != name {
					from = h
				}
			}
			b.mu.Unlock()
			// Fetch even when the node is believed to hold the shard: its copy may
			// have been damaged since, and a node holding a good copy answers at
			// once without copying.
			if from == "" && have {
				continue
			}
			if from == "" {
				return fmt.Errorf("no live node holds rank %d's shard of epoch %d", r, epoch)
			}
			wg.Add(1)
			go func(name, from string, r int) {
				defer wg.Done()
				ref := api.ShardRef{Job: info.ID, Epoch: epoch, Rank: r}
				if err := b.peer(name).Fetch(ctx, ref, b.nodes[from].API); err != nil {
					errs <- fmt.Errorf("stage rank %d's shard of epoch %d from %s to %s: %w", r, epoch, from, name, err)
					return
				}
				b.addHolder(epoch, r, name, 0)
			}(name, from, r)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	b.j.event(EventStage, Event{Message: describeStaging(copied)})
	return nil
}

func (b *clusterBackend) addHolder(epoch uint64, rank int, node string, created uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holders[epoch] == nil {
		b.holders[epoch] = map[int]map[string]bool{}
	}
	if b.holders[epoch][rank] == nil {
		b.holders[epoch][rank] = map[string]bool{}
	}
	b.holders[epoch][rank][node] = true
	if created != 0 {
		b.created[epoch] = created
	}
	b.highest = max(b.highest, epoch)
}
