package coord

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/fanout"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/place"
	"shoal/internal/shard"
)

func TestRemainingFromProgress(t *testing.T) {
	now := time.Now()
	// Rank 0's node is an hour behind this one: only differences of its times count.
	remote := now.Add(-time.Hour)
	b := &clusterBackend{launchAt: now.Add(-10 * time.Second), progBase: remote.Add(-20 * time.Second)}
	if _, ok := b.remaining(); ok {
		t.Error("an estimate without any progress report")
	}
	b.noteProgress(&job.Progress{Fraction: 0.9, At: remote.Add(-20 * time.Second)}, now.Add(-9*time.Second)) // an earlier run's
	if b.progFirst != nil {
		t.Error("the report from before the launch counted")
	}
	b.noteProgress(&job.Progress{Fraction: 0.2, At: remote.Add(-8 * time.Second)}, now.Add(-8*time.Second))
	if b.restartCost != 2*time.Second {
		t.Errorf("restart cost %v, want 2s (launch to first report seen)", b.restartCost)
	}
	if _, ok := b.remaining(); ok {
		t.Error("an estimate from a single report")
	}
	b.noteProgress(&job.Progress{Fraction: 0.4, At: remote}, now)
	rem, ok := b.remaining()
	// 0.2 of the work took 8 s; 0.6 is left: 24 s, less the moment since the report.
	if !ok || rem > 24*time.Second || rem < 23*time.Second {
		t.Errorf("remaining %v %v, want about 24s", rem, ok)
	}
	b.noteProgress(&job.Progress{Fraction: 0.4, At: remote.Add(time.Millisecond)}, now)
	if b.restartCost != 2*time.Second {
		t.Error("a later report changed the restart cost")
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 restarts", 1: "1 restart", 2: "2 restarts"} {
		if got := job.Plural(n, "restart"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// fetchPeer is a Peer whose Fetch blocks until released; it records the copies asked.
type fetchPeer struct {
	Peer
	node    string
	asked   chan string
	release chan struct{}
}

func (p fetchPeer) Fetch(ctx context.Context, ref shard.Ref, from string) (api.Fetched, error) {
	p.asked <- fmt.Sprintf("%d/%d→%s", ref.Epoch, ref.Rank, p.node)
	<-p.release
	return api.Fetched{Copied: true}, nil
}

// TestReplicateCountsCopiesUnderWay: while a copy of a large shard is under way, later
// polls must not start more copies of it (each poll used to add one more node).
func TestReplicateCountsCopiesUnderWay(t *testing.T) {
	asked, release := make(chan string, 10), make(chan struct{})
	s := ClusterConfig{Peer: func(n node.Node) Peer {
		return fetchPeer{node: n.Name, asked: asked, release: release}
	}}
	book := epochs.NewBook(1, 2)
	book.AddCopy(1, 0, "a")
	b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: 1}, Output{}), book)
	b.nodes = map[string]node.Node{"a": {Name: "a"}, "b": {Name: "b"}, "c": {Name: "c"}}
	for poll := 0; poll < 3; poll++ {
		b.replicate(context.Background())
	}
	if got := <-asked; got != "1/0→b" {
		t.Errorf("first copy %s, want 1/0→b (the next node by name)", got)
	}
	select {
	case got := <-asked:
		t.Errorf("another copy started while one was under way: %s", got)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
}

// indexPeer is a Peer whose shard index is fixed.
type indexPeer struct {
	Peer
	shards []shard.Info
}

func (p indexPeer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	return shard.Index{Job: job, Shards: p.shards}, nil
}

// TestRefreshCountsACopyInTheWritersRound: a copy reported in the same round as the
// shard its writer reports counts at once, whatever order the answers come in; an
// epoch completes in that round, not a poll later (at short intervals later epochs
// would overtake it).
func TestRefreshCountsACopyInTheWritersRound(t *testing.T) {
	idx := map[string][]shard.Info{
		"a": {{Epoch: 1, Rank: 0, Checksum: 10}, {Epoch: 1, Rank: 1, Checksum: 11}},
		"b": {{Epoch: 1, Rank: 1, Checksum: 11}, {Epoch: 1, Rank: 2, Checksum: 12}},
		"c": {{Epoch: 1, Rank: 2, Checksum: 12}, {Epoch: 1, Rank: 0, Checksum: 10}},
	}
	s := ClusterConfig{Peer: func(n node.Node) Peer { return indexPeer{shards: idx[n.Name]} }}
	for round := 0; round < 20; round++ {
		b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: 3}, Output{}), epochs.NewBook(3, 2))
		b.nodes = map[string]node.Node{"a": {Name: "a"}, "b": {Name: "b"}, "c": {Name: "c"}}
		b.placement = place.Placement{"a", "b", "c"}
		b.epochBase(0)
		b.refresh(context.Background())
		for r := 0; r < 3; r++ {
			if n := len(b.book.Holders(1, r)); n != 2 {
				t.Fatalf("round %d: rank %d has %d counted copies after one refresh, want 2", round, r, n)
			}
		}
	}
}

