package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/node"
	"shoal/internal/place"
	"shoal/internal/shard"
)

// fakeCluster is nodes whose shard indexes a test changes. Their Shards is a
// long poll as an agent's is; Fetch copies a shard between their indexes.
type fakeCluster struct {
	mu       sync.Mutex
	index    map[string][]shard.Info
	progress map[string]*job.Progress
	cut      map[string]bool // requests to a cut node hang until given up
	gone     map[string]bool // a node whose agent is gone: connections refused
	changed  chan struct{}   // closed at every change
	calls    int             // Shards calls made
	active   int             // Shards calls under way
	waits    map[string][]time.Duration
	states   map[string]string // membership's view, by node ("alive" when absent)
	// listAfter is how long a copy takes to show in its node's index (an
	// agent's rescan); fetches counts the copies ordered.
	listAfter time.Duration
	fetches   int
	landed    map[string][]shard.Info // by node: the copies made on it
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{index: map[string][]shard.Info{}, progress: map[string]*job.Progress{}, cut: map[string]bool{}, gone: map[string]bool{},
		changed: make(chan struct{}), waits: map[string][]time.Duration{}, states: map[string]string{}, landed: map[string][]shard.Info{}}
}

func (f *fakeCluster) change(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
	close(f.changed)
	f.changed = make(chan struct{})
}

// add records that node holds shard.
func (f *fakeCluster) add(node string, shard shard.Info) {
	f.change(func() { f.index[node] = append(f.index[node], shard) })
}

func (f *fakeCluster) counts() (calls, active int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.active
}

// nodes is membership's view of nodes: every one alive unless a test said otherwise.
func (f *fakeCluster) nodes(names ...string) func(context.Context) ([]node.Node, error) {
	return func(context.Context) ([]node.Node, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var out []node.Node
		for _, n := range names {
			st := f.states[n]
			if st == "" {
				st = "alive"
			}
			out = append(out, node.Node{Name: n, API: n, State: st, Cores: 2})
		}
		return out, nil
	}
}

func (f *fakeCluster) setState(node, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[node] = state
}

type fakeClusterNode struct {
	Peer
	f    *fakeCluster
	name string
}

func (p fakeClusterNode) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	f := p.f
	f.mu.Lock()
	f.calls++
	f.active++
	f.waits[p.name] = append(f.waits[p.name], wait)
	cut := f.cut[p.name]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
	}()
	if cut {
		<-ctx.Done()
		return shard.Index{}, ctx.Err()
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	if f.isGone(p.name) {
		return shard.Index{}, refused(p.name)
	}
	for {
		f.mu.Lock()
		if f.gone[p.name] { // the request under way ends with its agent
			f.mu.Unlock()
			return shard.Index{}, fmt.Errorf("%w at %s: %w", errkind.Unreachable, p.name, io.ErrUnexpectedEOF)
		}
		idx := shard.Index{Job: job, Shards: slices.Clone(f.index[p.name]), Progress: f.progress[p.name]}
		changed := f.changed
		f.mu.Unlock()
		idx.Tag = idx.ComputeTag()
		if known == "" || wait == 0 || idx.Tag != known {
			return idx, nil
		}
		select {
		case <-changed:
		case <-deadline:
			return idx, nil
		case <-ctx.Done():
			return shard.Index{}, ctx.Err()
		}
	}
}

func (f *fakeCluster) isGone(node string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[node]
}

// refused is the error of api.Client for a host where no agent listens.
func refused(node string) error {
	return fmt.Errorf("%w at %s: %w", errkind.Unreachable, node, &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED})
}

// Fetch copies the shard from the node named from (its API address is its
// name), which shows in the node's index listAfter later. A node that has the
// shard already answers at once, as an agent does.
func (p fakeClusterNode) Fetch(ctx context.Context, ref shard.Ref, from string) (api.Fetched, error) {
	f := p.f
	f.mu.Lock()
	f.fetches++
	find := func(shards []shard.Info) *shard.Info {
		for _, s := range shards {
			if s.Epoch == ref.Epoch && s.Rank == ref.Rank {
				return &s
			}
		}
		return nil
	}
	if have := find(f.landed[p.name]); have != nil {
		f.mu.Unlock()
		return api.Fetched{Shard: *have}, nil
	}
	found := find(f.index[from])
	if found != nil {
		f.landed[p.name] = append(f.landed[p.name], *found)
	}
	f.mu.Unlock()
	if found == nil {
		return api.Fetched{}, errors.New("no such shard")
	}
	if f.listAfter > 0 {
		time.AfterFunc(f.listAfter, func() { f.add(p.name, *found) })
	} else {
		f.add(p.name, *found)
	}
	return api.Fetched{Shard: *found, Copied: true, Wire: found.Size}, nil
}

