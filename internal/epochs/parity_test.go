package epochs

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// paritied returns a book of a job with rs:k+m whose run, its ranks written
// by writers (rank → node) on nodes, has written epoch 1 and planned its
// groups.
func paritied(t *testing.T, k, m int, writers, nodes []string) Book {
	t.Helper()
	b := written(len(writers), m+1, writers, 1)
	b.Parity = &ParitySpec{K: k, M: m}
	b.PlanGroups(nodes, writers)
	if len(b.Epochs[1].Groups) == 0 {
		t.Fatalf("rs:%d+%d over %v: no groups planned", k, m, nodes)
	}
	return b
}

// encodeAll records every row Encodes asks for as computed, and returns them.
func encodeAll(b *Book, nodes []string) []Encode {
	encodes := b.Encodes(nodes, func(uint64, int, int) bool { return false })
	for _, e := range encodes {
		for _, r := range e.Rows() {
			b.AddRow(e.Epoch, e.Group, r.Row, r.To)
		}
	}
	return encodes
}

var six = []string{"n1", "n2", "n3", "n4", "n5", "n6"}

func TestParityCompletesOnceEveryRowIsHeld(t *testing.T) {
	b := paritied(t, 3, 2, six, six)
	if got := b.Want(6); got != 1 {
		t.Errorf("Want(6) with parity = %d, want 1 copy", got)
	}
	if r := b.Replicas(six, func(uint64, int, string) bool { return false }); len(r) != 0 {
		t.Errorf("parity job asked for copies: %v", r)
	}
	if got := b.MarkComplete(6); len(got) != 0 {
		t.Fatalf("complete before any parity row: %v", got)
	}
	encodes := b.Encodes(six, func(uint64, int, int) bool { return false })
	if len(encodes) != 2 {
		t.Fatalf("Encodes = %d, want one per group (2): %+v", len(encodes), encodes)
	}
	var rows []RowTarget
	for _, e := range encodes {
		g := b.Epochs[1].Groups[e.Group]
		// One node computes the group's rows and pushes the others: the
		// group's shards are read once.
		if e.Row != 0 || len(e.Push) != 1 || e.Push[0].Row != 1 {
			t.Errorf("group %d: computes row %d and pushes %+v, want row 0 pushing row 1", e.Group, e.Row, e.Push)
		}
		for _, mb := range e.Members {
			if mb.Holder == "" || mb.Holder == e.To || mb.Sum != sum(1, mb.Rank) {
				t.Errorf("row %d of group %d on %s: member %+v", e.Row, e.Group, e.To, mb)
			}
		}
		for _, r := range e.Rows() {
			if r.To != g.Nodes[r.Row] || e.M != 2 {
				t.Errorf("row %d of group %d goes to %s (m %d), planned %s", r.Row, e.Group, r.To, e.M, g.Nodes[r.Row])
			}
			rows = append(rows, r)
		}
	}
	// Rows being computed are not asked for again.
	if again := b.Encodes(six, func(uint64, int, int) bool { return true }); len(again) != 0 {
		t.Errorf("busy rows asked again: %v", again)
	}
	for i, r := range rows[:3] {
		b.AddRow(1, encodes[i/2].Group, r.Row, r.To)
	}
	if got := b.MarkComplete(6); len(got) != 0 {
		t.Fatalf("complete with a row missing: %v", got)
	}
	// A row whose push failed is asked for alone, of its own node.
	again := b.Encodes(six, func(uint64, int, int) bool { return false })
	if len(again) != 1 || again[0].Group != encodes[1].Group || again[0].Row != 1 || again[0].To != rows[3].To || len(again[0].Push) != 0 {
		t.Fatalf("Encodes with one row missing = %+v, want row 1 of group %d on %s alone", again, encodes[1].Group, rows[3].To)
	}
	b.AddRow(1, encodes[1].Group, rows[3].Row, rows[3].To)
	if got := b.MarkComplete(6); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("MarkComplete with every row = %v, want [1]", got)
	}
}

// TestParitySurvivesAnyMLost loses every set of up to three of six nodes from
// an rs:3+2 epoch (one rank a node, and two a node): any two lost, every lost
// shard can be rebuilt; some sets of three lose the epoch, named.
func TestParitySurvivesAnyMLost(t *testing.T) {
	for _, writers := range [][]string{six, append(slices.Clone(six), six...)} {
		b := paritied(t, 3, 2, writers, six)
		encodeAll(&b, six)
		if got := b.MarkComplete(6); !slices.Equal(got, []uint64{1}) {
			t.Fatalf("%d ranks: MarkComplete = %v", len(writers), got)
		}
		lostSome := false
		for mask := 1; mask < 1<<6; mask++ {
			var live, gone []string
			for i, n := range six {
				if mask&(1<<i) != 0 {
					gone = append(gone, n)
				} else {
					live = append(live, n)
				}
			}
			epoch, _, err := b.Choose(live)
			switch {
			case len(gone) <= 2 && (err != nil || epoch != 1):
				t.Errorf("%d ranks, %v lost: Choose = %d, %v; want epoch 1", len(writers), gone, epoch, err)
			case len(gone) <= 2:
				for r, n := range writers {
					if slices.Contains(gone, n) {
						rb, ok := b.RebuildFor(1, r, live[0], live)
						if !ok {
							t.Errorf("%v lost: rank %d cannot be rebuilt", gone, r)
						}
						checkRebuild(t, rb, live, gone)
					}
				}
			case len(gone) == 3 && err != nil:
				lostSome = true
				var lost *LostError
				if !errors.As(err, &lost) || lost.Epoch != 1 || len(lost.Ranks) == 0 {
					t.Errorf("%v lost: error %v, want the epoch lost with its ranks", gone, err)
				}
			}
		}
		if !lostSome {
			t.Errorf("%d ranks: no set of three nodes lost the epoch: rs:3+2 cannot survive every three", len(writers))
		}
	}
}

