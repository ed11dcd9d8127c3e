package coord

import (
	"context"
	"slices"
	"testing"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/place"
	"shoal/internal/shard"
	"shoal/internal/staging"
)

// rebuildPeer is a node that rebuilds every shard it is asked to.
type rebuildPeer struct{ staging.Peer }

func (rebuildPeer) Rebuild(ctx context.Context, ref shard.Ref, req api.RebuildRequest) error {
	return nil
}

// TestRebuiltShardOutlivesALaggingIndex: a shard rebuilt from its parity group
// as a restart is staged counts in the book until its node's index shows it,
// as a copy fetched does. The node's index taken before the rebuild, which
// still lists the corrupt copy the rebuild replaced, neither drops the shard
// from the book nor has the copy reported corrupt again.
func TestRebuiltShardOutlivesALaggingIndex(t *testing.T) {
	b := newClusterBackend(ClusterConfig{}, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: 2}, Output{}), epochs.NewBook(2, 1))
	b.placement = place.Placement{"a", "b"}
	b.nodes = map[string]node.Node{"a": {Name: "a"}, "b": {Name: "b"}}
	b.book.StartRun(0)
	b.book.Index(map[string][]shard.Info{"a": {{Epoch: 1, Rank: 0, Checksum: 10}}, "b": {{Epoch: 1, Rank: 1, Checksum: 11}}}, b.placement)
	b.book.MarkComplete(2)
	lagging := map[string]shard.Index{
		"a": {Bad: []shard.Bad{{Epoch: 1, Rank: 0, Error: "checksum mismatch"}}},
		"b": {Shards: []shard.Info{{Epoch: 1, Rank: 1, Checksum: 11}}},
	}
	b.mu.Lock()
	b.indexBook(lagging)
	b.corrupt = nil
	b.mu.Unlock()
	if h := b.book.Holders(1, 0); len(h) != 0 {
		t.Fatalf("holders of rank 0's shard %v after a's copy went corrupt, want none", h)
	}

	run := staging.Run{Job: "j", Peer: func(string) staging.Peer { return rebuildPeer{} }, Sources: b.nodes, Book: stagingBook{b}, Event: func(string, job.Event) {}}
	if out := staging.Shards(context.Background(), run, 1, nil, []epochs.Rebuild{{Epoch: 1, Rank: 0, To: "a", M: 1}}); out.Err != nil {
		t.Fatalf("staging: %v", out.Err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.made.IndexTaken("a")
	b.made.IndexTaken("b")
	b.indexBook(lagging) // taken before the rebuild landed
	if got := b.book.Holders(1, 0); !slices.Equal(got, []string{"a"}) {
		t.Errorf("holders of rank 0's shard %v after an index of a that predates the rebuild, want [a]", got)
	}
	if len(b.corrupt) != 0 {
		t.Errorf("corrupt copies reported %+v, want none: a's copy was rebuilt", b.corrupt)
	}
}