// Probe finds every node's store sound.
func (p fakeClusterNode) Probe(ctx context.Context, job string, bytes int64) (api.Probe, error) {
	return api.Probe{}, nil
}

func (p fakeClusterNode) RemoveShardsBefore(ctx context.Context, job string, epoch uint64) error {
	return nil
}

// watchedBackend returns the backend of a job of len(placement) ranks placed as
// placement over nodes of f.
func watchedBackend(t *testing.T, f *fakeCluster, placement place.Placement, nodes ...string) *clusterBackend {
	t.Helper()
	s := (ClusterConfig{
		DataDir: t.TempDir(),
		Nodes:   f.nodes(nodes...),
		Peer:    func(n node.Node) Peer { return fakeClusterNode{f: f, name: n.Name} },
	})
	rj := newJob(Config{RunRoot: t.TempDir()}, job.Spec{ID: "j", Ranks: len(placement)}, Output{})
	b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, rj, epochs.NewBook(len(placement), 2))
	b.nodes = map[string]node.Node{}
	for _, n := range nodes {
		b.nodes[n] = node.Node{Name: n, API: n, State: "alive"}
	}
	b.placement = placement
	b.launchAt = time.Now()
	b.epochBase(0)
	return b
}

// pollUntil polls b on its news, and every 50 ms, until cond holds or 5 s pass.
func pollUntil(t *testing.T, b *clusterBackend, news <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-news:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after 5 s: %s", what)
		}
		if loss := b.poll(context.Background()); loss != nil {
			t.Fatalf("poll: unexpected loss %v", loss)
		}
	}
}

// TestWatchWakesOnChange: the backend hears of the shards the ranks write from
// the nodes' long polls, has them copied and counts the epoch complete; while
// nothing changes, polling asks the nodes nothing; and the watch ends with the
// run, its requests with it.
func TestWatchWakesOnChange(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a", "b"}, "a", "b")
	news, stop := b.watch(context.Background())

	f.add("a", shard.Info{Epoch: 1, Rank: 0, Checksum: 10})
	f.add("b", shard.Info{Epoch: 1, Rank: 1, Checksum: 11})
	pollUntil(t, b, news, "epoch 1 not complete", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return slices.Equal(b.book.Complete(), []uint64{1})
	})
	for r, want := range [][]string{{"a", "b"}, {"a", "b"}} {
		if got := b.book.Holders(1, r); !slices.Equal(got, want) {
			t.Errorf("rank %d's shard on %v, want %v", r, got, want)
		}
	}

	// Settled: each node holds one request, and polls add none.
	pollUntil(t, b, news, "the requests did not settle at one per node", func() bool {
		_, active := f.counts()
		return active == 2
	})
	time.Sleep(100 * time.Millisecond)
	calls, _ := f.counts()
	for i := 0; i < 20; i++ {
		select {
		case <-news:
		default:
		}
		if loss := b.poll(context.Background()); loss != nil {
			t.Fatal(loss)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if now, active := f.counts(); now != calls || active != 2 {
		t.Errorf("20 polls with nothing new: %d requests to the nodes, %d under way; want none more and 2", now-calls, active)
	}

	start := time.Now()
	stop()
	b.settleWatch()
	if took := time.Since(start); took > time.Second {
		t.Errorf("stop took %v", took)
	}
	if now, active := f.counts(); active != 0 {
		t.Errorf("after stop: %d requests under way (%d made)", active, now)
	}
	f.add("a", shard.Info{Epoch: 2, Rank: 0, Checksum: 20}) // nobody listens any more
	time.Sleep(100 * time.Millisecond)
	if now, _ := f.counts(); now != calls {
		t.Errorf("requests after stop: %d", now-calls)
	}
	waitGoroutines(t, before)
}

// lateNode is a node whose requests come back only once released after they
// were cancelled: an agent slow to notice a closed connection.
type lateNode struct {
	fakeClusterNode
	release <-chan struct{}
}

func (p lateNode) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	idx, err := p.fakeClusterNode.Shards(ctx, job, known, wait)
	if ctx.Err() != nil {
		<-p.release
	}
	return idx, err
}

