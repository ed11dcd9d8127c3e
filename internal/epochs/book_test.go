package epochs

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"shoal/internal/job"
	"shoal/internal/shard"
)

// si is the index entry of rank's shard of epoch with checksum sum.
func si(epoch uint64, rank int, sum uint64) shard.Info {
	return shard.Info{Epoch: epoch, Rank: rank, Checksum: sum, CreatedNs: epoch * 1000}
}

// sum is the checksum the writer of rank's shard of epoch reports in these tests.
func sum(epoch uint64, rank int) uint64 { return epoch*100 + uint64(rank) }

// written returns a book of nranks ranks at redundancy whose run (placed as
// writers) has written epochs, each rank's shard on its own node only.
func written(nranks, redundancy int, writers []string, epochs ...uint64) Book {
	b := NewBook(nranks, redundancy)
	b.StartRun(0)
	idx := map[string][]shard.Info{}
	for _, e := range epochs {
		for r, n := range writers {
			idx[n] = append(idx[n], si(e, r, sum(e, r)))
		}
	}
	b.Index(idx, writers)
	return b
}

func TestEpochBookCompletion(t *testing.T) {
	tests := []struct {
		name       string
		redundancy int
		nodes      int      // nodes of the run
		copies     []string // extra copies of every shard of epoch 1: rank r's on copies[r]
		want       []uint64
	}{
		{"redundancy 1: the writers' shards are enough", 1, 3, nil, []uint64{1}},
		{"redundancy 2, no copies yet", 2, 3, nil, nil},
		{"redundancy 2, a copy of each", 2, 3, []string{"b", "c", "a"}, []uint64{1}},
		{"redundancy 2, rank 2's copy missing", 2, 3, []string{"b", "c", ""}, nil},
		{"redundancy 3 on 3 nodes, one copy each", 3, 3, []string{"b", "c", "a"}, nil},
		{"redundancy 2 on 1 node: one copy is all there can be", 2, 1, nil, []uint64{1}},
		{"redundancy 3 on 2 nodes: two copies are enough", 3, 2, []string{"b", "c", "a"}, []uint64{1}},
		{"redundancy 3 on 2 nodes, one rank short", 3, 2, []string{"b", "", "a"}, nil},
	}
	for _, tt := range tests {
		b := written(3, tt.redundancy, []string{"a", "b", "c"}, 1)
		for r, n := range tt.copies {
			if n != "" {
				b.AddCopy(1, r, n)
			}
		}
		got := b.MarkComplete(tt.nodes)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: MarkComplete(%d nodes) = %v, want %v", tt.name, tt.nodes, got, tt.want)
		}
		if again := b.MarkComplete(tt.nodes); len(again) != 0 {
			t.Errorf("%s: epochs %v completed twice", tt.name, again)
		}
		if got := b.Complete(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Complete() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestEpochBookRedundancy3(t *testing.T) {
	b := written(2, 3, []string{"a", "b"}, 1)
	b.AddCopy(1, 0, "b")
	b.AddCopy(1, 1, "c")
	if got := b.MarkComplete(3); len(got) != 0 {
		t.Errorf("complete with two copies of each at redundancy 3: %v", got)
	}
	b.AddCopy(1, 0, "c")
	b.AddCopy(1, 1, "a")
	if got := b.MarkComplete(3); !slices.Equal(got, []uint64{1}) {
		t.Errorf("three copies of each: complete %v, want [1]", got)
	}
}

func TestEpochBookWant(t *testing.T) {
	tests := []struct{ redundancy, nodes, want int }{
		{1, 3, 1}, {2, 3, 2}, {3, 3, 3}, {3, 2, 2}, {2, 1, 1}, {2, 0, 1}, {0, 3, 1},
	}
	for _, tt := range tests {
		b := NewBook(1, tt.redundancy)
		if got := b.Want(tt.nodes); got != tt.want {
			t.Errorf("Want(redundancy %d, %d nodes) = %d, want %d", tt.redundancy, tt.nodes, got, tt.want)
		}
	}
}

// A copy counts only when it matches the shard its rank's node wrote in the run
// that took the epoch; a node back from a cut with a fenced run's shards under
// reused numbers is not counted, but its numbers are seen.
func TestEpochBookCountsOnlyTheWritersShards(t *testing.T) {
	writers := []string{"a", "b"}
	b := NewBook(2, 2)
	b.Highest = 4
	b.StartRun(0) // 5
	steps := []struct {
		name  string
		node  string
		index []shard.Info
		want  map[[2]int][]string // (epoch, rank) → holders after the step
	}{
		{"a copy before its writer reported", "c", []shard.Info{si(5, 0, 1)},
			map[[2]int][]string{{5, 0}: nil}},
		{"the writer's own shard", "a", []shard.Info{si(5, 0, 1)},
			map[[2]int][]string{{5, 0}: {"a"}}},
		{"a replica and b's own shard", "b", []shard.Info{si(5, 0, 1), si(5, 1, 2)},
			map[[2]int][]string{{5, 0}: {"a", "b"}, {5, 1}: {"b"}}},
		{"the copy c reported first, now checked", "c", []shard.Info{si(5, 0, 1)},
			map[[2]int][]string{{5, 0}: {"a", "b", "c"}}},
		{"a wrong checksum under the same numbers", "d", []shard.Info{si(5, 1, 9)},
			map[[2]int][]string{{5, 1}: {"b"}}},
		{"an epoch never seen written", "d", []shard.Info{si(3, 0, 3)},
			map[[2]int][]string{{3, 0}: nil}},
		{"ahead of the run, written by no run of ours", "d", []shard.Info{si(7, 1, 7)},
			map[[2]int][]string{{7, 1}: nil}},
		{"a writer's shard below the run's base", "a", []shard.Info{si(4, 0, 4), si(5, 0, 1)},
			map[[2]int][]string{{4, 0}: nil, {5, 0}: {"a", "b", "c"}}},
	}
	for _, st := range steps {
		b.Index(map[string][]shard.Info{st.node: st.index}, writers)
		for k, want := range st.want {
			if got := b.Holders(uint64(k[0]), k[1]); !slices.Equal(got, want) {
				t.Errorf("%s: holders of epoch %d rank %d = %v, want %v", st.name, k[0], k[1], got, want)
			}
		}
	}
	if b.Highest != 7 {
		t.Errorf("highest epoch seen %d, want 7: a new run must not reuse a number a node holds", b.Highest)
	}
	if got := b.StartRun(0); got != 8 {
		t.Errorf("the next run starts at %d, want 8", got)
	}
}

// An index replaces what was known of its node: a copy removed or found corrupt
// since is no longer counted, and nodes that did not answer keep theirs.
func TestEpochBookIndexReplacesTheNode(t *testing.T) {
	writers := []string{"a", "b"}
	b := written(2, 2, writers, 1, 2)
	b.Index(map[string][]shard.Info{"c": {si(1, 0, sum(1, 0)), si(1, 1, sum(1, 1)), si(2, 0, sum(2, 0))}}, writers)
	if got := b.Holders(1, 0); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("holders %v, want [a c]", got)
	}
	// c lost epoch 1 (removed) and its copy of epoch 2 rank 0 is corrupt (not listed).
	b.Index(map[string][]shard.Info{"c": {si(1, 1, sum(1, 1))}}, writers)
	tests := []struct {
		epoch uint64
		rank  int
		want  []string
	}{
		{1, 0, []string{"a"}},
		{1, 1, []string{"b", "c"}},
		{2, 0, []string{"a"}},
		{2, 1, []string{"b"}},
	}
	for _, tt := range tests {
		if got := b.Holders(tt.epoch, tt.rank); !slices.Equal(got, tt.want) {
			t.Errorf("holders of epoch %d rank %d = %v, want %v", tt.epoch, tt.rank, got, tt.want)
		}
	}
	// An empty index: the node holds nothing of the job any more.
	b.Index(map[string][]shard.Info{"b": nil}, writers)
	if got := b.Holders(1, 1); !slices.Equal(got, []string{"c"}) {
		t.Errorf("after b's empty index, holders of epoch 1 rank 1 = %v, want [c]", got)
	}
}

// book4 is a job of 5 ranks over n1..n5, redundancy 2, with epochs 3 and 4
// complete: rank r written on n(r+1) and copied to the next node (rank 4 to n1).
func book4() Book {
	writers := []string{"n1", "n2", "n3", "n4", "n5"}
	b := written(5, 2, writers, 3, 4)
	next := map[string]string{"n1": "n2", "n2": "n3", "n3": "n4", "n4": "n5", "n5": "n1"}
	for _, e := range []uint64{3, 4} {
		for r, w := range writers {
			b.AddCopy(e, r, next[w])
		}
	}
	b.MarkComplete(5)
	return b
}

func TestEpochBookChoose(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(*Book)
		live    []string
		want    uint64
		skipped []uint64
		err     string
	}{
		{"every node alive: the newest", nil, []string{"n1", "n2", "n3", "n4", "n5"}, 4, nil, ""},
		{"one node dead: every shard has a second copy", nil, []string{"n1", "n2", "n4", "n5"}, 4, nil, ""},
		{"two neighbours dead: rank 2's copies were on both", nil, []string{"n1", "n2", "n5"}, 0, []uint64{4, 3},
			"epoch 4 lost: shards of rank 2 were only on n3, n4"},
		{"epoch 4 lost, epoch 3 copied elsewhere: fall back", func(b *Book) { b.AddCopy(3, 2, "n1") }, []string{"n1", "n2", "n5"}, 3, []uint64{4}, ""},
		{"two nodes apart dead", nil, []string{"n1", "n3", "n5"}, 4, nil, ""},
		{"three dead: ranks 2 and 3 gone, rank 4 has a copy on n1", nil, []string{"n1", "n2"}, 0, []uint64{4, 3},
			"epoch 4 lost: shards of ranks 2, 3 were only on n3, n4, n5"},
		{"no node alive", nil, nil, 0, []uint64{4, 3},
			"epoch 4 lost: shards of ranks 0, 1, 2, 3, 4 were only on n1, n2, n3, n4, n5"},
	}
	for _, tt := range tests {
		b := book4()
		if tt.setup != nil {
			tt.setup(&b)
		}
		got, skipped, err := b.Choose(tt.live)
		var skippedEpochs []uint64
		for _, s := range skipped {
			skippedEpochs = append(skippedEpochs, s.Epoch)
		}
		if got != tt.want || !slices.Equal(skippedEpochs, tt.skipped) {
			t.Errorf("%s: Choose(%v) = %d skipping %v, want %d skipping %v", tt.name, tt.live, got, skippedEpochs, tt.want, tt.skipped)
		}
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: error %v", tt.name, err)
		case tt.err != "" && (err == nil || !errors.Is(err, ErrLost)):
			t.Errorf("%s: error %v, want ErrLost", tt.name, err)
		case tt.err != "" && err.Error() != tt.err:
			t.Errorf("%s: error %q, want %q", tt.name, err, tt.err)
		}
	}
}

