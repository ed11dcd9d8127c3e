package coord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// Where a coordinator's copies begin: the epoch the record says is kept in
// the job's store, or the one the job resumed from there; not one kept
// elsewhere.
func TestKeepStart(t *testing.T) {
	const loc = "s3://lab/app"
	target := &job.DurableTarget{Location: loc}
	tests := []struct {
		name string
		info job.Job
		want uint64
	}{
		{"no store", job.Job{Durable: &job.Durable{Epoch: 4, Location: loc}}, 0},
		{"a new job", job.Job{Spec: job.Spec{Durable: target}}, 0},
		{"taken over, epoch 4 kept", job.Job{Spec: job.Spec{Durable: target}, Durable: &job.Durable{Epoch: 4, Location: loc}}, 4},
		{"kept elsewhere", job.Job{Spec: job.Spec{Durable: target}, Durable: &job.Durable{Epoch: 4, Location: "/shared/app"}}, 0},
		{"resumed from epoch 7", job.Job{Spec: job.Spec{Durable: target, ResumeEpoch: 7, ResumeFrom: loc}}, 7},
		{"resumed, then epoch 9 kept", job.Job{Spec: job.Spec{Durable: target, ResumeEpoch: 7, ResumeFrom: loc}, Durable: &job.Durable{Epoch: 9, Location: loc}}, 9},
		{"resumed from elsewhere", job.Job{Spec: job.Spec{Durable: target, ResumeEpoch: 7, ResumeFrom: "/shared/app"}}, 0},
	}
	for _, tt := range tests {
		if got := keepStart(tt.info); got.kept != tt.want || got.tried != tt.want {
			t.Errorf("%s: keepStart = %+v, want kept and tried %d", tt.name, got, tt.want)
		}
	}
}

// Which epoch is copied next: the newest complete one, never one older than
// a copy made or tried; a failed copy leaves the kept epoch current and is
// not tried again. A new coordinator (the state keepStart gives) begins with
// the newest complete epoch not kept.
func TestKeepNext(t *testing.T) {
	type step struct {
		newest uint64 // the book's newest complete epoch
		want   uint64 // the copy begun (0: none)
		kept   bool   // how it ends
	}
	tests := []struct {
		name     string
		start    keepState
		steps    []step
		wantKept uint64
	}{
		{"first epoch", keepState{}, []step{{1, 1, true}}, 1},
		{"nothing complete", keepState{}, []step{{0, 0, false}}, 0},
		{"epochs 2 to 4 complete during the copy of 1: 4 next", keepState{}, []step{{1, 1, true}, {4, 4, true}}, 4},
		{"no newer epoch", keepState{kept: 3, tried: 3}, []step{{3, 0, false}}, 3},
		{"failed copy not tried again", keepState{kept: 3, tried: 3}, []step{{4, 4, false}, {4, 0, false}, {5, 5, true}}, 5},
		{"failed copy keeps the one before", keepState{kept: 3, tried: 3}, []step{{4, 4, false}}, 3},
		{"failover after epoch 4 kept, 6 complete", keepState{kept: 4, tried: 4}, []step{{6, 6, true}}, 6},
		{"failover, kept epoch newer than the book's", keepState{kept: 6, tried: 6}, []step{{5, 0, false}}, 6},
	}
	for _, tt := range tests {
		s := tt.start
		for i, st := range tt.steps {
			got := s.next(st.newest)
			if got != st.want {
				t.Errorf("%s: step %d: next(%d) = %d, want %d", tt.name, i, st.newest, got, st.want)
			}
			if got != 0 {
				s = s.ended(got, st.kept)
			}
		}
		if s.kept != tt.wantKept {
			t.Errorf("%s: kept %d at the end, want %d", tt.name, s.kept, tt.wantKept)
		}
	}
}

// Each rank's shard is uploaded by one of its holders, the nodes sharing the
// copy; a rank no live node holds fails the copy.
func TestUploaders(t *testing.T) {
	tests := []struct {
		holders [][]string
		want    string
	}{
		{[][]string{{"n1", "n2"}, {"n2", "n1"}, {"n1", "n2"}, {"n2", "n1"}}, "map[n1:[0 2] n2:[1 3]]"},
		{[][]string{{"n1", "n2"}, {"n1", "n2"}}, "map[n1:[0] n2:[1]]"},
		{[][]string{{"n3"}, {"n3"}, {"n1", "n3"}}, "map[n1:[2] n3:[0 1]]"},
		{[][]string{{"n1"}, {}}, "no live node holds rank 1's shard"},
	}
	for _, tt := range tests {
		got, err := uploaders(tt.holders)
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
		}
		if s != tt.want {
			t.Errorf("uploaders(%v) = %s, want %s", tt.holders, s, tt.want)
		}
	}
}

// memEpochStore is an EpochStore in memory: the manifests committed, the
// epochs begun and aborted.
type memEpochStore struct {
	mu        sync.Mutex
	committed []durable.Manifest
	begun     []uint64
	aborted   []uint64
}

