package staging

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"shoal/internal/epochs"
	"shoal/internal/errkind"
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