// An epoch passed over is named with the ranks it lost and the nodes that held
// them, as a lost epoch is.
func TestEpochBookPassedOverMessage(t *testing.T) {
	b := book4()
	b.AddCopy(3, 2, "n1")
	_, skipped, err := b.Choose([]string{"n1", "n2", "n5"})
	want := "shards of rank 2 were only on n3, n4"
	if err != nil || len(skipped) != 1 || skipped[0].Err.Error() != want {
		t.Errorf("Choose passed over %v (err %v), want epoch 4 because %q", skipped, err, want)
	}
}

func TestEpochBookLostMessage(t *testing.T) {
	tests := []struct {
		err  LostError
		want string
	}{
		{LostError{Epoch: 4, Ranks: []int{3, 4}, Nodes: []string{"n3", "n4"}}, "epoch 4 lost: shards of ranks 3, 4 were only on n3, n4"},
		{LostError{Epoch: 7, Ranks: []int{0}, Nodes: []string{"n2"}}, "epoch 7 lost: shards of rank 0 were only on n2"},
		{LostError{Epoch: 2, Ranks: []int{1, 5}}, "epoch 2 lost: shards of ranks 1, 5 are on no node"},
		{LostError{Epoch: 3, Ranks: []int{0}, Corrupt: []string{"n1", "n2"}}, "epoch 3 lost: shards of rank 0 are corrupt on n1, n2"},
		{LostError{Epoch: 3, Ranks: []int{0}, Nodes: []string{"n3"}, Corrupt: []string{"n1"}}, "epoch 3 lost: shards of rank 0 were only on n3, and are corrupt on n1"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.err, got, tt.want)
		}
	}
}

