package staging

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// A copy refused as corrupt names the check it failed.
func TestCorruptCheck(t *testing.T) {
	refused := fmt.Errorf("stage rank 1's shard of epoch 2 from n2 to n1: %w: shard: checksum mismatch", errkind.Corrupt)
	if got := corruptCheck(refused); got != "checksum mismatch" {
		t.Errorf("corruptCheck = %q, want checksum mismatch", got)
	}
	if got := corruptCheck(errors.New("shard: something else")); got != "verification" {
		t.Errorf("corruptCheck = %q, want verification", got)
	}
}

// fiveNodeBook is the book of a job of 5 ranks, one on each of n1..n5, kept as
// two copies, each rank's second copy on the next node: epochs 3 and 4 complete.
func fiveNodeBook() epochs.Book {
	writers := []string{"n1", "n2", "n3", "n4", "n5"}
	b := epochs.NewBook(5, 2)
	b.StartRun(0)
	idx := map[string][]shard.Info{}
	for _, e := range []uint64{3, 4} {
		for r, n := range writers {
			idx[n] = append(idx[n], si(e, r, sum(e, r)))
		}
	}
	b.Index(idx, writers)
	for _, e := range []uint64{3, 4} {
		for r := range writers {
			b.AddCopy(e, r, writers[(r+1)%len(writers)])
		}
	}
	b.MarkComplete(5)
	return b
}

// si is the index entry of rank's shard of epoch with checksum sum.
func si(epoch uint64, rank int, sum uint64) shard.Info {
	return shard.Info{Epoch: epoch, Rank: rank, Checksum: sum, CreatedNs: epoch * 1000}
}

// sum is the checksum the writer of rank's shard of epoch reports in these tests.
func sum(epoch uint64, rank int) uint64 { return epoch*100 + uint64(rank) }

// Each shard of the epoch of the old count ends on a node of the resized
// run: where one holds it already, else copied from a live holder to the
// node of the new rank whose part starts where the old rank's does.
func TestResizeSources(t *testing.T) {
	// Epoch 4 of 5 ranks: rank r on n(r+1) and n(r+2), going round.
	book := fiveNodeBook()
	byNode := map[string][]int{"n1": {0, 1}, "n2": {2, 3}}
	got, rebuilds, err := ResizeSources(&book, byNode, 4, []string{"n1", "n2", "n3", "n4"})
	if err != nil || len(rebuilds) != 0 {
		t.Fatalf("ResizeSources: %v, rebuilds %v", err, rebuilds)
	}
	slices.SortFunc(got, func(x, y epochs.Replica) int { return x.Rank - y.Rank })
	want := []epochs.Replica{
		{Epoch: 4, Rank: 0, From: "n2", To: "n1"}, // n1 holds it: checked against n2's
		{Epoch: 4, Rank: 1, From: "n3", To: "n2"}, // n2 holds it
		{Epoch: 4, Rank: 2, From: "n3", To: "n1"}, // new rank 1's node gets it
		{Epoch: 4, Rank: 3, From: "n4", To: "n2"},
		// rank 4: n1 holds it, and no other live node does: nothing to do
	}
	if !slices.Equal(got, want) {
		t.Errorf("ResizeSources:\n got %v\nwant %v", got, want)
	}
	_, _, err = ResizeSources(&book, byNode, 4, []string{"n1", "n2"})
	if err == nil || !strings.Contains(err.Error(), "rank 2's shard of epoch 4") {
		t.Errorf("with n3, n4, n5 gone: err %v, want rank 2's shard lost", err)
	}
}

// quietBook is a book the staging under test changes nothing in that matters.
type quietBook struct{}

func (quietBook) WasCorrupt(uint64, int, string) bool      { return false }
func (quietBook) FoundCorrupt(uint64, int, string, string) {}
func (quietBook) Copied(epochs.ShardCopy)                  {}

// silentHoldersPeer is a node whose rebuilds fail because the holders of the
// group's pieces at silent gave it no answer.
type silentHoldersPeer struct {
	Peer
	silent []string
}

func (p silentHoldersPeer) Rebuild(ctx context.Context, ref shard.Ref, req api.RebuildRequest) error {
	return &errkind.NoAnswer{Addrs: p.silent, Err: fmt.Errorf("%w: rebuild shard %s: read 1 of the 2 pieces it needs", errkind.BadGateway, ref)}
}

// A rebuild that fails because a piece's holder gave the rebuilding node no
// answer counts that holder down, as a copy's does its source: the run is
// placed again without it. The rebuilding node answered, and is not.
func TestShardsRebuildCountsSilentHoldersDown(t *testing.T) {
	nodes := map[string]node.Node{}
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("n%d", i)
		nodes[name] = node.Node{Name: name, API: fmt.Sprintf("10.0.0.%d:7947", i)}
	}
	rb := epochs.Rebuild{Epoch: 2, Rank: 1, To: "n1", Group: 0, M: 2,
		Members: []epochs.GroupMember{{Rank: 1, Bytes: 10, Sum: 1}, {Rank: 3, Bytes: 10, Sum: 2, Holder: "n4"}},
		Rows:    []epochs.RowHolder{{Row: 0, Holder: "n5"}, {Row: 1, Holder: "n3"}}}
	run := Run{Job: "heat", Sources: nodes, Book: quietBook{}, Event: func(string, job.Event) {},
		Peer: func(string) Peer { return silentHoldersPeer{silent: []string{"10.0.0.4:7947", "10.0.0.9:7947"}} }}
	out := Shards(context.Background(), run, 2, nil, []epochs.Rebuild{rb})
	if !slices.Equal(out.Down, []string{"n4"}) || !errors.Is(out.Err, errkind.BadGateway) {
		t.Errorf("rebuild whose piece on n4 gave no answer: down %v, error %v; want n4 down", out.Down, out.Err)
	}
}