// checkRebuild checks that a rebuild plan reads only live nodes and has the
// group's K pieces.
func checkRebuild(t *testing.T, rb Rebuild, live, gone []string) {
	t.Helper()
	have := 0
	for _, m := range rb.Members {
		if m.Holder != "" {
			if !slices.Contains(live, m.Holder) {
				t.Errorf("rebuild of rank %d reads shard of rank %d from %s, lost", rb.Rank, m.Rank, m.Holder)
			}
			if m.Rank != rb.Rank {
				have++
			}
		}
	}
	for _, r := range rb.Rows {
		if slices.Contains(gone, r.Holder) {
			t.Errorf("rebuild of rank %d reads row %d from %s, lost", rb.Rank, r.Row, r.Holder)
		}
		have++
	}
	if have < len(rb.Members) {
		t.Errorf("rebuild of rank %d: %d pieces for a group of %d", rb.Rank, have, len(rb.Members))
	}
}

func TestParityRowsCountOnlyForTheCountedShards(t *testing.T) {
	b := paritied(t, 3, 2, six, six)
	g := b.Epochs[1].Groups[0]
	sums := make([]uint64, len(g.Ranks))
	for i, r := range g.Ranks {
		sums[i] = sum(1, r)
	}
	stale := slices.Clone(sums)
	stale[0]++ // a row computed from another run's shard under the same number
	b.IndexParity(map[string][]ParityRow{
		g.Nodes[0]: {{Epoch: 1, Group: 0, Row: 0, Ranks: g.Ranks, Sums: stale}},
		g.Nodes[1]: {{Epoch: 1, Group: 0, Row: 1, Ranks: g.Ranks, Sums: sums}},
	})
	if h := b.Epochs[1].Groups[0].Holders; len(h[0]) != 0 || !slices.Equal(h[1], []string{g.Nodes[1]}) {
		t.Fatalf("holders after indexing a stale row 0 and a good row 1: %v", h)
	}
	// The node answers again without the row (found corrupt since): it no
	// longer counts.
	b.IndexParity(map[string][]ParityRow{g.Nodes[1]: nil})
	if h := b.Epochs[1].Groups[0].Holders[1]; len(h) != 0 {
		t.Errorf("row 1 still held by %v after its node listed none", h)
	}
}

func TestParityOnTooFewNodesKeepsCopies(t *testing.T) {
	b := written(2, 3, []string{"a", "b"}, 1) // rs:3+2 keeps M+1 = 3 copies then
	b.Parity = &ParitySpec{K: 3, M: 2}
	b.PlanGroups([]string{"a", "b"}, []string{"a", "b"})
	if b.Epochs[1].Groups != nil {
		t.Errorf("groups planned on 2 nodes for rs:3+2: %v", b.Epochs[1].Groups)
	}
	if got := b.Want(2); got != 2 {
		t.Errorf("Want(2) = %d, want a copy on both nodes", got)
	}
	b.AddCopy(1, 0, "b")
	b.AddCopy(1, 1, "a")
	if got := b.MarkComplete(2); !slices.Equal(got, []uint64{1}) {
		t.Errorf("MarkComplete(2) with a copy on both = %v, want [1]", got)
	}
}

func TestParityBookRoundTrips(t *testing.T) {
	b := paritied(t, 2, 1, []string{"a", "b", "c", "d"}, []string{"a", "b", "c", "d"})
	encodeAll(&b, []string{"a", "b", "c", "d"})
	b.MarkComplete(4)
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Book
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	c := back.Clone()
	if fmt.Sprint(c.Epochs[1].Groups) != fmt.Sprint(b.Epochs[1].Groups) || *c.Parity != *b.Parity {
		t.Errorf("groups after a round trip: %v, want %v", c.Epochs[1].Groups, b.Epochs[1].Groups)
	}
	c.Epochs[1].Groups[0].Holders[0][0] = "x"
	if b.Epochs[1].Groups[0].Holders[0][0] == "x" {
		t.Error("Clone shares the groups' holders")
	}
}