// The issue's case: ranks 3 and 4 of epoch 4 were written on n3 and n4 and copied
// to each other; both nodes are gone.
func TestEpochBookIssueMessage(t *testing.T) {
	writers := []string{"n1", "n1", "n2", "n3", "n4"}
	b := written(5, 2, writers, 4)
	for r, n := range []string{"n2", "n2", "n1", "n4", "n3"} {
		b.AddCopy(4, r, n)
	}
	if got := b.MarkComplete(4); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("complete %v, want [4]", got)
	}
	_, _, err := b.Choose([]string{"n1", "n2"})
	if want := "epoch 4 lost: shards of ranks 3, 4 were only on n3, n4"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestEpochBookNoCompleteEpoch(t *testing.T) {
	b := written(2, 2, []string{"a", "b"}, 1) // written, never copied
	epoch, skipped, err := b.Choose([]string{"a", "b"})
	if epoch != 0 || len(skipped) != 0 || !errors.Is(err, ErrNoEpoch) {
		t.Errorf("Choose = %d, %v, %v; want 0 and ckpt.ErrNoEpoch (a fresh start)", epoch, skipped, err)
	}
}

func TestEpochBookPrune(t *testing.T) {
	tests := []struct {
		complete, incomplete []uint64
		pin                  uint64
		keep                 uint64
		pruned               bool
		left                 []uint64
	}{
		{[]uint64{1, 2}, nil, 0, 0, false, []uint64{1, 2}},
		{[]uint64{1, 2, 3}, nil, 0, 2, true, []uint64{2, 3}},
		{[]uint64{1, 2, 3, 5}, []uint64{4, 6}, 0, 3, true, []uint64{3, 4, 5, 6}},
		{[]uint64{2, 4, 6}, []uint64{1, 3, 5, 7}, 0, 4, true, []uint64{4, 5, 6, 7}},
		// An epoch being copied out of the cluster stays, with every newer one.
		{complete: []uint64{1, 2, 3, 4, 5}, pin: 2, keep: 2, pruned: true, left: []uint64{2, 3, 4, 5}},
		{complete: []uint64{1, 2, 3, 4, 5}, pin: 1, keep: 0, pruned: false, left: []uint64{1, 2, 3, 4, 5}},
		{complete: []uint64{1, 2, 3, 4, 5}, pin: 5, keep: 4, pruned: true, left: []uint64{4, 5}},
	}
	for _, tt := range tests {
		b := written(1, 1, []string{"a"}, tt.complete...)
		for _, e := range tt.incomplete {
			b.entry(e) // seen, with no copy yet
		}
		b.MarkComplete(1)
		b.Pin = tt.pin
		keep, pruned := b.Prune()
		var left []uint64
		for e := range b.Epochs {
			left = append(left, e)
		}
		slices.Sort(left)
		if keep != tt.keep || pruned != tt.pruned || !slices.Equal(left, tt.left) {
			t.Errorf("complete %v, incomplete %v, pin %d: Prune() = %d, %v leaving %v; want %d, %v leaving %v",
				tt.complete, tt.incomplete, tt.pin, keep, pruned, left, tt.keep, tt.pruned, tt.left)
		}
	}
}

