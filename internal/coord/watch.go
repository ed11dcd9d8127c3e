package coord

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"shoal/internal/epochs"
	"shoal/internal/shard"
)

// How the backend follows the shard indexes of a run's nodes (see watch).
const (
	// watchWait is how long a node holds a request for its index when nothing
	// changes (at most api.MaxShardWait).
	watchWait = 30 * time.Second
	// answerGrace is how much longer than its wait a request may take to come
	// back before it counts as failed.
	answerGrace = 5 * time.Second
	// firstProgressWait is how often rank 0's node is asked while the run has
	// not reported progress yet: the first report of a run measures its restart
	// (see noteProgress), and a report within the percent the last run reached
	// does not change the index's tag.
	firstProgressWait = time.Second
	// firstProgressWindow bounds that: a program that never reports progress
	// is not asked every second for the whole run.
	firstProgressWindow = 2 * time.Minute
	// watchRetryFirst is the pause after a request that failed when the one
	// before it was answered: a long poll broken by its agent's death is tried
	// again at once, and the refused connection that follows tells a killed
	// agent from a silent one (see checkRefused). watchRetry is the next pause,
	// doubled up to watchRetryMax while the node keeps failing.
	watchRetryFirst = 20 * time.Millisecond
	watchRetry      = 500 * time.Millisecond
	watchRetryMax   = 2 * time.Second
	// copyRetry is how long after a failed copy of a shard it is tried again.
	copyRetry = time.Second
)

// contact is what the backend knows of reaching one node's agent.
type contact struct {
	seen   time.Time // its last answer
	failed time.Time // the first failed request since (zero: none)
	// refused is when a connection to its agent was refused since its last
	// answer (zero: none): its host answers for it, and no agent listens.
	refused time.Time
	probed  time.Time // when a probe (see probe) last started
	probe   bool      // a probe is under way
}

// answered records an answer of node at t.
func (b *clusterBackend) answered(node string, t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.contacts[node]
	c.seen, c.failed, c.refused = t, time.Time{}, time.Time{}
	b.contacts[node] = c
}

// noAnswer records a request to node that failed at t with err, and reports
// whether the node's host refused the connection.
func (b *clusterBackend) noAnswer(node string, t time.Time, err error) bool {
	refused := errors.Is(err, syscall.ECONNREFUSED)
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.contacts[node]
	if c.failed.IsZero() {
		c.failed = t
	}
	if refused && c.refused.IsZero() {
		c.refused = t
	}
	b.contacts[node] = c
	return refused
}

// runWatch is the following of one run's nodes: its goroutines stop when
// cancel is called, and wg counts them.
type runWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	job    string
	rank0  string          // the node of the run's rank 0, whose index carries progress
	nodes  map[string]bool // the nodes followed (job goroutine only)
}

// watch follows the nodes of the run prepare readied until stop is called:
// one goroutine per node keeps a long poll on the node's index of the job
// (GET /v1/shards/{job}?wait=&known=), keeps its latest answer, and sends on
// news when one changed, so that poll does its book-keeping then and only
// then. While nothing changes this costs one outstanding request per node. A
// node that is cut off does not answer until its request times out; whether it
// is lost is for membership to say (see checkMembers). stop cancels the
// watch and returns at once; settleWatch waits for its goroutines.
//
// The nodes followed are those that may hold something of the job (holders:
// the run's ranks, what earlier indexes showed, copies made), and each node a
// copy or parity row is made to during the run from then on (followCopied): a
// live node the job never touched has nothing to show, and following every
// one kept a request per node of the cluster outstanding for each running
// job, 127 for a 4-rank job on 128 hosts.
func (b *clusterBackend) watch(ctx context.Context) (news <-chan struct{}, stop func()) {
	b.settleWatch()
	w := &runWatch{job: b.rec.Job().ID, nodes: map[string]bool{}}
	w.ctx, w.cancel = context.WithCancel(ctx)
	if len(b.placement) > 0 {
		w.rank0 = b.placement[0]
	}
	b.mu.Lock()
	b.run = w
	b.mu.Unlock()
	clear(b.doubted) // membership's doubts during this run
	for _, name := range b.holders() {
		b.follow(w, name)
	}
	return b.news, func() {
		w.cancel()
		b.mu.Lock()
		if b.run == w {
			b.run = nil
		}
		b.mu.Unlock()
		b.stopped = w
	}
}

// settleWatch returns once every goroutine of the last watch stopped has
// ended, so that none of its answers lands after what the caller reads of
// the nodes' indexes: called before a relaunch is chosen, before the next
// watch, and before the job's end clears its nodes. A watch's stop only
// cancels it: at a run's end, 128 long polls took 25 to 60 ms to come back
// cancelled on a loaded coordinator, and the job's end waited for them.
func (b *clusterBackend) settleWatch() {
	if w := b.stopped; w != nil {
		w.wg.Wait()
		b.stopped = nil
	}
}

