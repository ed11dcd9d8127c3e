package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/fanout"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/staging"
)

// indexTimeout bounds one request for a node's index outside the watch.
const indexTimeout = 3 * time.Second

// readIndex asks p which verified shards of job id its node holds, once,
// within indexTimeout: a refresh's question, and a takeover's fence's.
func readIndex(ctx context.Context, p Peer, id string) (shard.Index, error) {
	ctx, cancel := context.WithTimeout(ctx, indexTimeout)
	defer cancel()
	return p.Shards(ctx, id, "", 0)
}

// refresh asks every node of the run, fanout.Limit at a time, which verified
// shards it holds, and records the answers in the book (those of the nodes
// that do not answer are left as they were); a node a takeover's fence read
// right after its revoke is not asked again the first time. choose and finish
// use it; during a run, the watch keeps the indexes up to date instead (see
// watch).
func (b *clusterBackend) refresh(ctx context.Context) {
	id := b.rec.Job().ID
	rank0 := ""
	if len(b.placement) > 0 {
		rank0 = b.placement[0]
	}
	var mu sync.Mutex
	indexes := map[string]shard.Index{} // by node, those that answered
	// A taken-over job's run is every live node.
	nodes := names(b.nodes)
	peers := make([]Peer, len(nodes))
	for i, name := range nodes {
		peers[i] = b.peer(name)
	}
	fenced := b.fenced
	b.fenced = nil
	fanout.Each(len(nodes), fanout.Limit, func(i int) {
		name := nodes[i]
		f, ok := fenced[name]
		idx, at := f.idx, f.at
		if !ok {
			var err error
			if idx, err = readIndex(ctx, peers[i], id); err != nil {
				b.noAnswer(name, time.Now(), err)
				return
			}
			at = time.Now()
		}
		b.answered(name, at)
		if name == rank0 {
			b.noteProgress(idx.Progress, at)
		}
		b.mu.Lock()
		b.indexes[name] = idx
		b.made.IndexTaken(name)
		b.mu.Unlock()
		mu.Lock()
		indexes[name] = idx
		mu.Unlock()
	})
	b.mu.Lock()
	b.indexBook(indexes)
	b.mu.Unlock()
	b.reportProgress()
}

// reportProgress reports the progress of the run's rank 0, as last seen.
func (b *clusterBackend) reportProgress() {
	b.mu.Lock()
	p := b.progLast
	b.mu.Unlock()
	if p != nil {
		b.j.reportProgress(p.Fraction)
	}
}

// reportInterval passes on the checkpoint interval rank 0's node reports: to
// the job's record when it is new or announced anew (see job.reportInterval).
func (b *clusterBackend) reportInterval() {
	if len(b.placement) == 0 {
		return
	}
	b.mu.Lock()
	idx, ok := b.indexes[b.placement[0]]
	b.mu.Unlock()
	if !ok || idx.Interval == nil {
		return
	}
	iv := *idx.Interval
	if iv.Auto {
		iv.Record = b.mtbfRecord
	}
	if b.j.reportInterval(&iv) || b.rec.Job().Interval == nil {
		b.rec.Update(func(a *job.Job) { a.Interval = &iv })
	}
}

// replicate starts the copies that bring every shard to the copies wanted (see
// [epochs.Book.Replicas]). Copies run in the background: the ranks never wait for
// them. A copy under way counts: a large shard takes longer than a poll to copy,
// and each poll would otherwise start one more.
func (b *clusterBackend) replicate(ctx context.Context) {
	id := b.rec.Job().ID
	b.mu.Lock()
	copies := b.book.Replicas(names(b.nodes), func(epoch uint64, rank int, node string) bool {
		return b.inflight[epochs.ShardCopy{Epoch: epoch, Rank: rank, Node: node}]
	})
	for _, c := range copies {
		b.inflight[epochs.ShardCopy{Epoch: c.Epoch, Rank: c.Rank, Node: c.To}] = true
	}
	run := names(b.nodes)
	b.book.PlanGroups(run, b.placement)
	encodes := b.book.Encodes(run, func(epoch uint64, group, row int) bool {
		return b.encoding[epochs.ParityCopy{Epoch: epoch, Group: group, Row: row}]
	})
	for _, e := range encodes {
		for _, row := range e.Rows() {
			b.encoding[epochs.ParityCopy{Epoch: e.Epoch, Group: e.Group, Row: row.Row}] = true
		}
	}
	b.mu.Unlock()
	for _, e := range encodes {
		go b.encode(ctx, id, e)
	}
	for _, c := range copies {
		go func(c epochs.Replica, to Peer, from string) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			corrupt := b.wasCorrupt(c.Epoch, c.Rank, c.To)
			f, err := to.Fetch(cctx, shard.Ref{Job: id, Epoch: c.Epoch, Rank: c.Rank}, from)
			if err == nil && corrupt {
				b.j.event(job.EventShardCorrupt, job.Event{Epoch: c.Epoch, Rank: job.RankOf(c.Rank), Message: epochs.RepairNote(c.Epoch, c.Rank, c.To, c.From)})
			}
			b.mu.Lock()
			if err == nil {
				b.copyMade(epochs.ShardCopy{Epoch: c.Epoch, Rank: c.Rank, Node: c.To})
				if f.Copied {
					w := b.wire[c.Epoch]
					sent := f.Shard.Size
					if f.Changed > 0 {
						sent = f.Changed
					}
					w.raw, w.sent, w.wire = w.raw+f.Shard.Size, w.sent+sent, w.wire+f.Wire
					b.wire[c.Epoch] = w
				}
			}
			delete(b.inflight, epochs.ShardCopy{Epoch: c.Epoch, Rank: c.Rank, Node: c.To})
			b.mu.Unlock()
			b.copyEnded(err)
		}(c, b.peer(c.To), b.nodes[c.From].API)
	}
}