// TestEpochBookKeepFrom: the floor of the agents' retention is the epoch Prune
// keeps from, before and after pruning, and never above the epoch a restart
// may choose.
func TestEpochBookKeepFrom(t *testing.T) {
	tests := []struct {
		complete []uint64
		floor    uint64
		want     uint64
	}{
		{nil, 0, 0},
		{[]uint64{3}, 0, 0},
		{[]uint64{3}, 2, 2},
		{[]uint64{3, 5}, 0, 3},
		{[]uint64{2, 4, 6}, 0, 4},
		{[]uint64{4, 6}, 4, 4},
	}
	for _, tt := range tests {
		b := written(1, 1, []string{"a"}, tt.complete...)
		b.MarkComplete(1)
		b.Floor = tt.floor
		if got := b.KeepFrom(); got != tt.want {
			t.Errorf("complete %v, floor %d: KeepFrom() = %d, want %d", tt.complete, tt.floor, got, tt.want)
		}
		if keep, pruned := b.Prune(); pruned && keep != b.KeepFrom() {
			t.Errorf("complete %v: Prune kept from %d, KeepFrom() after it = %d", tt.complete, keep, b.KeepFrom())
		}
		if e, _, err := b.Choose([]string{"a"}); err == nil && e < b.KeepFrom() {
			t.Errorf("complete %v: restart from %d, below KeepFrom() = %d", tt.complete, e, b.KeepFrom())
		}
	}
}

// TestEpochBookPrunedStayGone: an index that still lists a pruned epoch (its
// node deletes it a little later) does not bring the epoch back, so it is not
// reported complete twice.
func TestEpochBookPrunedStayGone(t *testing.T) {
	b := written(1, 1, []string{"a"}, 1, 2, 3)
	b.MarkComplete(1)
	if keep, _ := b.Prune(); keep != 2 {
		t.Fatalf("Prune() kept from %d, want 2", keep)
	}
	b.Index(map[string][]shard.Info{"a": {si(1, 0, sum(1, 0)), si(2, 0, sum(2, 0)), si(3, 0, sum(3, 0)), si(4, 0, sum(4, 0))}}, []string{"a"})
	if fresh := b.MarkComplete(1); !slices.Equal(fresh, []uint64{4}) {
		t.Errorf("after an index listing pruned epoch 1 again: newly complete %v, want [4]", fresh)
	}
	if got := b.Complete(); !slices.Equal(got, []uint64{2, 3, 4}) {
		t.Errorf("complete epochs %v, want [2 3 4]", got)
	}
}

func TestEpochBookSource(t *testing.T) {
	b := book4() // epoch 4: rank 2 on n3 and n4
	tests := []struct {
		to    string
		nodes []string
		from  string
		have  bool
	}{
		{"n1", []string{"n1", "n3", "n4"}, "n3", false},
		{"n1", []string{"n1", "n4"}, "n4", false},
		{"n3", []string{"n1", "n3", "n4"}, "n4", true}, // fetched all the same: its copy may be damaged
		{"n3", []string{"n1", "n3"}, "", true},
		{"n1", []string{"n1", "n2"}, "", false},
	}
	for _, tt := range tests {
		from, have := b.Source(4, 2, tt.to, tt.nodes)
		if from != tt.from || have != tt.have {
			t.Errorf("Source(4, 2, %s, %v) = %q, %v; want %q, %v", tt.to, tt.nodes, from, have, tt.from, tt.have)
		}
	}
}