// TestWatchStopDoesNotWait: a run's end does not wait for its watch's long
// polls to come back cancelled; what reads the nodes' indexes after it (the
// choice of a relaunch's epoch) does.
func TestWatchStopDoesNotWait(t *testing.T) {
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a", "b"}, "a", "b")
	release := make(chan struct{})
	b.cfg.Peer = func(n node.Node) Peer {
		p := fakeClusterNode{f: f, name: n.Name}
		if n.Name == "b" {
			return lateNode{p, release}
		}
		return p
	}
	news, stop := b.watch(context.Background())
	pollUntil(t, b, news, "the nodes' long polls did not start", func() bool {
		_, active := f.counts()
		return active == 2
	})
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("stop waited for node b's cancelled request to come back")
	}

	chosen := make(chan struct{})
	go func() { b.choose(context.Background()); close(chosen) }()
	select {
	case <-chosen:
		t.Fatal("a relaunch's epoch was chosen while the stopped watch's request to b was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-chosen:
	case <-time.After(5 * time.Second):
		t.Fatal("choose did not return once the watch's last request came back")
	}
	if _, active := f.counts(); active != 0 {
		t.Errorf("after choose: %d requests under way", active)
	}
}

// TestCopyOrderedOnceWhileItsIndexLags: a node lists a copy it made at its
// next rescan, a while after the copy was made; meanwhile the backend, woken
// by the copy, must not order it again (it did, in a loop, until the node's
// index showed it: 1,600 orders a checkpoint on two agents).
func TestCopyOrderedOnceWhileItsIndexLags(t *testing.T) {
	f := newFakeCluster()
	f.listAfter = 300 * time.Millisecond
	b := watchedBackend(t, f, place.Placement{"a", "b"}, "a", "b")
	news, stop := b.watch(context.Background())
	defer stop()
	for epoch := uint64(1); epoch <= 3; epoch++ {
		f.add("a", shard.Info{Epoch: epoch, Rank: 0, Checksum: 10 * epoch})
		f.add("b", shard.Info{Epoch: epoch, Rank: 1, Checksum: 10*epoch + 1})
		pollUntil(t, b, news, fmt.Sprintf("epoch %d not complete", epoch), func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return slices.Contains(b.book.Complete(), epoch)
		})
		// Polls after the copies landed and were listed order nothing more.
		time.Sleep(f.listAfter + 100*time.Millisecond)
		for i := 0; i < 5; i++ {
			if loss := b.poll(context.Background()); loss != nil {
				t.Fatal(loss)
			}
		}
		f.mu.Lock()
		fetches := f.fetches
		f.mu.Unlock()
		if want := 2 * int(epoch); fetches != want {
			t.Fatalf("after epoch %d: %d copies ordered, want %d (one a shard)", epoch, fetches, want)
		}
	}
}

// TestWatchFollowsCopies: a run's watch follows its ranks' nodes, and a node
// a copy is made to from the copy on; the live nodes the job never touched
// are not asked at all.
func TestWatchFollowsCopies(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a"}, "a", "b", "c", "d")
	news, stop := b.watch(context.Background())
	f.add("a", shard.Info{Epoch: 1, Rank: 0, Checksum: 10})
	pollUntil(t, b, news, "epoch 1 not complete", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return slices.Contains(b.book.Complete(), 1)
	})
	f.mu.Lock()
	var to string
	for n := range f.landed {
		to = n
	}
	f.mu.Unlock()
	if to == "" {
		t.Fatal("epoch 1 complete with no copy made")
	}
	pollUntil(t, b, news, "the node the copy went to not followed", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return b.run.nodes[to] && len(f.waits[to]) > 0
	})
	stop()
	waitGoroutines(t, before)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range []string{"b", "c", "d"} {
		if n != to && len(f.waits[n]) > 0 {
			t.Errorf("%s, which runs no rank and was given no copy, was asked %d times, want none", n, len(f.waits[n]))
		}
	}
}

// waitGoroutines fails unless the goroutines are back to n within a second.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
	}
}