// encode has node e.To compute parity row e.Row of group e.Group of epoch
// e.Epoch and push the rows of e.Push to their nodes, and records each row
// once it is stored. A row whose push failed is asked for again at a later
// poll.
func (b *clusterBackend) encode(ctx context.Context, job string, e epochs.Encode) {
	req := api.EncodeRequest{Group: e.Group, Row: e.Row, M: e.M, Data: staging.Members(e.Members, b.sources())}
	for _, p := range e.Push {
		req.Push = append(req.Push, api.ParityPush{Row: p.Row, To: b.nodes[p.To].API})
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	res, err := b.peer(e.To).Encode(cctx, job, e.Epoch, req)
	cancel()
	b.mu.Lock()
	if err == nil {
		b.rowMade(epochs.RowCopy{ParityCopy: epochs.ParityCopy{Epoch: e.Epoch, Group: e.Group, Row: e.Row}, Node: e.To})
		for i, p := range e.Push {
			switch {
			case i >= len(res.Pushed) || res.Pushed[i].Row != p.Row:
				err = fmt.Errorf("%s answered no push of parity row %d", e.To, p.Row)
			case res.Pushed[i].Error != "":
				err = fmt.Errorf("parity row %d pushed to %s: %s", p.Row, p.To, res.Pushed[i].Error)
			default:
				b.rowMade(epochs.RowCopy{ParityCopy: epochs.ParityCopy{Epoch: e.Epoch, Group: e.Group, Row: p.Row}, Node: p.To})
			}
		}
	}
	for _, row := range e.Rows() {
		delete(b.encoding, epochs.ParityCopy{Epoch: e.Epoch, Group: e.Group, Row: row.Row})
	}
	b.mu.Unlock()
	b.copyEnded(err)
}

// copyMade records in the book a copy made, and keeps it there until its
// holder's index settles it (see epochs.Ledger). The caller holds mu.
func (b *clusterBackend) copyMade(c epochs.ShardCopy) {
	b.book.AddCopy(c.Epoch, c.Rank, c.Node)
	b.made.Copy(c)
	b.copiedTo[c.Node] = true
}

// rowMade is copyMade for a parity row.
func (b *clusterBackend) rowMade(c epochs.RowCopy) {
	b.book.AddRow(c.Epoch, c.Group, c.Row, c.Node)
	b.made.Row(c)
	b.copiedTo[c.Node] = true
}

// holders returns the live nodes that may hold something of the job: those
// that run its ranks, those whose last index showed any of its shards, parity
// rows or corrupt copies, and those a copy or row was made to. The other live
// nodes were never given anything of it: what removes or revokes the job asks
// these alone, as many as the job touched rather than the cluster's size. A
// node that holds something none of these shows (its index never read) is
// left to its own retention, which removes what the job's book no longer
// keeps (internal/retention). The caller does not hold mu.
func (b *clusterBackend) holders() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ranks := b.placement.Counts()
	var out []string
	for name := range b.nodes {
		idx := b.indexes[name]
		if ranks[name] > 0 || b.copiedTo[name] || len(idx.Shards)+len(idx.Parity)+len(idx.Bad) > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// askHolders calls f for every node of holders, fanout.Limit at a time, in the
// background.
func (b *clusterBackend) askHolders(f func(Peer)) {
	names := b.holders()
	peers := make([]Peer, len(names))
	for i, name := range names {
		peers[i] = b.peer(name)
	}
	go fanout.Each(len(peers), fanout.Limit, func(i int) { f(peers[i]) })
}

// copyEnded wakes the job's loop once a copy or a parity row is done: at once
// when it was made (the epoch may be complete now), after a pause when it
// failed, so that one failing quickly (its source just lost the shard) is not
// tried again in a spin.
func (b *clusterBackend) copyEnded(err error) {
	if err == nil {
		b.tell()
	} else {
		time.AfterFunc(copyRetry, b.tell)
	}
}

// wireBytes is what the copies of an epoch's shards moved: their size, the
// bytes their senders sent (fewer when some went as their changes since an
// earlier epoch), and the bytes that crossed the network (fewer again when a
// sender compressed them).
type wireBytes struct{ raw, sent, wire int64 }

// copiesNote says how much smaller the epoch's copies crossed the
// network, when some went as their changes or compressed; "" otherwise. The
// caller holds mu; the epoch's count is dropped.
func (b *clusterBackend) copiesNote(epoch uint64) string {
	w := b.wire[epoch]
	delete(b.wire, epoch)
	note := ""
	if w.sent < w.raw {
		note += fmt.Sprintf("; copies sent as changes: %.1f MB as %.1f MB", float64(w.raw)/1e6, float64(w.sent)/1e6)
	}
	if w.wire > 0 && w.wire < w.sent {
		note += fmt.Sprintf("; copies sent compressed: %.1f MB as %.1f MB", float64(w.sent)/1e6, float64(w.wire)/1e6)
	}
	return note
}

// epochStats is what epoch's checkpoint cost, for its epoch event. The
// caller holds mu, before copiesNote drops the epoch's count.
func (b *clusterBackend) epochStats(epoch uint64) job.EpochStats {
	var s job.EpochStats
	if c := b.book.CreatedNs(epoch); c != 0 {
		s.Taken = time.Unix(0, int64(c))
	}
	if e := b.book.Epochs[epoch]; e != nil {
		for _, sh := range e.Shards {
			s.Bytes += sh.Size
		}
	}
	w := b.wire[epoch]
	s.Copied, s.Sent, s.Wire = w.raw, w.sent, w.wire
	if s.Wire == 0 {
		s.Wire = s.Sent // a sender that does not say sent it as it was
	}
	return s
}

// markComplete records the epochs whose every rank has enough copies, and removes
// shards older than the complete epochs a restart may use from every node. When the
// complete epochs change, the manifest is rewritten and onBook told.
func (b *clusterBackend) markComplete(ctx context.Context) {
	b.mu.Lock()
	want := b.book.Want(len(b.nodes))
	fresh := b.book.MarkComplete(len(b.nodes))
	how := fmt.Sprintf("%d copies each", want)
	if b.book.ParityOn(len(b.nodes)) {
		p := b.book.Parity
		how = fmt.Sprintf("one copy each, rs:%d+%d parity", p.K, p.M)
	}
	if len(fresh) == 0 {
		b.mu.Unlock()
		return
	}
	if b.book.Pin != 0 && time.Now().After(b.pinUntil) {
		b.book.Pin = 0 // lapsed, or a book taken over from another coordinator
	}
	keep, pruned := b.book.Prune()
	if c := b.book.CreatedNs(fresh[len(fresh)-1]); c != 0 {
		b.ckptCost = max(time.Since(time.Unix(0, int64(c))), 0)
	}
	var book epochs.Book
	if b.onBook != nil {
		book = b.book.Clone()
	}
	notes, stats := make([]string, len(fresh)), make([]job.EpochStats, len(fresh))
	shards, covers := make([]int, len(fresh)), make([]string, len(fresh))
	for i, e := range fresh {
		stats[i] = b.epochStats(e)
		notes[i], shards[i], covers[i] = b.copiesNote(e), b.book.Ranks(e), b.book.CoverageNote(e)
	}
	for e := range b.wire {
		if e < fresh[0] {
			delete(b.wire, e) // an epoch that will not complete
		}
	}
	b.mu.Unlock()
	for i, e := range fresh {
		b.rec.Update(func(a *job.Job) { a.Epoch = max(a.Epoch, e) })
		data, _ := json.Marshal(stats[i])
		b.j.event(job.EventEpoch, job.Event{Epoch: e, Data: data, Message: fmt.Sprintf("epoch %d complete (%d shards, %s%s)", e, shards[i], how, notes[i])})
		if covers[i] != "" && shards[i] != b.covered {
			b.covered = shards[i]
			b.j.event(job.EventEpoch, job.Event{Epoch: e, Message: covers[i]})
		}
	}
	b.writeManifest()
	if b.onBook != nil {
		b.onBook(book)
	}
	if b.keep != nil {
		b.keep.completed()
	}
	if pruned {
		id := b.rec.Job().ID
		b.askHolders(func(p Peer) { p.RemoveShardsBefore(context.Background(), id, keep) })
	}
}

// writeManifest records the complete epochs the job keeps (see KeepFrom) in the
// coordinator's manifest, DATA/coord/JOB/manifest, in the format of shard-format.md.
func (b *clusterBackend) writeManifest() {
	b.mu.Lock()
	var entries []jobdir.ManifestEntry
	for _, e := range b.book.Complete() {
		entries = append(entries, jobdir.ManifestEntry{Epoch: e, NRanks: b.book.Ranks(e), CreatedNs: b.book.CreatedNs(e)})
	}
	b.mu.Unlock()
	dir := jobdir.Dir{Root: b.j.cfg.RunRoot, Job: b.j.spec.ID}
	// A coordinator that has just taken the job over has not run it yet: the
	// directory may not be there.
	err := runDir(dir.Root, dir.Job)
	if err == nil {
		err = dir.WriteManifest(entries)
	}
	if err != nil {
		b.j.event(job.EventEpochBad, job.Event{Message: fmt.Sprintf("warning: recording the complete epochs: %v", err)})
	}
}