func TestEpochBookReplicas(t *testing.T) {
	none := func(uint64, int, string) bool { return false }
	tests := []struct {
		name  string
		book  func() Book
		nodes []string
		busy  func(uint64, int, string) bool
		want  []Replica
	}{
		{"each shard to the next node by name", func() Book { return written(3, 2, []string{"a", "b", "c"}, 1) },
			[]string{"c", "a", "b"}, none,
			[]Replica{{1, 0, "a", "b"}, {1, 1, "b", "c"}, {1, 2, "c", "a"}}},
		{"a copy under way counts", func() Book { return written(3, 2, []string{"a", "b", "c"}, 1) },
			[]string{"a", "b", "c"}, func(e uint64, r int, n string) bool { return r == 0 && n == "b" },
			[]Replica{{1, 1, "b", "c"}, {1, 2, "c", "a"}}},
		{"the next node busy: the one after", func() Book { return written(1, 3, []string{"a"}, 1) },
			[]string{"a", "b", "c"}, func(e uint64, r int, n string) bool { return n == "b" },
			[]Replica{{1, 0, "a", "c"}}},
		{"four nodes: an even epoch's copies to the next node", func() Book { return written(4, 2, []string{"a", "b", "c", "d"}, 2) },
			[]string{"a", "b", "c", "d"}, none,
			[]Replica{{2, 0, "a", "b"}, {2, 1, "b", "c"}, {2, 2, "c", "d"}, {2, 3, "d", "a"}}},
		{"four nodes: an odd epoch's two on", func() Book { return written(4, 2, []string{"a", "b", "c", "d"}, 1) },
			[]string{"a", "b", "c", "d"}, none,
			[]Replica{{1, 0, "a", "c"}, {1, 1, "b", "d"}, {1, 2, "c", "a"}, {1, 3, "d", "b"}}},
		{"copy:3 on four nodes: one on, whatever the epoch", func() Book { return written(1, 3, []string{"a"}, 1) },
			[]string{"a", "b", "c", "d"}, none, []Replica{{1, 0, "a", "b"}}},
		{"one node: nothing to copy", func() Book { return written(2, 2, []string{"a", "a"}, 1) },
			[]string{"a"}, none, nil},
		{"complete epochs and those two behind are left alone", func() Book {
			b := written(1, 2, []string{"a"}, 1, 2, 3, 4)
			b.AddCopy(4, 0, "b")
			b.MarkComplete(2)
			return b
		}, []string{"a", "b"}, none, []Replica{{2, 0, "a", "b"}, {3, 0, "a", "b"}}},
		{"a holder outside the run is no source", func() Book {
			b := written(1, 2, []string{"x"}, 1)
			return b
		}, []string{"a", "b"}, none, nil},
	}
	for _, tt := range tests {
		b := tt.book()
		if got := b.Replicas(tt.nodes, tt.busy); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Replicas = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Two nodes lost at once, any two, leave a whole epoch to restart from on four
// nodes or more when each shard is kept as two copies: the two epochs a job
// keeps place their copies one and two nodes on (stride). On three nodes the
// one left holds no whole epoch, and the loss names both.
func TestEpochBookTwoLostAtOnce(t *testing.T) {
	for n := 3; n <= 8; n++ {
		nodes := make([]string, n)
		for i := range nodes {
			nodes[i] = fmt.Sprintf("n%d", i+1)
		}
		b := written(n, 2, nodes, 1, 2, 3) // rank r on nodes[r]
		copyAll(&b, nodes, func(uint64) bool { return true })
		if got := b.MarkComplete(n); !reflect.DeepEqual(got, []uint64{1, 2, 3}) {
			t.Fatalf("%d nodes: complete %v, want [1 2 3]", n, got)
		}
		b.Prune()
		for i := range n {
			for j := i + 1; j < n; j++ {
				live := slices.Concat(nodes[:i], nodes[i+1:j], nodes[j+1:])
				epoch, _, err := b.Choose(live)
				var lost *LostError
				switch {
				case n >= 4 && err != nil:
					t.Errorf("%d nodes, %s and %s lost: %v", n, nodes[i], nodes[j], err)
				case n >= 4 && epoch != 2 && epoch != 3:
					t.Errorf("%d nodes, %s and %s lost: restart from epoch %d, want 2 or 3", n, nodes[i], nodes[j], epoch)
				case n == 3 && (!errors.As(err, &lost) || !reflect.DeepEqual(lost.Nodes, []string{nodes[i], nodes[j]})):
					t.Errorf("3 nodes, %s and %s lost: %v, want the epoch lost on both", nodes[i], nodes[j], err)
				}
			}
		}
	}
}

// copyAll makes the copies b.Replicas asks for, of the epochs which, until it
// asks for none.
func copyAll(b *Book, nodes []string, which func(epoch uint64) bool) {
	none := func(uint64, int, string) bool { return false }
	for {
		n := 0
		for _, c := range b.Replicas(nodes, none) {
			if which(c.Epoch) {
				b.AddCopy(c.Epoch, c.Rank, c.To)
				n++
			}
		}
		if n == 0 {
			return
		}
	}
}

// TestEpochBookKeepsBothKindsWhileAnEpochLags: when an epoch completes before
// the one below it, the two newest complete epochs are both even (or both
// odd), their copies on the same partners; the newest odd one is kept with them
// until the one between completes, and two nodes lost at once still leave a
// whole epoch on four nodes or more. With three copies (one partner rule for
// all) the job keeps the two newest as before.
func TestEpochBookKeepsBothKindsWhileAnEpochLags(t *testing.T) {
	for n := 4; n <= 8; n++ {
		nodes := make([]string, n)
		for i := range nodes {
			nodes[i] = fmt.Sprintf("n%d", i+1)
		}
		b := written(n, 2, nodes, 1, 2)
		copyAll(&b, nodes, func(uint64) bool { return true })
		b.MarkComplete(n)
		// Epochs 3 and 4 written, and only 4's copies made.
		idx := map[string][]shard.Info{}
		for e := uint64(1); e <= 4; e++ {
			for r, w := range nodes {
				idx[w] = append(idx[w], si(e, r, sum(e, r)))
				for _, h := range b.Holders(e, r) {
					if h != w {
						idx[h] = append(idx[h], si(e, r, sum(e, r)))
					}
				}
			}
		}
		b.Index(idx, nodes)
		copyAll(&b, nodes, func(e uint64) bool { return e == 4 })
		if got := b.MarkComplete(n); !reflect.DeepEqual(got, []uint64{4}) {
			t.Fatalf("%d nodes: complete %v, want [4]", n, got)
		}
		if keep, pruned := b.Prune(); pruned || b.KeepFrom() != 1 {
			t.Errorf("%d nodes, epochs 1, 2 and 4 complete: pruned %v from %d, keep from %d; want none pruned, kept from 1",
				n, pruned, keep, b.KeepFrom())
		}
		for i := range n {
			for j := i + 1; j < n; j++ {
				live := slices.Concat(nodes[:i], nodes[i+1:j], nodes[j+1:])
				if _, _, err := b.Choose(live); err != nil {
					t.Errorf("%d nodes, epoch 3 lagging, %s and %s lost: %v", n, nodes[i], nodes[j], err)
				}
			}
		}
		copyAll(&b, nodes, func(e uint64) bool { return e == 3 })
		b.MarkComplete(n)
		if keep, pruned := b.Prune(); !pruned || keep != 3 || b.KeepFrom() != 3 {
			t.Errorf("%d nodes, epoch 3 complete at last: pruned %v from %d, keep from %d; want from 3", n, pruned, keep, b.KeepFrom())
		}
	}

	b := NewBook(1, 3)
	b.StartRun(0)
	for _, e := range []uint64{1, 2, 4} {
		b.Epochs[e] = &Entry{Complete: true}
	}
	if keep, pruned := b.Prune(); !pruned || keep != 2 {
		t.Errorf("three copies, epochs 1, 2 and 4 complete: pruned %v from %d, want from 2", pruned, keep)
	}
}

// The book is plain data: a clone shares nothing, and JSON keeps all of it.
func TestEpochBookCloneAndJSON(t *testing.T) {
	b := book4()
	c := b.Clone()
	c.AddCopy(4, 0, "n9")
	c.Epochs[3].Complete = false
	c.Highest = 99
	if slices.Contains(b.Holders(4, 0), "n9") || !b.Epochs[3].Complete || b.Highest == 99 {
		t.Error("changing a clone changed the original")
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Book
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, b) {
		t.Errorf("JSON round trip:\n got %+v\nwant %+v", back, b)
	}
	if got, _, _ := back.Choose([]string{"n1", "n2", "n3", "n4"}); got != 4 {
		t.Errorf("a book read back chooses %d, want 4", got)
	}
	var empty Book
	empty.NRanks = 1
	empty.AddCopy(1, 0, "a") // a zero book is usable
	if got := empty.Holders(1, 0); !slices.Equal(got, []string{"a"}) {
		t.Errorf("zero book: holders %v", got)
	}
}

// A relaunch from epoch 4 forgets the stopped run's later epochs (5, 6): copies of
// them that finish after the relaunch must not make them complete, and pruning
// must not then remove epoch 4, which the new run's ranks restore.
func TestEpochBookRelaunchForgetsLaterEpochs(t *testing.T) {
	writers := []string{"a", "b"}
	b := NewBook(2, 1)
	b.StartRun(0)
	for e := uint64(1); e <= 6; e++ {
		b.Index(map[string][]shard.Info{"a": {si(e, 0, e)}, "b": {si(e, 1, 10+e)}}, writers)
		if e <= 4 {
			b.MarkComplete(2)
		}
	}
	if got := b.StartRun(4); got != 7 {
		t.Fatalf("the relaunch's first epoch = %d, want 7", got)
	}
	// The stopped run's epochs 5 and 6 finish copying now: every node holds all.
	all := map[string][]shard.Info{}
	for _, n := range []string{"a", "b"} {
		for e := uint64(3); e <= 6; e++ {
			all[n] = append(all[n], si(e, 0, e), si(e, 1, 10+e))
		}
	}
	b.Index(all, writers)
	if fresh := b.MarkComplete(2); len(fresh) != 0 {
		t.Errorf("MarkComplete after the relaunch = %v, want nothing: epochs 5 and 6 are not this run's", fresh)
	}
	if got := b.Newest(); got != 4 {
		t.Errorf("newest complete epoch = %d, want 4", got)
	}
	b.Prune()
	if e, _, err := b.Choose([]string{"a", "b"}); e != 4 || err != nil {
		t.Errorf("Choose = %d, %v; want 4", e, err)
	}
}

// A job resuming from an epoch kept outside the cluster starts with that epoch
// complete wherever its shards were put, and refuses an epoch a rank lacks.
func TestEpochBookResume(t *testing.T) {
	with := func(epoch uint64, rank int, s uint64) shard.Info {
		i := si(epoch, rank, s)
		i.NRanks = 2
		return i
	}
	b := NewBook(2, 2)
	err := b.Resume(7, map[string][]shard.Info{
		"n1": {with(7, 0, 70), with(7, 1, 71)},
		"n2": {with(7, 1, 71), with(3, 0, 30)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Complete(); !slices.Equal(got, []uint64{7}) {
		t.Errorf("complete = %v, want [7]", got)
	}
	if got := b.Holders(7, 1); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("holders of rank 1 = %v, want [n1 n2]", got)
	}
	if b.CreatedNs(7) != 7000 {
		t.Errorf("created = %d, want 7000", b.CreatedNs(7))
	}
	if e, _, err := b.Choose([]string{"n2", "n1"}); e != 7 || err != nil {
		t.Errorf("Choose = %d, %v; want 7", e, err)
	}
	if b.StartRun(7) != 8 {
		t.Errorf("the next run's first epoch is not 8")
	}
	// Kept outside the cluster by a run of 3 whose program checkpointed its
	// first 2 ranks: the book is told the world it cannot see.
	if b.SetWorld(7, 2); b.World(7) != 2 {
		t.Errorf("world after SetWorld(7, 2) = %d, want the 2 shards'", b.World(7))
	}
	if b.SetWorld(7, 3); b.World(7) != 3 || b.Ranks(7) != 2 {
		t.Errorf("after SetWorld(7, 3): world %d, ranks %d; want 3 and 2", b.World(7), b.Ranks(7))
	}

	for name, idx := range map[string]map[string][]shard.Info{
		"a rank missing":     {"n1": {with(7, 0, 70)}, "n2": {with(6, 1, 61)}},
		"copies that differ": {"n1": {with(7, 0, 70), with(7, 1, 71)}, "n2": {with(7, 1, 99)}},
		"nothing":            {},
		"counts that differ": {"n1": {with(7, 0, 70), with(7, 1, 71)}, "n2": {{Epoch: 7, Rank: 2, NRanks: 3, Checksum: 72}}},
	} {
		b := NewBook(2, 2)
		if err := b.Resume(7, idx); err == nil {
			t.Errorf("%s: Resume succeeded", name)
		}
		if got := b.Complete(); len(got) != 0 {
			t.Errorf("%s: complete = %v, want none", name, got)
		}
	}
}

// An elastic job's runs differ in rank count: each epoch keeps the count of
// the run that wrote it, completes by its own shards, and restores a run of
// another count only when no shard of it holds a plain per-rank region.
func TestEpochBookResized(t *testing.T) {
	b := NewBook(4, 1)
	b.StartRun(0)
	four := []string{"a", "a", "b", "c"}
	var idx = map[string][]shard.Info{}
	for r, n := range four {
		idx[n] = append(idx[n], si(1, r, sum(1, r)))
	}
	b.Index(idx, four)
	if got := b.MarkComplete(3); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("complete at 4 ranks = %v, want [1]", got)
	}

	b.Resize(2)
	if got := b.StartRun(1); got != 2 {
		t.Fatalf("the resized run's first epoch = %d, want 2", got)
	}
	two := []string{"a", "b"}
	perRank := si(2, 1, sum(2, 1))
	perRank.PerRank = []int32{3}
	b.Index(map[string][]shard.Info{"a": {si(2, 0, sum(2, 0))}, "b": {perRank, si(2, 3, 99)}}, two)
	if got := b.MarkComplete(2); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("complete at 2 ranks = %v, want [2]", got)
	}
	for _, c := range []struct {
		epoch      uint64
		nranks     int
		wantRanks  int
		wantRestor bool
	}{
		{1, 4, 4, true},
		{1, 2, 4, true}, // every region distributed: any count
		{2, 2, 2, true},
		{2, 3, 2, false}, // rank 1 holds a per-rank region
		{0, 5, 0, true},  // a fresh start
		{9, 2, 0, false}, // no such epoch
	} {
		if got := b.Ranks(c.epoch); got != c.wantRanks {
			t.Errorf("Ranks(%d) = %d, want %d", c.epoch, got, c.wantRanks)
		}
		if got := b.Restores(c.epoch, c.nranks); got != c.wantRestor {
			t.Errorf("Restores(%d, %d) = %v, want %v", c.epoch, c.nranks, got, c.wantRestor)
		}
	}
	if e, _, err := b.Choose([]string{"a", "b"}); e != 2 || err != nil {
		t.Errorf("Choose = %d, %v; want 2", e, err)
	}
	// Epoch 1's 4 shards, epoch 2's 2: a node lost takes only its own.
	if e, _, err := b.Choose([]string{"a", "c"}); e != 0 || err == nil {
		t.Errorf("Choose without b = %d, %v; want a lost epoch", e, err)
	}
}

// A program that gives libshoal a communicator of its first ranks writes
// epochs of as many shards, each saying so in its header: the epoch is
// complete with those, and knows the run it came from had more ranks.
func TestEpochBookSubCommunicator(t *testing.T) {
	sub := func(epoch uint64, rank, nranks int) shard.Info {
		s := si(epoch, rank, sum(epoch, rank))
		s.NRanks = nranks
		s.PerRank = []int32{1}
		return s
	}
	writers := []string{"a", "a", "b"} // 3 ranks, libshoal given ranks 0 and 1
	b := NewBook(3, 1)
	b.StartRun(0)
	b.Index(map[string][]shard.Info{"a": {sub(1, 0, 2), sub(1, 1, 2), sub(2, 0, 2)}, "b": {sub(2, 1, 2)}}, writers)
	if got := b.MarkComplete(2); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("complete = %v, want [1] (epoch 2's rank 1 is not on its writer's node)", got)
	}
	for _, c := range []struct {
		epoch             uint64
		ranks, world, run int
		restores          bool
	}{
		{1, 2, 3, 3, true}, // the same run again: its ranks 0 and 1 restore
		{1, 2, 3, 2, false},
		{2, 2, 3, 3, true},
		{9, 0, 0, 3, false},
	} {
		if got := b.Ranks(c.epoch); got != c.ranks {
			t.Errorf("Ranks(%d) = %d, want %d", c.epoch, got, c.ranks)
		}
		if got := b.World(c.epoch); got != c.world {
			t.Errorf("World(%d) = %d, want %d", c.epoch, got, c.world)
		}
		if got := b.Restores(c.epoch, c.run); got != c.restores {
			t.Errorf("Restores(%d, %d) = %v, want %v", c.epoch, c.run, got, c.restores)
		}
	}
	if e, _, err := b.Choose([]string{"a"}); e != 1 || err != nil {
		t.Errorf("Choose(a) = %d, %v; want 1: node a holds both of its shards", e, err)
	}
	// Shards of more ranks than the run has, or of another count than the
	// epoch's written shards, are not the run's.
	b.Index(map[string][]shard.Info{"a": {sub(1, 0, 2), sub(1, 1, 2), sub(3, 0, 4), sub(3, 1, 2)}}, writers)
	b.Index(map[string][]shard.Info{"b": {sub(3, 2, 3)}}, writers)
	if got, holders := b.Ranks(3), b.Holders(3, 2); got != 2 || holders != nil {
		t.Errorf("Ranks(3) = %d, rank 2's holders %v after shards of 4, 2 and 3 ranks; want 2 (rank 1's count; 4 is more than the run) and none", got, holders)
	}
}

// Corrupt copies are reported once, with the good copies left, and a lost
// epoch says its copies are corrupt rather than on no node.
func TestEpochBookCorruptCopies(t *testing.T) {
	writers := []string{"n1", "n2"}
	b := written(2, 2, writers, 5)
	b.AddCopy(5, 0, "n2")
	b.AddCopy(5, 1, "n1")
	if got := b.MarkComplete(2); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("complete %v, want [5]", got)
	}
	bad := func(e uint64, r int) shard.Bad { return shard.Bad{Epoch: e, Rank: r, Error: "checksum mismatch"} }
	good := func(ranks ...int) []shard.Info {
		var out []shard.Info
		for _, r := range ranks {
			out = append(out, si(5, r, sum(5, r)))
		}
		return out
	}
	steps := []struct {
		name    string
		shards  map[string][]shard.Info
		bad     map[string][]shard.Bad
		want    []CorruptCopy
		chooses uint64
		lost    string
	}{
		{"rank 0's copy on n1 corrupt", map[string][]shard.Info{"n1": good(1)}, map[string][]shard.Bad{"n1": {bad(5, 0)}},
			[]CorruptCopy{{Epoch: 5, Rank: 0, Node: "n1", Error: "checksum mismatch", Good: []string{"n2"}}}, 5, ""},
		{"the same again: not news", map[string][]shard.Info{"n1": good(1)}, map[string][]shard.Bad{"n1": {bad(5, 0)}},
			nil, 5, ""},
		{"an unknown epoch's corrupt copy", nil, map[string][]shard.Bad{"n3": {bad(9, 0)}}, nil, 5, ""},
		{"n2's copy corrupt too", map[string][]shard.Info{"n2": good(1)}, map[string][]shard.Bad{"n2": {bad(5, 0)}},
			[]CorruptCopy{{Epoch: 5, Rank: 0, Node: "n2", Error: "checksum mismatch"}}, 0, "epoch 5 lost: shards of rank 0 are corrupt on n1, n2"},
	}
	for _, st := range steps {
		b.Index(st.shards, writers)
		got := b.IndexBad(st.bad)
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: IndexBad = %+v, want %+v", st.name, got, st.want)
		}
		e, _, err := b.Choose([]string{"n1", "n2"})
		if e != st.chooses || (err == nil) != (st.lost == "") || err != nil && err.Error() != st.lost {
			t.Errorf("%s: Choose = %d, %v; want %d, %q", st.name, e, err, st.chooses, st.lost)
		}
	}
	if !b.WasCorrupt(5, 0, "n1") {
		t.Error("WasCorrupt(5, 0, n1) = false, want true")
	}
	b.AddCopy(5, 0, "n1") // repaired
	if b.WasCorrupt(5, 0, "n1") {
		t.Error("WasCorrupt(5, 0, n1) after a good copy was made = true, want false")
	}
	// n1's index taken before the repair still lists the corrupt copy.
	if got := b.IndexBad(map[string][]shard.Bad{"n1": {bad(5, 0)}}); got != nil || b.WasCorrupt(5, 0, "n1") {
		t.Errorf("an index older than the repair: IndexBad = %+v, WasCorrupt %v; want nothing", got, b.WasCorrupt(5, 0, "n1"))
	}
}