// TestWatchCutNode: a node that does not answer (cut off) holds up neither the
// other nodes' news nor the end of the watch. Membership decides that it is
// lost: once it has been suspected and a probe failed, at once; a node that
// answers when membership declares it dead is not lost.
func TestWatchCutNode(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFakeCluster()
	f.cut["c"] = true
	b := watchedBackend(t, f, place.Placement{"a", "b", "c"}, "a", "b", "c")
	news, stop := b.watch(context.Background())
	defer func() {
		stop()
		waitGoroutines(t, before)
	}()
	f.add("a", shard.Info{Epoch: 1, Rank: 0, Checksum: 10})
	pollUntil(t, b, news, "a's shard not seen", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.book.Holders(1, 0)) > 0
	})

	// Partition healing: b declared dead but answering is not lost.
	f.setState("b", "dead")
	if loss := b.poll(context.Background()); loss != nil {
		t.Errorf("poll with b declared dead but answering: loss %v", loss)
	}
	f.setState("b", "alive")

	f.setState("c", "suspect")
	if loss := b.poll(context.Background()); loss != nil {
		t.Fatalf("poll with c suspect: loss %v", loss)
	}
	pollUntil(t, b, news, "the probe of c did not fail", func() bool { return !b.mayAnswer("c") })
	f.setState("c", "dead")
	start := time.Now()
	loss := b.poll(context.Background())
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Errorf("poll with c dead took %v: it asked c again", took)
	}
	// Silent since it was first suspected, a second or more before.
	if loss == nil || !slices.Equal(loss.nodes, []string{"c"}) || !strings.HasPrefix(loss.reason, "no answer for ") ||
		strings.HasPrefix(loss.reason, "no answer for 0") {
		t.Errorf("poll with c dead: loss %v, want c lost (no answer for 1 s or more)", loss)
	}
}

func (p fakeClusterNode) RankStates(ctx context.Context, job string) ([]engine.RankState, error) {
	p.f.mu.Lock()
	cut, gone := p.f.cut[p.name], p.f.gone[p.name]
	p.f.mu.Unlock()
	if gone {
		return nil, refused(p.name)
	}
	if cut {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, nil
}

// TestWatchKilledAgent: a node whose agent dies (its long poll broken, its
// host refusing connections) is lost at the next poll, with membership still
// calling it alive, and the job avoids it; a silent node is not taken for one;
// a node that runs no rank, or whose refusal came before the run, is not
// either; a node that runs no rank and holds nothing of the job is not
// followed at all; and a launcher that ends first says the same of it.
func TestWatchKilledAgent(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFakeCluster()
	f.cut["d"] = true
	b := watchedBackend(t, f, place.Placement{"a", "b", "c", "d"}, "a", "b", "c", "d", "e", "g")
	// e runs no rank and held a copy when last asked; g runs none and holds
	// nothing; b was refused before this run began.
	b.indexes["e"] = shard.Index{Job: "j", Shards: []shard.Info{{Epoch: 1, Rank: 0, Checksum: 10}}}
	b.noAnswer("b", b.launchAt.Add(-time.Second), refused("b"))
	news, stop := b.watch(context.Background())
	defer func() {
		stop()
		waitGoroutines(t, before)
	}()
	f.add("a", shard.Info{Epoch: 1, Rank: 0, Checksum: 10})
	f.add("b", shard.Info{Epoch: 1, Rank: 1, Checksum: 11})
	pollUntil(t, b, news, "the shards of a and b not seen", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.book.Holders(1, 0)) > 0 && len(b.book.Holders(1, 1)) > 0
	})

	f.change(func() { f.gone["e"] = true })
	pollUntil(t, b, news, "e's refusal not seen", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.contacts["e"].refused.IsZero()
	})
	f.mu.Lock()
	asked := len(f.waits["g"])
	f.mu.Unlock()
	if asked != 0 || b.run.nodes["g"] {
		t.Errorf("g, which runs no rank and holds nothing of the job, was asked %d times (followed: %v), want none", asked, b.run.nodes["g"])
	}

	f.change(func() { f.gone["c"] = true })
	var loss *nodeLoss
	deadline := time.After(5 * time.Second)
	for loss == nil {
		select {
		case <-news:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("after 5 s: c, whose agent is gone, not lost")
		}
		loss = b.poll(context.Background())
	}
	if !slices.Equal(loss.nodes, []string{"c"}) || loss.reason != agentGone || loss.planned || loss.fault {
		t.Errorf("loss %+v, want c lost: %s", loss, agentGone)
	}
	if got := b.rec.Job().Avoid; !slices.Equal(got, []string{"c"}) {
		t.Errorf("the job avoids %v, want [c]", got)
	}

	// The launcher ends before a poll: the survivors are asked (d answers
	// again), and c is lost for the same reason.
	f.change(func() { f.cut["d"] = false })
	_, loss = b.finish(context.Background(), nil, true, nil)
	if loss == nil || !slices.Equal(loss.nodes, []string{"c"}) || loss.reason != agentGone {
		t.Errorf("finish: loss %+v, want c lost: %s", loss, agentGone)
	}
}