func (s *memEpochStore) Begin(ctx context.Context, m durable.Manifest) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begun = append(s.begun, m.Epoch)
	for _, c := range s.committed {
		if c.Epoch == m.Epoch {
			return true, nil
		}
	}
	return false, nil
}

func (s *memEpochStore) Commit(ctx context.Context, m durable.Manifest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = append(s.committed, m)
	return nil
}

func (s *memEpochStore) Abort(ctx context.Context, e uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = append(s.aborted, e)
}

// uploadPeer uploads the shards it is asked for, or answers fail.
type uploadPeer struct {
	Peer
	node string
	fail error
	mu   *sync.Mutex
	up   map[string][]int // ranks uploaded, by node
}

func (p uploadPeer) UploadShard(ctx context.Context, ref shard.Ref, req api.UploadRequest) (api.Uploaded, error) {
	if p.fail != nil {
		return api.Uploaded{}, p.fail
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up[p.node] = append(p.up[p.node], ref.Rank)
	return api.Uploaded{Size: 1_000_000, Checksum: 40 + uint64(ref.Rank), CreatedNs: 4000}, nil
}

// keepRun is a keeper of a job of 2 ranks whose epoch 4 is complete on n1 and
// n2, keeping in a store in memory; fail makes a node's uploads fail.
func keepRun(t *testing.T, fail map[string]error) (*keeper, *memEpochStore, func() []job.Event, map[string][]int) {
	t.Helper()
	book := epochs.NewBook(2, 2)
	book.StartRun(0)
	book.Index(map[string][]shard.Info{
		"n1": {{Epoch: 4, Rank: 0, Checksum: 40, CreatedNs: 4000}, {Epoch: 4, Rank: 1, Checksum: 41, CreatedNs: 4000}},
		"n2": {{Epoch: 4, Rank: 1, Checksum: 41, CreatedNs: 4000}, {Epoch: 4, Rank: 0, Checksum: 40, CreatedNs: 4000}},
	}, []string{"n1", "n2"})
	book.MarkComplete(2)
	var mu, emu sync.Mutex
	up := map[string][]int{}
	cfg := ClusterConfig{
		Node: "n1",
		Nodes: func(context.Context) ([]node.Node, error) {
			return []node.Node{{Name: "n1", State: "alive"}, {Name: "n2", State: "alive"}}, nil
		},
		Peer: func(n node.Node) Peer { return uploadPeer{node: n.Name, fail: fail[n.Name], mu: &mu, up: up} },
	}
	var events []job.Event
	spec := job.Spec{ID: "j", Argv: []string{"heat", "--steps", "10"}, Ranks: 2, Durable: &job.DurableTarget{Location: "s3://lab/app"}}
	rec := &memRecord{info: job.Job{ID: "j", Spec: spec, CoordKeeps: true}}
	b := newClusterBackend(cfg, rec, newJob(Config{}, spec, Output{Events: func(e job.Event) {
		emu.Lock()
		defer emu.Unlock()
		events = append(events, e)
	}}), book)
	store := &memEpochStore{}
	k := &keeper{b: b, target: *spec.Durable, store: store, ident: durable.IdentityOf(spec), nudge: make(chan struct{}, 1)}
	return k, store, func() []job.Event {
		emu.Lock()
		defer emu.Unlock()
		return append([]job.Event(nil), events...)
	}, up
}

// A complete epoch is uploaded by the nodes holding it, one rank each, and
// its manifest written after; the job's events say it once, with the data
// that records it as the job's kept epoch.
func TestKeeperCopiesEpoch(t *testing.T) {
	k, store, events, up := keepRun(t, nil)
	if err := k.copy(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(up) != "map[n1:[0] n2:[1]]" {
		t.Errorf("uploads %v, want rank 0 by n1 and rank 1 by n2", up)
	}
	if len(store.committed) != 1 {
		t.Fatalf("%d manifests committed, want 1", len(store.committed))
	}
	m := store.committed[0]
	if m.Job != "j" || m.Epoch != 4 || m.Program != "heat" || m.Ranks != 2 || m.CreatedNs != 4000 ||
		fmt.Sprint(m.Shards) != "[{1000000 40} {1000000 41}]" {
		t.Errorf("manifest %+v; want job j's epoch 4 of heat on 2 ranks, both shards listed", m)
	}
	ev := events()
	if len(ev) != 1 || ev[0].Type != job.EventDurable || !strings.HasPrefix(ev[0].Message, "epoch 4 kept in s3://lab/app (2.0 MB by 2 nodes, ") {
		t.Fatalf("events %+v; want one saying epoch 4 was kept, 2.0 MB by 2 nodes", ev)
	}
	var info job.Job
	info.Apply(ev[0])
	if info.Durable == nil || info.Durable.Epoch != 4 || info.Durable.Location != "s3://lab/app" {
		t.Errorf("the event records %+v, want epoch 4 kept in s3://lab/app", info.Durable)
	}
}

// A node without credentials fails the epoch's copy, named in one event;
// nothing is committed, what was uploaded goes, and the epoch kept before
// stays current.
func TestKeeperNodeWithoutCredentials(t *testing.T) {
	noCreds := fmt.Errorf("%w: its agent has no credentials for s3://lab/app", errkind.NotAvailable)
	k, store, events, _ := keepRun(t, map[string]error{"n2": noCreds})
	k.state = keepState{kept: 3, tried: 3}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.run(ctx)
	}()
	waitFor(t, func() bool { return len(events()) > 0 })
	cancel()
	<-done
	if len(store.committed) != 0 || fmt.Sprint(store.aborted) != "[4]" {
		t.Errorf("committed %v, aborted %v; want nothing committed and epoch 4 aborted", store.committed, store.aborted)
	}
	ev := events()
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "keeping epoch 4 in s3://lab/app failed: node n2") ||
		!strings.Contains(ev[0].Message, "no credentials") || !strings.HasSuffix(ev[0].Message, "epoch 3 stays the one kept") {
		t.Fatalf("events %+v; want one naming n2 and epoch 3 still kept", ev)
	}
	var info job.Job
	info.Apply(ev[0])
	if info.Durable != nil {
		t.Errorf("a failed copy recorded %+v as kept", info.Durable)
	}
	if k.state.kept != 3 || k.state.tried != 4 {
		t.Errorf("state after the failure %+v, want epoch 3 kept, 4 tried", k.state)
	}
}