// A copy the book counted that fails verification when read (a copy from it
// refused) is counted no more: the epoch falls back as when an index says so,
// and a second finding is not news.
func TestEpochBookFoundCorrupt(t *testing.T) {
	writers := []string{"n1", "n2"}
	b := written(2, 2, writers, 4, 5)
	for _, e := range []uint64{4, 5} {
		b.AddCopy(e, 0, "n2")
		b.AddCopy(e, 1, "n1")
	}
	b.MarkComplete(2)
	steps := []struct {
		node    string
		want    CorruptCopy
		fresh   bool
		chooses uint64
	}{
		{"n1", CorruptCopy{Epoch: 5, Rank: 1, Node: "n1", Error: "checksum mismatch", Good: []string{"n2"}}, true, 5},
		{"n1", CorruptCopy{}, false, 5},
		{"n2", CorruptCopy{Epoch: 5, Rank: 1, Node: "n2", Error: "checksum mismatch"}, true, 4},
	}
	for i, s := range steps {
		got, fresh := b.FoundCorrupt(5, 1, s.node, "checksum mismatch")
		if fresh != s.fresh || !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d: FoundCorrupt(5, 1, %s) = %+v, %v; want %+v, %v", i, s.node, got, fresh, s.want, s.fresh)
		}
		if e, _, err := b.Choose(writers); err != nil || e != s.chooses {
			t.Errorf("step %d: Choose = %d, %v; want %d", i, e, err, s.chooses)
		}
	}
	if !b.WasCorrupt(5, 1, "n2") {
		t.Errorf("n2's copy of rank 1's shard of epoch 5 is not listed corrupt")
	}
}