// TestAvoidOutlivesTheCoordinator: a node a run found lost before membership
// said so is in the job's stored state, and a coordinator taking the job over
// does not place on it until membership declares it dead; then it is a node
// like any other again.
func TestAvoidOutlivesTheCoordinator(t *testing.T) {
	f := newFakeCluster()
	f.cut["c"] = true
	nodes := []string{"a", "b", "c"}
	old := watchedBackend(t, f, place.Placement{"a", "b", "c"}, nodes...)
	if _, loss := old.finish(context.Background(), nil, true, nil); loss == nil || !slices.Equal(loss.nodes, []string{"c"}) {
		t.Fatalf("finish with c cut: loss %v, want c", loss)
	}
	stored := old.rec.Job()
	if !slices.Equal(stored.Avoid, []string{"c"}) {
		t.Fatalf("stored avoid %v after c was found lost, want [c]", stored.Avoid)
	}

	// The next coordinator: membership still calls c alive (or suspect).
	next := watchedBackend(t, f, place.Placement{"a", "b", "c"}, nodes...)
	next.seedRun(stored.Placement, stored.Avoid, "")
	for _, state := range []string{"alive", "suspect"} {
		f.setState("c", state)
		live, err := next.liveNodes(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := live["c"]; ok || len(live) != 2 {
			t.Errorf("membership calls c %s: live nodes %v, want a and b", state, slices.Sorted(maps.Keys(live)))
		}
	}
	f.setState("c", "dead")
	next.liveNodes(context.Background(), "")
	if a := next.rec.Job().Avoid; len(a) != 0 {
		t.Errorf("c declared dead: stored avoid %v, want none", a)
	}
	f.setState("c", "alive") // back: a join
	if live, _ := next.liveNodes(context.Background(), ""); len(live) != 3 {
		t.Errorf("c back after it was declared dead: live nodes %v, want a, b and c", slices.Sorted(maps.Keys(live)))
	}
}

// TestWatchAsksRank0ForFirstProgress: rank 0's node is asked every second until
// the run's first progress report (which measures the restart), then waited on
// like the others.
func TestWatchAsksRank0ForFirstProgress(t *testing.T) {
	f := newFakeCluster()
	old := &job.Progress{Fraction: 0.5, At: time.Now().Add(-time.Minute)}
	f.progress["a"] = old
	b := watchedBackend(t, f, place.Placement{"a", "b"}, "a", "b")
	b.progBase = old.At
	news, stop := b.watch(context.Background())
	defer stop()
	time.Sleep(1500 * time.Millisecond)
	f.change(func() { f.progress["a"] = &job.Progress{Fraction: 0.501, At: time.Now()} }) // same percent: same tag
	pollUntil(t, b, news, "the first report not seen", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.progFirst != nil
	})
	var waitsA, waitsB []time.Duration
	pollUntil(t, b, news, "rank 0's node not waited on after the report", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		waitsA, waitsB = slices.Clone(f.waits["a"]), slices.Clone(f.waits["b"])
		return waitsA[len(waitsA)-1] == watchWait
	})
	if len(waitsA) < 3 || waitsA[1] != firstProgressWait || waitsA[len(waitsA)-1] != watchWait {
		t.Errorf("rank 0's node was asked with waits %v; want %v until the report, then %v", waitsA, firstProgressWait, watchWait)
	}
	if slices.Contains(waitsB, firstProgressWait) {
		t.Errorf("another node was asked with waits %v", waitsB)
	}
}