// countingPeer answers an empty index after a moment, counting the calls in
// flight and the most there were at once.
type countingPeer struct {
	Peer
	mu             *sync.Mutex
	now, most, all *int
}

func (p countingPeer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	p.mu.Lock()
	*p.now++
	*p.all++
	*p.most = max(*p.most, *p.now)
	p.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	p.mu.Lock()
	*p.now--
	p.mu.Unlock()
	return shard.Index{Job: job}, nil
}

// TestRefreshBounded: a refresh over more nodes than fanout.Limit (a job taken
// over asks every live node) asks each once, at most fanout.Limit at a time.
func TestRefreshBounded(t *testing.T) {
	var mu sync.Mutex
	var now, most, all int
	s := ClusterConfig{Peer: func(n node.Node) Peer { return countingPeer{mu: &mu, now: &now, most: &most, all: &all} }}
	b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: 3}, Output{}), epochs.NewBook(3, 2))
	b.nodes = map[string]node.Node{}
	n := 3 * fanout.Limit
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		b.nodes[name] = node.Node{Name: name}
	}
	b.refresh(context.Background())
	if all != n || most > fanout.Limit {
		t.Errorf("refresh over %d nodes: %d calls, at most %d at once; want %d, at most %d", n, all, most, n, fanout.Limit)
	}
}

// statesPeer counts RankStates calls (states) and store probes (probes) as
// countingPeer counts Shards, and answers Shards at once, uncounted.
type statesPeer struct {
	Peer
	states, probes countingPeer
}

func (p statesPeer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	return shard.Index{Job: job}, nil
}

func (p statesPeer) Probe(ctx context.Context, job string, bytes int64) (api.Probe, error) {
	p.probes.Shards(ctx, job, "", 0)
	return api.Probe{}, nil
}

func (p statesPeer) RankStates(ctx context.Context, job string) ([]engine.RankState, error) {
	p.states.Shards(ctx, job, "", 0)
	return nil, nil
}

// TestFinishBounded: the end of a failed run asks every node that ran ranks how
// they ended, and probes its checkpoint store, each once, at most fanout.Limit
// at a time, and no node that ran none.
func TestFinishBounded(t *testing.T) {
	var mu sync.Mutex
	var counts [2]struct{ now, most, all int }
	count := func(i int) countingPeer {
		return countingPeer{mu: &mu, now: &counts[i].now, most: &counts[i].most, all: &counts[i].all}
	}
	s := ClusterConfig{
		Peer:  func(n node.Node) Peer { return statesPeer{states: count(0), probes: count(1)} },
		Nodes: func(context.Context) ([]node.Node, error) { return nil, nil },
	}
	n := 3 * fanout.Limit
	b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: n}, Output{}), epochs.NewBook(n, 2))
	b.nodes = map[string]node.Node{}
	b.placement = make(place.Placement, n)
	for i := range n + 5 { // the last 5 run no rank
		name := fmt.Sprintf("n%d", i)
		b.nodes[name] = node.Node{Name: name}
		if i < n {
			b.placement[i] = name
		}
	}
	if _, loss := b.finish(context.Background(), nil, true, nil); loss != nil {
		t.Fatalf("finish: loss %v, want none", loss)
	}
	for i, what := range []string{"rank states", "store probes"} {
		if c := counts[i]; c.all != n || c.most > fanout.Limit {
			t.Errorf("finish over %d nodes of ranks: %d %s, at most %d at once; want %d, at most %d", n, c.all, what, c.most, n, fanout.Limit)
		}
	}
}

// revokingPeer records the nodes the job is revoked on and its shards removed
// from.
type revokingPeer struct {
	Peer
	name string
	got  chan string
}

func (p revokingPeer) Revoke(ctx context.Context, job string) error {
	p.got <- "revoke " + p.name
	return nil
}

func (p revokingPeer) RemoveShardsBefore(ctx context.Context, job string, epoch uint64) error {
	p.got <- "remove " + p.name
	return nil
}

