package coord

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"shoal/internal/api"
)

// stage copies the job's files and, for a restart, each rank's shard to the node the
// rank will run on, from a node of the run holding a verified copy, and grants each
// node its ranks; all in parallel.
func (b *clusterBackend) stage(ctx context.Context, info api.Job, byNode map[string][]int, epoch uint64) error {
	fetches, rebuilds, err := b.shardSources(byNode, epoch)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(byNode)+len(fetches)+len(rebuilds))
	var downMu sync.Mutex
	down := map[string]bool{} // nodes that did not answer
	unreachable := func(err error, node string) {
		if errors.Is(err, api.ErrUnreachable) {
			downMu.Lock()
			down[node] = true
			downMu.Unlock()
		}
	}
	var copiedMu sync.Mutex
	copied := map[string][]api.File{} // by node
	for name, ranks := range byNode {
		wg.Add(1)
		go func(name string, peer Peer, nranks int) {
			defer wg.Done()
			var files []api.File
			if name != b.s.cfg.Node { // the submitter uploaded them here
				var err error
				if files, err = b.s.stage(ctx, peer, info); err != nil {
					unreachable(err, name)
					errs <- fmt.Errorf("stage job %s on %s: %w", info.ID, name, err)
					return
				}
			}
			copiedMu.Lock()
			copied[name] = files
			copiedMu.Unlock()
			if err := peer.Grant(ctx, info.ID, b.s.cfg.Node, nranks, 24*time.Hour, info.Spec.Owner); err != nil {
				unreachable(err, name)
				errs <- fmt.Errorf("grant job %s on %s: %w", info.ID, name, err)
			}
		}(name, b.peer(name), len(ranks))
	}
	for _, f := range fetches {
		wg.Add(1)
		go func(f Replica, to Peer, from string) {
			defer wg.Done()
			ref := api.ShardRef{Job: info.ID, Epoch: f.Epoch, Rank: f.Rank}
			if _, err := to.Fetch(ctx, ref, from); err != nil {
				unreachable(err, f.To)
				if errors.Is(err, api.ErrBadGateway) {
					unreachable(api.ErrUnreachable, f.From) // the holder did not answer the copy
				}
				errs <- fmt.Errorf("stage rank %d's shard of epoch %d from %s to %s: %w", f.Rank, f.Epoch, f.From, f.To, err)
				return
			}
			b.addCopy(f.Epoch, f.Rank, f.To)
		}(f, b.peer(f.To), b.nodes[f.From].API)
	}
	for _, rb := range rebuilds {
		wg.Add(1)
		go func(rb Rebuild, to Peer) {
			defer wg.Done()
			ref := api.ShardRef{Job: info.ID, Epoch: rb.Epoch, Rank: rb.Rank}
			req := api.RebuildRequest{Group: rb.Group, M: rb.M, Data: b.apiMembers(rb.Members)}
			for _, r := range rb.Rows {
				req.Parity = append(req.Parity, api.ParitySource{Row: r.Row, From: b.nodes[r.Holder].API})
			}
			if err := to.Rebuild(ctx, ref, req); err != nil {
				unreachable(err, rb.To)
				errs <- fmt.Errorf("rebuild rank %d's shard of epoch %d on %s from its parity group: %w", rb.Rank, rb.Epoch, rb.To, err)
				return
			}
			b.addCopy(rb.Epoch, rb.Rank, rb.To)
		}(rb, b.peer(rb.To))
	}
	wg.Wait()
	close(errs)
	if len(down) > 0 {
		// A node lost while the run was being staged is a node loss like any
		// other: the job is placed again without it.
		lost := make([]string, 0, len(down))
		b.mu.Lock()
		for n := range down {
			b.excluded[n] = true
			lost = append(lost, n)
		}
		b.mu.Unlock()
		b.recordAvoid()
		sort.Strings(lost)
		return &lossError{&nodeLoss{nodes: lost, reason: "its agent did not answer while the run was staged", at: time.Now()}}
	}
	if err := <-errs; err != nil {
		return err
	}
	if len(rebuilds) > 0 {
		ranks := make([]string, len(rebuilds))
		for i, rb := range rebuilds {
			ranks[i] = fmt.Sprintf("%d on %s", rb.Rank, rb.To)
		}
		b.j.event(EventStage, Event{Message: fmt.Sprintf("rebuilt from parity the shards of epoch %d no live node held: rank %s", epoch, strings.Join(ranks, ", rank "))})
	}
	b.j.event(EventStage, Event{Message: describeStaging(copied)})
	return nil
}

// shardSources returns the copies that bring each rank's shard of epoch (0: none)
// to the node it will run on (byNode), from nodes of the run, and the shards no
// node of the run holds to rebuild there from their parity groups. A node
// believed to hold the shard fetches it all the same when another node has it:
// its copy may have been damaged since, and a node holding a good copy answers
// at once without copying.
func (b *clusterBackend) shardSources(byNode map[string][]int, epoch uint64) ([]Replica, []Rebuild, error) {
	if epoch == 0 {
		return nil, nil, nil
	}
	run := names(b.nodes)
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Replica
	var rebuilds []Rebuild
	for name, ranks := range byNode {
		for _, r := range ranks {
			from, have := b.book.Source(epoch, r, name, run)
			if from != "" {
				out = append(out, Replica{Epoch: epoch, Rank: r, From: from, To: name})
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
