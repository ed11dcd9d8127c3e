package coord

import (
	"context"
	"errors"
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
	"shoal/internal/place"
	"shoal/internal/shard"
)

// downloadPeer is a Peer that holds nothing of the job and fetches shards
// from an object store as asked, or answers fail.
type downloadPeer struct {
	Peer
	node string
	fail error
	mu   *sync.Mutex
	got  map[string][]int // ranks fetched, by node
}

func (p downloadPeer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	return shard.Index{Job: job}, nil
}

func (p downloadPeer) DownloadShard(ctx context.Context, ref shard.Ref, req api.DownloadRequest) (api.Fetched, error) {
	if p.fail != nil {
		return api.Fetched{}, p.fail
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got[p.node] = append(p.got[p.node], ref.Rank)
	return api.Fetched{Copied: true}, nil
}

// keptRun is the backend of a job of 2 ranks whose epoch 4 was complete on
// n2 and n3, both lost, and whose epoch 3 is kept in s3://lab/app; n1 and n4
// are alive and hold nothing. ReadKept answers readErr, or epoch 3's manifest.
func keptRun(t *testing.T, readErr error, fail map[string]error) (*clusterBackend, *[]job.Event, map[string][]int) {
	t.Helper()
	book := epochs.NewBook(2, 2)
	book.StartRun(0)
	book.Index(map[string][]shard.Info{
		"n2": {{Epoch: 4, Rank: 0, Checksum: 40}, {Epoch: 4, Rank: 1, Checksum: 41}},
		"n3": {{Epoch: 4, Rank: 1, Checksum: 41}, {Epoch: 4, Rank: 0, Checksum: 40}},
	}, []string{"n2", "n3"})
	book.MarkComplete(2)
	alive := []node.Node{{Name: "n1", State: "alive"}, {Name: "n4", State: "alive"}}
	var mu sync.Mutex
	got := map[string][]int{}
	cfg := ClusterConfig{
		Node:  "n1",
		Nodes: func(context.Context) ([]node.Node, error) { return alive, nil },
		Peer: func(n node.Node) Peer {
			return downloadPeer{node: n.Name, fail: fail[n.Name], mu: &mu, got: got}
		},
		ReadKept: func(ctx context.Context, k job.Durable) (durable.Manifest, error) {
			if readErr != nil {
				return durable.Manifest{}, readErr
			}
			return durable.Manifest{Identity: durable.Identity{Program: "heat", Ranks: 2}, Job: "j", Epoch: k.Epoch, CreatedNs: 3000,
				Shards: []durable.ShardEntry{{Size: 100, Checksum: 30}, {Size: 100, Checksum: 31}}}, nil
		},
	}
	var events []job.Event
	rec := &memRecord{info: job.Job{ID: "j", Durable: &job.Durable{Epoch: 3, Location: "s3://lab/app"}}}
	b := newClusterBackend(cfg, rec, newJob(Config{}, job.Spec{ID: "j", Ranks: 2}, Output{Events: func(e job.Event) { events = append(events, e) }}), book)
	b.nodes = map[string]node.Node{"n2": {Name: "n2"}, "n3": {Name: "n3"}}
	return b, &events, got
}

// Every node that held epoch 4 lost: the restart takes epoch 3 from the store,
// and each node placed fetches its rank's shard, which the book then counts.
func TestRestartFromKeptEpoch(t *testing.T) {
	b, _, got := keptRun(t, nil, nil)
	rp, err := b.choose(context.Background())
	if err != nil || rp.epoch != 3 || rp.kept != "s3://lab/app" || rp.header.CreatedNs != 3000 {
		t.Fatalf("choose = %+v, %v; want epoch 3 kept in s3://lab/app, created at 3000", rp, err)
	}
	b.nodes = map[string]node.Node{"n1": {Name: "n1"}, "n4": {Name: "n4"}}
	b.placement = place.Placement{"n4", "n1"}
	if err := b.fetchKept(context.Background(), b.kept, map[string][]int{"n4": {0}, "n1": {1}}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "map[n1:[1] n4:[0]]" {
		t.Errorf("fetched %v, want rank 0's shard on n4 and rank 1's on n1", got)
	}
	if h0, h1 := b.book.Holders(3, 0), b.book.Holders(3, 1); fmt.Sprint(h0, h1) != "[n4] [n1]" {
		t.Errorf("holders of epoch 3 = %v, %v; want [n4], [n1]", h0, h1)
	}
	note := restartNote(ending{Outcome: job.Outcome{Kind: job.NodeLost, Detail: "node n2, n3 lost (no answer)"}, wholeJob: true}, rp, time.Second)(2, "on 2 nodes (n4 n1)", false)
	if !strings.Contains(note, "restarting 2 ranks from epoch 3 kept in s3://lab/app (no node holds a newer one) on 2 nodes") {
		t.Errorf("restart line %q does not say where epoch 3 came from", note)
	}
}

// Without credentials on this node the job restarts as without a kept epoch,
// and is told why once; a node that cannot fetch ends the relaunch, which is
// then chosen without the kept epoch.
func TestRestartFromKeptEpochRefused(t *testing.T) {
	noCreds := fmt.Errorf("%w at s3://lab/app", durable.ErrNoCredentials)
	b, events, _ := keptRun(t, noCreds, nil)
	for range 2 {
		if rp, err := b.choose(context.Background()); !errors.Is(err, epochs.ErrLost) || rp.kept != "" {
			t.Errorf("choose without credentials = %+v, %v; want epoch 4 lost", rp, err)
		}
	}
	if len(*events) != 1 || !strings.Contains((*events)[0].Message, "has no credentials for it") {
		t.Errorf("events %v; want one saying n1 has no credentials", *events)
	}

	b, _, _ = keptRun(t, nil, map[string]error{"n1": fmt.Errorf("%w: no credentials", errkind.NotAvailable)})
	if rp, err := b.choose(context.Background()); err != nil || rp.epoch != 3 {
		t.Fatalf("choose = %+v, %v; want epoch 3", rp, err)
	}
	b.nodes = map[string]node.Node{"n1": {Name: "n1"}, "n4": {Name: "n4"}}
	b.placement = place.Placement{"n4", "n1"}
	var le *lossError
	if err := b.fetchKept(context.Background(), b.kept, map[string][]int{"n4": {0}, "n1": {1}}); !errors.As(err, &le) || !le.loss.corrupt {
		t.Fatalf("fetchKept with n1 unable = %v; want a relaunch", err)
	}
	if rp, err := b.choose(context.Background()); rp.kept != "" || !errors.Is(err, epochs.ErrLost) {
		t.Errorf("choose after the refusal = %+v, %v; want without the kept epoch", rp, err)
	}
}