// TestRefusedWhileLeaving: a node that announced its leave and then refuses
// connections left before its ranks could be moved. The job says so, not that
// the node was lost, and the failure record does not count it.
func TestRefusedWhileLeaving(t *testing.T) {
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a", "b"}, "a", "b")
	var events []job.Event
	var failed []string
	b.j.out.Events = func(e job.Event) { events = append(events, e) }
	b.j.cfg.NodeLost = func(n string) { failed = append(failed, n) }
	b.noAnswer("b", time.Now(), refused("b"))
	loss := b.checkRefused([]node.Node{{Name: "a", State: "alive"}, {Name: "b", State: "alive", Leaving: true}})
	if loss == nil || !loss.left || !slices.Equal(loss.nodes, []string{"b"}) {
		t.Fatalf("loss %+v, want b left", loss)
	}
	b.j.announceLoss(loss)
	b.j.announceLoss(loss) // once only
	if len(events) != 1 || events[0].Type != job.EventNodes || events[0].Message != "node b left before its ranks could be moved" {
		t.Errorf("events %+v, want one %s event saying b left before its ranks could be moved", events, job.EventNodes)
	}
	if len(failed) != 0 {
		t.Errorf("the failure record counted %v", failed)
	}

	// Not leaving: lost, and counted.
	events = nil
	loss = b.checkRefused([]node.Node{{Name: "a", State: "alive"}, {Name: "b", State: "alive"}})
	if loss == nil || loss.left {
		t.Fatalf("loss %+v, want b lost", loss)
	}
	b.j.announceLoss(loss)
	if len(events) != 1 || events[0].Type != job.EventNodeLost || !slices.Equal(failed, []string{"b"}) {
		t.Errorf("events %+v, failures %v: want one %s event and b counted", events, failed, job.EventNodeLost)
	}
}

// TestManifestOfATakeOver: a coordinator that takes a job over records the
// complete epochs it inherits before it has run the job, its directory not yet
// made.
func TestManifestOfATakeOver(t *testing.T) {
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a"}, "a")
	var events []job.Event
	b.j.out.Events = func(e job.Event) { events = append(events, e) }
	b.book.Index(map[string][]shard.Info{"a": {{Epoch: 3, Rank: 0, NRanks: 1, CreatedNs: 42, Checksum: 7}}}, b.placement)
	if got := b.book.MarkComplete(1); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("complete epochs %v, want [3]", got)
	}
	b.writeManifest()
	got, err := jobdir.Dir{Root: b.j.cfg.RunRoot, Job: b.j.spec.ID}.ReadManifest()
	if err != nil || len(got) != 1 || got[0].Epoch != 3 {
		t.Errorf("manifest %v (%v), want epoch 3; events %+v", got, err, events)
	}
}

// TestQuietRunEndsWithoutRefresh: a run that succeeded, whose nodes' indexes
// all answered and showed nothing of the job (its ranks never used libshoal),
// ends without asking every node again; one where a node showed a shard, or
// that failed, asks them all.
func TestQuietRunEndsWithoutRefresh(t *testing.T) {
	f := newFakeCluster()
	b := watchedBackend(t, f, place.Placement{"a", "b"}, "a", "b")
	news, stop := b.watch(context.Background())
	pollUntil(t, b, news, "the nodes' first answers", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.indexes) == 2
	})
	stop()
	b.settleWatch()
	finishCalls := func(failed bool) int {
		before, _ := f.counts()
		b.finish(context.Background(), nil, failed, nil)
		after, _ := f.counts()
		return after - before
	}
	if n := finishCalls(false); n != 0 {
		t.Errorf("a quiet run's end asked the nodes %d times, want 0", n)
	}
	if n := finishCalls(true); n != 2 {
		t.Errorf("a quiet run that failed: %d requests at its end, want 2 (every node)", n)
	}

	f.add("b", shard.Info{Epoch: 1, Rank: 1, Checksum: 11})
	news, stop = b.watch(context.Background())
	pollUntil(t, b, news, "b's shard", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.indexes["b"].Shards) == 1
	})
	stop()
	b.settleWatch()
	if n := finishCalls(false); n != 2 {
		t.Errorf("a run that wrote a shard: %d requests at its end, want 2 (every node)", n)
	}
}