// A job's book keeps its shards as its spec asks: two copies by default, the
// copies named, or M+1 copies under parity rs:K+M, with its code.
func TestBookOf(t *testing.T) {
	tests := []struct {
		name       string
		spec       job.Spec
		redundancy int
		parity     *ParitySpec
	}{
		{"no redundancy named", job.Spec{Ranks: 4}, DefaultRedundancy, nil},
		{"three copies", job.Spec{Ranks: 4, Redundancy: 3}, 3, nil},
		{"parity rs:4+2", job.Spec{Ranks: 8, Parity: &job.Parity{K: 4, M: 2}}, 3, &ParitySpec{K: 4, M: 2}},
	}
	for _, tt := range tests {
		b := BookOf(tt.spec)
		if b.NRanks != tt.spec.Ranks || b.Redundancy != tt.redundancy || !reflect.DeepEqual(b.Parity, tt.parity) {
			t.Errorf("%s: book of %d ranks, redundancy %d, parity %+v; want %d, %d, %+v",
				tt.name, b.NRanks, b.Redundancy, b.Parity, tt.spec.Ranks, tt.redundancy, tt.parity)
		}
		b.AddCopy(1, 0, "n1") // usable as made
		if b.Epochs[1] == nil {
			t.Errorf("%s: a copy recorded in the new book was not kept", tt.name)
		}
	}
}