// TestClearAsksHolders: a job's end revokes it, and removes its shards, on the
// nodes that ran its ranks or may hold its data (an index that showed some, a
// copy or parity row made there), not on every live node of the cluster.
func TestClearAsksHolders(t *testing.T) {
	got := make(chan string, 100)
	cfg := ClusterConfig{Peer: func(n node.Node) Peer { return revokingPeer{name: n.Name, got: got} }}
	rec := &memRecord{info: job.Job{ID: "j", Spec: job.Spec{ID: "j", Ranks: 2, Engine: "openmpi"}}}
	c := NewClusterRun(cfg, rec, Output{}, nil, nil)
	b := c.b
	b.nodes = map[string]node.Node{}
	for i := range 10 {
		name := fmt.Sprintf("n%d", i)
		b.nodes[name] = node.Node{Name: name}
	}
	b.placement = place.Placement{"n0", "n1"}
	b.indexes["n5"] = shard.Index{Job: "j", Shards: []shard.Info{{Epoch: 1, Rank: 0}}}
	b.indexes["n6"] = shard.Index{Job: "j"} // answered, holds nothing
	b.mu.Lock()
	b.copyMade(epochs.ShardCopy{Epoch: 1, Rank: 1, Node: "n7"})
	b.rowMade(epochs.RowCopy{ParityCopy: epochs.ParityCopy{Epoch: 1}, Node: "n8"})
	b.mu.Unlock()
	want := []string{"n0", "n1", "n5", "n7", "n8"}
	if h := b.holders(); !slices.Equal(h, want) {
		t.Errorf("holders = %v, want %v", h, want)
	}
	c.Clear(true)
	var asked []string
	for len(asked) < 2*len(want) {
		select {
		case a := <-got:
			asked = append(asked, a)
		case <-time.After(5 * time.Second):
			t.Fatalf("Clear asked %v within 5 s, want a revoke and a removal on each of %v", asked, want)
		}
	}
	select {
	case a := <-got:
		asked = append(asked, a)
	case <-time.After(100 * time.Millisecond):
	}
	slices.Sort(asked)
	var wantAsked []string
	for _, what := range []string{"remove ", "revoke "} {
		for _, n := range want {
			wantAsked = append(wantAsked, what+n)
		}
	}
	if !slices.Equal(asked, wantAsked) {
		t.Errorf("Clear asked %v, want %v", asked, wantAsked)
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0 s",
		40 * time.Millisecond:   "0 s",
		700 * time.Millisecond:  "0.7 s",
		4449 * time.Millisecond: "4.4 s",
		12 * time.Second:        "12 s",
		99 * time.Second:        "99 s",
		125 * time.Second:       "2m5s",
	} {
		if got := job.Seconds(d); got != want {
			t.Errorf("seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// bookPeer is a node holding a fixed shard index; removals are recorded.
type bookPeer struct {
	Peer
	shards  []shard.Info
	removed chan uint64
}

func (p bookPeer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	return shard.Index{Job: job, Shards: p.shards}, nil
}

func (p bookPeer) RemoveShardsBefore(ctx context.Context, job string, epoch uint64) error {
	p.removed <- epoch
	return nil
}

// TestOnBookWhenCompleteEpochsChange: the store hook hears of every change of the
// complete epochs, with a copy, and of nothing else.
func TestOnBookWhenCompleteEpochsChange(t *testing.T) {
	removed := make(chan uint64, 10)
	var books []epochs.Book
	s := (ClusterConfig{
		DataDir: t.TempDir(),
		Peer:    func(n node.Node) Peer { return bookPeer{removed: removed} },
		OnBook:  func(job string, b epochs.Book) { books = append(books, b) },
	})
	rj := newJob(Config{RunRoot: t.TempDir()}, job.Spec{ID: "j", Ranks: 1}, Output{})
	b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, rj, epochs.NewBook(1, 1))
	b.nodes = map[string]node.Node{"a": {Name: "a"}}
	b.placement = place.Placement{"a"}
	b.epochBase(0)
	tests := []struct {
		written  uint64 // epoch a reports written (0: none)
		calls    int    // OnBook calls so far
		complete []uint64
		removed  uint64 // shards removed before this epoch (0: none)
	}{
		{0, 0, nil, 0},
		{1, 1, []uint64{1}, 0},
		{1, 1, []uint64{1}, 0}, // nothing new
		{2, 2, []uint64{1, 2}, 0},
		{3, 3, []uint64{2, 3}, 2}, // epoch 1 pruned
	}
	var index []shard.Info
	for i, tt := range tests {
		if tt.written != 0 {
			index = append(index, shard.Info{Epoch: tt.written, Rank: 0, Checksum: tt.written})
		}
		b.mu.Lock()
		b.book.Index(map[string][]shard.Info{"a": index}, b.placement)
		b.mu.Unlock()
		b.markComplete(context.Background())
		if len(books) != tt.calls {
			t.Fatalf("step %d: %d OnBook calls, want %d", i, len(books), tt.calls)
		}
		if tt.calls > 0 {
			if got := books[len(books)-1].Complete(); !slices.Equal(got, tt.complete) {
				t.Errorf("step %d: the book told has complete epochs %v, want %v", i, got, tt.complete)
			}
		}
		if tt.removed != 0 {
			if got := <-removed; got != tt.removed {
				t.Errorf("step %d: shards removed before %d, want %d", i, got, tt.removed)
			}
		}
	}
	books[0].Epochs[1].Complete = false // a copy: the backend's own book is untouched
	if got := b.book.Complete(); !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("the backend's complete epochs %v after the store's copy changed", got)
	}
}

// ringIndex is what n1..n5 hold of epoch 4 of a job of 5 ranks kept as two
// copies: rank r's shard on n(r+1) and on the node after it, going round.
func ringIndex() map[string][]shard.Info {
	idx := map[string][]shard.Info{}
	for r := range 5 {
		for _, n := range []int{r, (r + 1) % 5} {
			name := fmt.Sprintf("n%d", n+1)
			idx[name] = append(idx[name], shard.Info{Epoch: 4, Rank: r, NRanks: 5, Checksum: 400 + uint64(r), CreatedNs: 4000})
		}
	}
	return idx
}

// ringBook is the book of that job, epoch 4 complete.
func ringBook(t *testing.T) epochs.Book {
	t.Helper()
	b := epochs.NewBook(5, 2)
	if err := b.Resume(4, ringIndex()); err != nil {
		t.Fatalf("the ring's book: %v", err)
	}
	return b
}

// TestChooseFromASeededBook: a coordinator resuming a job chooses from the book it
// was given, after asking every live node what it holds.
func TestChooseFromASeededBook(t *testing.T) {
	seed := ringBook(t) // epoch 4 complete over n1..n5
	tests := []struct {
		name  string
		alive []string
		want  uint64
		err   string
	}{
		{"all but the old coordinator", []string{"n2", "n3", "n4", "n5"}, 4, ""},
		{"two neighbours lost with it", []string{"n1", "n2", "n5"}, 0, "epoch 4 lost: shards of rank 2 were only on n3, n4"},
	}
	for _, tt := range tests {
		var nodes []node.Node
		index := ringIndex()
		for _, n := range tt.alive {
			nodes = append(nodes, node.Node{Name: n, State: "alive"})
		}
		asked := map[string]bool{}
		var mu sync.Mutex
		s := (ClusterConfig{
			Nodes: func(context.Context) ([]node.Node, error) { return nodes, nil },
			Peer: func(n node.Node) Peer {
				mu.Lock()
				asked[n.Name] = true
				mu.Unlock()
				return bookPeer{shards: index[n.Name]}
			},
		})
		rj := newJob(Config{}, job.Spec{ID: "j", Ranks: 5}, Output{})
		rj.resume = &Resume{Why: "coordinator n1 lost"}
		b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, rj, seed)
		rp, err := b.choose(context.Background())
		epoch := rp.epoch
		if epoch != tt.want || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("%s: choose = %d, %v; want %d, %q", tt.name, epoch, err, tt.want, tt.err)
		}
		for _, n := range tt.alive {
			if !asked[n] {
				t.Errorf("%s: live node %s was not asked what it holds", tt.name, n)
			}
		}
	}
}