// heldPeer answers an upload only once release is closed, as a node whose
// upload is under way, or when ctx ends; asked says which ranks it was asked
// for, answered which it finished.
type heldPeer struct {
	Peer
	release  chan struct{}
	mu       *sync.Mutex
	asked    chan int
	answered *[]int
}

func (p heldPeer) UploadShard(ctx context.Context, ref shard.Ref, req api.UploadRequest) (api.Uploaded, error) {
	p.asked <- ref.Rank
	select {
	case <-p.release:
	case <-ctx.Done():
		return api.Uploaded{}, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	*p.answered = append(*p.answered, ref.Rank)
	return api.Uploaded{Size: 1_000_000, Checksum: 40 + uint64(ref.Rank), CreatedNs: 4000}, nil
}

// heldKeeper is keepRun's keeper with n1 alone alive, so that it uploads both
// ranks one after the other, through a heldPeer, started as a run starts it.
func heldKeeper(t *testing.T, ctx context.Context) (stop func(), store *memEpochStore, p heldPeer, events func() []job.Event) {
	t.Helper()
	k, store, events, _ := keepRun(t, nil)
	p = heldPeer{release: make(chan struct{}), mu: &sync.Mutex{}, asked: make(chan int, 2), answered: new([]int)}
	k.b.cfg.Nodes = func(context.Context) ([]node.Node, error) { return []node.Node{{Name: "n1", State: "alive"}}, nil }
	k.b.cfg.Peer = func(node.Node) Peer { return p }
	k.b.cfg.OpenKeep = func(job.DurableTarget) (EpochStore, error) { return store, nil }
	return k.b.startKeeper(ctx), store, p, events
}

// The job's end lets the shard being uploaded land, asks for no other, and
// removes the copy before the end goes on: an upload the coordinator gave up
// on could land in the bucket after shoal run emptied it.
func TestKeeperEndWaitsForUploadUnderWay(t *testing.T) {
	stop, store, p, events := heldKeeper(t, context.Background())
	if r := <-p.asked; r != 0 {
		t.Fatalf("first upload of rank %d, want 0", r)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		stop()
	}()
	select {
	case <-stopped:
		t.Fatal("the job's end went on while rank 0's upload was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(p.release)
	<-stopped
	p.mu.Lock()
	answered := fmt.Sprint(*p.answered)
	p.mu.Unlock()
	if answered != "[0]" || len(p.asked) != 0 {
		t.Errorf("uploads answered %s, %d more asked; want rank 0's alone", answered, len(p.asked))
	}
	if len(store.committed) != 0 || fmt.Sprint(store.aborted) != "[4]" {
		t.Errorf("committed %v, aborted %v; want nothing committed and epoch 4 removed", store.committed, store.aborted)
	}
	if ev := events(); len(ev) != 0 {
		t.Errorf("events %+v; a copy stopped by the job's end is no failure", ev)
	}
}

// A node that stops leading cuts the copy at once and leaves the store alone:
// the next coordinator's copy writes the epoch.
func TestKeeperLostLeadCutsCopy(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stop, store, p, _ := heldKeeper(t, ctx)
	<-p.asked
	cancel(ErrLostLead)
	stop() // returns without release: the upload was cut
	if len(store.committed) != 0 || len(store.aborted) != 0 {
		t.Errorf("committed %v, aborted %v; want the store left alone", store.committed, store.aborted)
	}
}

// waitFor polls cond until it holds, failing the test after a long while.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition never held")
}