// follow starts following node in w, unless w follows it already or it is not
// a live node of the run. Called from the job's goroutine, which stops w too:
// never during stop's wait.
func (b *clusterBackend) follow(w *runWatch, node string) {
	if w.nodes[node] || w.ctx.Err() != nil {
		return
	}
	if _, ok := b.nodes[node]; !ok {
		return
	}
	w.nodes[node] = true
	w.wg.Add(1)
	go func(p Peer) {
		defer w.wg.Done()
		b.watchNode(w.ctx, w.job, node, p, node == w.rank0)
	}(b.peer(node))
}

// followCopied follows the nodes a copy or a parity row was made to that the
// run's watch does not follow yet: from the job's goroutine, at the news the
// copy's end brought.
func (b *clusterBackend) followCopied() {
	b.mu.Lock()
	w := b.run
	var fresh []string
	if w != nil {
		for n := range b.copiedTo {
			if !w.nodes[n] {
				fresh = append(fresh, n)
			}
		}
	}
	b.mu.Unlock()
	for _, n := range fresh {
		b.follow(w, n)
	}
}

// watchNode keeps a long poll on node's index of job until ctx ends. rank0 is
// set for the node of the run's rank 0, whose index carries the progress.
func (b *clusterBackend) watchNode(ctx context.Context, job, node string, p Peer, rank0 bool) {
	known := ""
	var retry time.Duration
	for {
		if retry > 0 {
			t := time.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		wait := watchWait
		if rank0 && b.awaitingProgress() {
			wait = firstProgressWait
		}
		cctx, cancel := context.WithTimeout(ctx, wait+answerGrace)
		idx, err := p.Shards(cctx, job, known, wait)
		cancel()
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if err != nil {
			if b.noAnswer(node, now, err) {
				b.tell()
			}
			if retry == 0 {
				retry = watchRetryFirst
			} else {
				retry = min(max(2*retry, watchRetry), watchRetryMax)
			}
			continue
		}
		retry = 0
		b.answered(node, now)
		if rank0 {
			b.noteProgress(idx.Progress, now)
		}
		if idx.Tag != known || known == "" {
			b.mu.Lock()
			b.indexes[node] = idx
			b.received[node] = nodeIndex{idx: idx, at: now}
			b.made.IndexTaken(node)
			b.mu.Unlock()
			b.tell()
		}
		known = idx.Tag
	}
}

// tell has the job's loop poll: an index or a copy changed.
func (b *clusterBackend) tell() {
	b.mu.Lock()
	b.changed = true
	b.mu.Unlock()
	select {
	case b.news <- struct{}{}:
	default: // the loop has yet to take the last news: it will see this too
	}
}

// awaitingProgress says whether the current run, launched less than
// firstProgressWindow ago, has yet to report progress.
func (b *clusterBackend) awaitingProgress() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.progFirst == nil && time.Since(b.launchAt) < firstProgressWindow
}

// takeNews returns whether an index or a copy changed since it was last called.
func (b *clusterBackend) takeNews() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.changed
	b.changed = false
	return c
}

// indexCached records in the book the latest index of every node of the run
// that has answered.
func (b *clusterBackend) indexCached() {
	b.mu.Lock()
	defer b.mu.Unlock()
	indexes := make(map[string]shard.Index, len(b.nodes))
	for name := range b.nodes {
		if idx, ok := b.indexes[name]; ok {
			indexes[name] = idx
		}
	}
	b.indexBook(indexes)
}

// indexBook records in the book the indexes of the nodes that answered: their
// shards, then their parity rows (which count against the shards), then the
// copies and rows made since that they do not show yet, then their corrupt
// copies, kept for reportCorrupt. The caller holds mu.
func (b *clusterBackend) indexBook(indexes map[string]shard.Index) {
	shards := make(map[string][]shard.Info, len(indexes))
	bad := make(map[string][]shard.Bad, len(indexes))
	rows := make(map[string][]epochs.ParityRow, len(indexes))
	for name, idx := range indexes {
		shards[name], bad[name] = idx.Shards, idx.Bad
		var held []epochs.ParityRow
		for _, p := range idx.Parity {
			held = append(held, epochs.ParityRow{Epoch: p.Epoch, Group: p.Group, Row: p.Row, Ranks: p.Ranks, Sums: p.Sums})
		}
		rows[name] = held
	}
	b.book.Index(shards, b.placement)
	b.book.IndexParity(rows)
	b.made.Apply(&b.book)
	// After the copies made: a node's index taken before a copy replaced
	// its corrupt one still lists the corrupt one.
	b.corrupt = append(b.corrupt, b.book.IndexBad(bad)...)
}