// holdPeer is a Peer that accepts a hold request.
type holdPeer struct{ Peer }

func (holdPeer) RequestHold(ctx context.Context, job string) error { return nil }

// TestMoveWaitsForTheHeldEpoch: an epoch written but not yet complete when a move
// asks for its checkpoint is not the held one; the relaunch waits for the next.
func TestMoveWaitsForTheHeldEpoch(t *testing.T) {
	s := ClusterConfig{Peer: func(n node.Node) Peer { return holdPeer{} }}
	b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: 2}, Output{}), epochs.NewBook(2, 1))
	b.nodes = map[string]node.Node{"a": {Name: "a"}, "b": {Name: "b"}}
	b.placement = place.Placement{"a", "b"}
	b.epochBase(0)
	b.book.Index(map[string][]shard.Info{"a": {{Epoch: 1, Rank: 0, Checksum: 10}}}, b.placement)
	b.startReconfig(context.Background(), reconfig{reason: "placing by the job's traffic", done: make(chan struct{})})
	b.book.Index(map[string][]shard.Info{"b": {{Epoch: 1, Rank: 1, Checksum: 11}}}, b.placement)
	b.book.MarkComplete(2)
	if b.book.Newest() != 1 {
		t.Fatalf("newest complete epoch %d, want 1", b.book.Newest())
	}
	if _, ok := b.held(b.pending); ok {
		t.Error("epoch 1, under way when the hold was asked for, taken for the held checkpoint")
	}
	b.book.Index(map[string][]shard.Info{"a": {{Epoch: 2, Rank: 0, Checksum: 20}}, "b": {{Epoch: 2, Rank: 1, Checksum: 21}}}, b.placement)
	b.book.MarkComplete(2)
	if _, ok := b.held(b.pending); !ok {
		t.Error("epoch 2, taken after the hold was asked for, not taken for the held checkpoint")
	}
}
