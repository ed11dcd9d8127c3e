package coord

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/ckpt"
)

// refresh asks every node of the run which verified shards it holds.
func (b *clusterBackend) refresh(ctx context.Context) {
	id := b.cj.snapshot().ID
	var wg sync.WaitGroup
	indexes := map[string][]ShardInfo{} // by node, those that answered
	for name := range b.nodes {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			shards, prog, err := b.peer(name).Shards(cctx, id)
			if err != nil {
				return
			}
			if len(b.placement) > 0 && name == b.placement[0] {
				b.noteProgress(prog, time.Now())
			}
			b.mu.Lock()
			b.lastSeen[name] = time.Now()
			indexes[name] = shards
			b.mu.Unlock()
		}(name)
	}
	wg.Wait()
	// The writers' reports first, so that a copy reported by another node in the same
	// round is checked against them at once, not a round later.
	for name, shards := range indexes {
		b.noteWritten(name, shards)
	}
	// An index replaces what we knew of its node: a copy found corrupt since, or
	// removed, must not be counted or staged from.
	b.mu.Lock()
	for _, ranks := range b.holders {
		for _, nodes := range ranks {
			for name := range indexes {
				delete(nodes, name)
			}
		}
	}
	b.mu.Unlock()
	for name, shards := range indexes {
		for _, s := range b.accept(name, shards) {
			b.addHolder(s.Epoch, s.Rank, name, s.CreatedNs)
		}
	}
	if b.progLast != nil {
		b.j.reportProgress(b.progLast.Fraction)
	}
}

// noteWritten records, from node's index, the checksums of the shards of the current
// run's epochs that node wrote itself (the ranks it runs), and raises the highest
// epoch seen, so that no later run reuses a number that any node holds.
func (b *clusterBackend) noteWritten(node string, shards []ShardInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range shards {
		b.highest = max(b.highest, s.Epoch)
		if s.Epoch >= b.runBase && s.Rank < len(b.placement) && b.placement[s.Rank] == node {
			if b.sums[s.Epoch] == nil {
				b.sums[s.Epoch] = map[int]uint64{}
			}
			if _, ok := b.sums[s.Epoch][s.Rank]; !ok {
				b.sums[s.Epoch][s.Rank] = s.Checksum
			}
		}
	}
}

// accept returns the shards of node's index that are the job's own: copies with the
// checksum the rank's own node wrote (noteWritten) in the run that took the epoch.
func (b *clusterBackend) accept(node string, shards []ShardInfo) []ShardInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ShardInfo
	for _, s := range shards {
		if sum, ok := b.sums[s.Epoch][s.Rank]; ok && sum == s.Checksum {
			out = append(out, s)
		}
	}
	return out
}

// want is how many verified copies make a shard durable: the job's redundancy, or
// every node when there are fewer.
func (b *clusterBackend) want() int { return min(b.redundancy, len(b.nodes)) }

// replicate starts a copy of every shard that has fewer copies than wanted, to the
// next nodes after its holder in name order. Copies run in the background: the ranks
// never wait for them.
func (b *clusterBackend) replicate(ctx context.Context) {
	names := make([]string, 0, len(b.nodes))
	for n := range b.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	id := b.cj.snapshot().ID
	b.mu.Lock()
	defer b.mu.Unlock()
	for epoch, ranks := range b.holders {
		if b.complete[epoch] || epoch+2 < b.highest {
			continue
		}
		for rank, holders := range ranks {
			var from string
			for h := range holders {
				if _, ok := b.nodes[h]; ok {
					from = h
				}
			}
			// Copies under way count: a large shard takes longer than a poll to
			// copy, and each poll would otherwise start one more.
			copies := len(holders)
			for _, n := range names {
				if !holders[n] && b.inflight[shardCopy{epoch, rank, n}] {
					copies++
				}
			}
			if from == "" || copies >= b.want() {
				continue
			}
			start := sort.SearchStrings(names, from)
			for k := 1; k < len(names) && copies < b.want(); k++ {
				to := names[(start+k)%len(names)]
				key := shardCopy{epoch, rank, to}
				if holders[to] || b.inflight[key] {
					continue
				}
				b.inflight[key] = true
				go func(to, from string, key shardCopy, epoch uint64, rank int) {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
					defer cancel()
					err := b.peer(to).Fetch(cctx, api.ShardRef{Job: id, Epoch: epoch, Rank: rank}, b.nodes[from].API)
					if err == nil {
						b.addHolder(epoch, rank, to, 0)
					}
					b.mu.Lock()
					delete(b.inflight, key)
					b.mu.Unlock()
				}(to, from, key, epoch, rank)
				break
			}
		}
	}
}

// shardCopy is a copy of rank's shard of epoch on node.
type shardCopy struct {
	epoch uint64
	rank  int
	node  string
}

// markComplete records the epochs whose every rank has enough copies, and removes
// shards older than the two newest complete epochs from every node.
func (b *clusterBackend) markComplete(ctx context.Context) {
	n := b.j.spec.NRanks
	b.mu.Lock()
	var fresh []uint64
	for epoch, ranks := range b.holders {
		if b.complete[epoch] || len(ranks) < n {
			continue
		}
		ok := true
		for r := 0; r < n && ok; r++ {
			ok = len(ranks[r]) >= b.want()
		}
		if ok {
			b.complete[epoch] = true
			fresh = append(fresh, epoch)
		}
	}
	var all []uint64
	for e := range b.complete {
		all = append(all, e)
	}
	b.mu.Unlock()
	sort.Slice(fresh, func(i, j int) bool { return fresh[i] < fresh[j] })
	if len(fresh) > 0 {
		b.mu.Lock()
		if c := b.created[fresh[len(fresh)-1]]; c != 0 {
			b.ckptCost = max(time.Since(time.Unix(0, int64(c))), 0)
		}
		b.mu.Unlock()
	}
	for _, e := range fresh {
		b.cj.update(func(a *api.Job) { a.Epoch = max(a.Epoch, e) })
		b.j.event(EventEpoch, Event{Epoch: e, Message: fmt.Sprintf("epoch %d complete (%d shards, %d copies each)", e, n, b.want())})
	}
	if len(fresh) > 0 {
		defer b.writeManifest()
	}
	if len(fresh) == 0 || len(all) < 3 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i] > all[j] })
	keep := all[1]
	id := b.cj.snapshot().ID
	for name := range b.nodes {
		go b.peer(name).RemoveShardsBefore(context.Background(), id, keep)
	}
	b.mu.Lock()
	for e := range b.holders {
		if e < keep {
			delete(b.holders, e)
			delete(b.complete, e)
		}
	}
	for e := range b.sums {
		if e < keep {
			delete(b.sums, e)
		}
	}
	b.mu.Unlock()
}

// writeManifest records the complete epochs the job keeps (the two newest) in the
// coordinator's manifest, DATA/coord/JOB/manifest, in the format of shard-format.md.
func (b *clusterBackend) writeManifest() {
	b.mu.Lock()
	var entries []ckpt.ManifestEntry
	for e := range b.complete {
		entries = append(entries, ckpt.ManifestEntry{Epoch: e, NRanks: b.j.spec.NRanks, CreatedNs: b.created[e]})
	}
	b.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Epoch < entries[j].Epoch })
	dir := ckpt.JobDir{Root: b.j.cfg.RunRoot, Job: b.j.spec.ID}
	if err := dir.WriteManifest(entries); err != nil {
		b.j.event(EventEpochBad, Event{Message: fmt.Sprintf("warning: recording the complete epochs: %v", err)})
	}
}
