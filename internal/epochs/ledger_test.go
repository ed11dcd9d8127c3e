package epochs

import (
	"slices"
	"testing"

	"shoal/internal/shard"
)

// TestMadeLedger: a copy or a parity row made counts in the book, rebuilt
// from indexes that do not show it yet, until an index of its holder taken
// since shows it, or two were taken (the first may have been made before the
// copy landed); what the second says stands. One of an epoch the book no
// longer has is forgotten, not brought back.
func TestMadeLedger(t *testing.T) {
	writers := []string{"a", "b"}
	idx := map[string][]shard.Info{"a": {si(1, 0, sum(1, 0))}, "b": {si(1, 1, sum(1, 1))}}
	b := written(2, 2, writers, 1)
	m := NewLedger()
	m.IndexTaken("b") // an index of b before the copy settles nothing
	b.AddCopy(1, 0, "b")
	m.Copy(ShardCopy{1, 0, "b"})
	m.Copy(ShardCopy{9, 0, "b"}) // an epoch pruned since
	holders := func(rank int, want []string, when string) {
		t.Helper()
		b.Index(idx, writers)
		m.Apply(&b)
		if got := b.Holders(1, rank); !slices.Equal(got, want) {
			t.Errorf("%s: rank %d on %v, want %v", when, rank, got, want)
		}
	}
	holders(0, []string{"a", "b"}, "copy made, the indexes not showing it")
	if b.Epochs[9] != nil {
		t.Error("a copy of an epoch the book does not have brought it back")
	}
	if r := b.Replicas(writers, func(uint64, int, string) bool { return false }); len(r) != 1 || r[0].Rank != 1 {
		t.Errorf("copies asked for: %+v, want rank 1's only", r)
	}
	m.IndexTaken("a")
	holders(0, []string{"a", "b"}, "after an index of another node")
	m.IndexTaken("b")
	holders(0, []string{"a", "b"}, "after one index of b without it (made before it landed?)")
	m.IndexTaken("b")
	holders(0, []string{"a"}, "after a second index of b without it")
	m.IndexTaken("b")
	holders(0, []string{"a"}, "after a third")

	// An index taken since that shows the copy settles it at once.
	b.AddCopy(1, 1, "a")
	m.Copy(ShardCopy{1, 1, "a"})
	idx["a"] = append(idx["a"], si(1, 1, sum(1, 1)))
	m.IndexTaken("a")
	holders(1, []string{"a", "b"}, "a's index showing the copy")
	idx["a"] = idx["a"][:1] // lost again: the next index says so
	holders(1, []string{"b"}, "a's index showing the copy lost")

	// Parity rows alike.
	p := paritied(t, 3, 2, six, six)
	m = NewLedger()
	encodes := encodeAll(&p, six)
	for _, e := range encodes {
		for _, r := range e.Rows() {
			m.Row(RowCopy{ParityCopy{e.Epoch, e.Group, r.Row}, r.To})
		}
	}
	none := map[string][]ParityRow{}
	for _, n := range six {
		none[n] = nil
	}
	for taken := 0; taken < 3; taken++ {
		p.IndexParity(none)
		m.Apply(&p)
		again := p.Encodes(six, func(uint64, int, int) bool { return false })
		switch {
		case taken < 2 && (len(again) != 0 || !p.Epochs[1].paritySafe()):
			t.Errorf("rows made, %d indexes of their nodes since: asked again for %+v", taken, again)
		case taken == 2 && len(again) != len(encodes):
			t.Errorf("rows two indexes of their nodes do not show: asked for %d encodes, want %d", len(again), len(encodes))
		}
		for _, n := range six {
			m.IndexTaken(n)
		}
	}
}
