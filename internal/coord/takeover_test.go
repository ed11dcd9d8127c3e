package coord

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// blockingPeer records its revokes and holds each until release is closed or
// the request's context ends.
type blockingPeer struct {
	Peer
	name    string
	got     chan string
	release chan struct{}
	indexed chan string
}

func (p blockingPeer) Revoke(ctx context.Context, job string) error {
	select {
	case <-p.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.got <- p.name
	return nil
}

// Shards answers that the node holds rank 0 of epoch 1, and says it was asked
// in indexed when that is set.
func (p blockingPeer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	if p.indexed != nil {
		p.indexed <- p.name
	}
	return shard.Index{Job: job, Shards: []shard.Info{{Epoch: 1, Rank: 0, Checksum: 10}}}, nil
}

// revokedNow drains what has been revoked so far, sorted.
func revokedNow(got chan string) []string {
	var out []string
	for {
		select {
		case n := <-got:
			out = append(out, n)
		case <-time.After(50 * time.Millisecond):
			slices.Sort(out)
			return out
		}
	}
}

// TestFenceAllAfterEarlyFence: a new coordinator's run waits for the fence its
// takeover began and revokes the job only on the live nodes that fence did not
// ask (one that joined since, the last coordinator when alive); a fence cut
// short by the end of the term counts for nothing, and the run fences every
// live node itself.
func TestFenceAllAfterEarlyFence(t *testing.T) {
	live := []node.Node{{Name: "a", State: "alive"}, {Name: "b", State: "alive"}, {Name: "c", State: "alive"}}
	got := make(chan string, 10)
	release := make(chan struct{})
	peer := func(n node.Node) Peer { return blockingPeer{name: n.Name, got: got, release: release} }
	cfg := ClusterConfig{Nodes: func(context.Context) ([]node.Node, error) { return live, nil }, Peer: peer}
	rec := &memRecord{info: job.Job{ID: "j", Spec: job.Spec{ID: "j", Ranks: 2, Engine: "openmpi"}}}
	b := NewClusterRun(cfg, rec, Output{}, nil, nil).b

	early := Fence(context.Background(), live[:2], peer, "j", nil)
	ended := make(chan struct{})
	go func() {
		b.fenceAll(context.Background(), early)
		close(ended)
	}()
	select {
	case <-ended:
		t.Fatal("fenceAll returned before the early fence's revokes were answered")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-ended
	if got := revokedNow(got); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("revoked %v, want a and b once by the early fence and c by the run", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan struct{})
	cut := Fence(ctx, live[:2], func(n node.Node) Peer { return blockingPeer{name: n.Name, got: got, release: held} }, "j", nil)
	cancel() // the term ends before the nodes answer
	<-cut.Done()
	b.fenceAll(context.Background(), cut)
	if got := revokedNow(got); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after a fence cut short, the run revoked %v, want every live node", got)
	}
}

// TestRefreshTakesFencedIndexes: a takeover's fence asks each node which shards
// of the job it holds right after its revoke, and the run's first refresh takes
// those answers instead of asking the nodes again; it asks only the nodes that
// fence did not (c), and the next refresh asks every node.
func TestRefreshTakesFencedIndexes(t *testing.T) {
	live := []node.Node{{Name: "a", State: "alive"}, {Name: "b", State: "alive"}, {Name: "c", State: "alive"}}
	got, indexed := make(chan string, 10), make(chan string, 10)
	release := make(chan struct{})
	close(release)
	peer := func(n node.Node) Peer {
		return blockingPeer{name: n.Name, got: got, release: release, indexed: indexed}
	}
	cfg := ClusterConfig{Nodes: func(context.Context) ([]node.Node, error) { return live, nil }, Peer: peer}
	rec := &memRecord{info: job.Job{ID: "j", Spec: job.Spec{ID: "j", Ranks: 2, Engine: "openmpi"}}}
	b := NewClusterRun(cfg, rec, Output{}, nil, nil).b

	b.fenceAll(context.Background(), Fence(context.Background(), live[:2], peer, "j", nil))
	if asked := revokedNow(indexed); !slices.Equal(asked, []string{"a", "b"}) {
		t.Fatalf("the fence asked %v for their indexes, want a and b", asked)
	}
	b.nodes = map[string]node.Node{"a": live[0], "b": live[1], "c": live[2]}
	b.placement = []string{"a", "b"} // rank 0 wrote on a; b and c hold copies
	b.refresh(context.Background())
	if asked := revokedNow(indexed); !slices.Equal(asked, []string{"c"}) {
		t.Errorf("the first refresh asked %v, want c alone", asked)
	}
	for _, n := range []string{"a", "b", "c"} {
		if len(b.indexes[n].Shards) != 1 {
			t.Errorf("node %s's index %+v, want its shard recorded", n, b.indexes[n])
		}
	}
	if h := b.book.Holders(1, 0); !slices.Equal(h, []string{"a", "b", "c"}) {
		t.Errorf("the book has epoch 1 rank 0 on %v, want a, b and c", h)
	}
	b.refresh(context.Background())
	if asked := revokedNow(indexed); !slices.Equal(asked, []string{"a", "b", "c"}) {
		t.Errorf("the second refresh asked %v, want every node", asked)
	}
}

// TestPrepareWaitsForFetch: a job taken over is staged from this node only
// once the fetch of its files the takeover began has ended, and a fetch that
// failed is said in an event, once.
func TestPrepareWaitsForFetch(t *testing.T) {
	nodes := []node.Node{{Name: "a", State: "alive", Cores: 2}, {Name: "b", State: "alive", Cores: 2}}
	log := &callLog{}
	data := t.TempDir()
	cfg := ClusterConfig{
		Node: "a", DataDir: data,
		Nodes: func(context.Context) ([]node.Node, error) { return nodes, nil },
		Peer:  func(n node.Node) Peer { return nodePeer{node: n.Name, log: log, revokes: newBarrier(1)} },
	}
	spec := job.Spec{ID: "j", Ranks: 4, Argv: []string{"prog"}, Files: []job.File{{Name: "prog", SHA256: "00"}}}
	rec := &memRecord{info: job.Job{ID: "j", Spec: spec}}
	var events []string
	var mu sync.Mutex
	out := Output{Events: func(e job.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e.Message)
	}}
	rj := newJob(Config{RunRoot: filepath.Join(data, "coord")}, job.Spec{ID: "j", Ranks: 4, Argv: []string{"prog"}}, out)
	rj.resume = &Resume{Why: "coordinator lost", Fetched: func(context.Context) error {
		log.add("fetched")
		return errors.New("no live node has prog")
	}}
	b := newClusterBackend(cfg, rec, rj, epochs.NewBook(4, 2))
	if err := os.MkdirAll(filepath.Join(data, "coord", "j"), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, _, err := b.prepare(context.Background(), launchRequest{ranksDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	fetched := slices.Index(log.calls, "fetched")
	grant := slices.IndexFunc(log.calls, func(c string) bool { return strings.HasPrefix(c, "grant") })
	if fetched < 0 || grant < fetched {
		t.Errorf("calls %q: want the fetch waited for before the grants", log.calls)
	}
	warned := 0
	for _, e := range events {
		if strings.Contains(e, "warning: no live node has prog") {
			warned++
		}
	}
	if warned != 1 || strings.Count(strings.Join(log.calls, " "), "fetched") != 1 {
		t.Errorf("events %q, calls %q: want the fetch waited for and its failure said once over two launches", events, log.calls)
	}
}
