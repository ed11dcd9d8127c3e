package epochs

import "testing"

func TestCorruptNote(t *testing.T) {
	tests := []struct {
		c    CorruptCopy
		want string
	}{
		{CorruptCopy{Epoch: 5, Rank: 0, Node: "n1", Error: "checksum mismatch", Good: []string{"n2"}},
			"node n1: rank 0's shard of epoch 5 is corrupt (checksum mismatch); not used: a good copy is on n2"},
		{CorruptCopy{Epoch: 7, Rank: 3, Node: "n2", Error: "truncated"},
			"node n2: rank 3's shard of epoch 7 is corrupt (truncated); no good copy of it is left: a restart cannot use epoch 7"},
	}
	for _, tt := range tests {
		if got := tt.c.Note(); got != tt.want {
			t.Errorf("%+v.Note() = %q, want %q", tt.c, got, tt.want)
		}
	}
	if got, want := RepairNote(5, 0, "n1", "n2"), "node n1: rank 0's shard of epoch 5, corrupt there, repaired from n2's copy"; got != want {
		t.Errorf("RepairNote = %q, want %q", got, want)
	}
}

// An epoch of fewer shards than its run's ranks says so; one of as many, or
// none, says nothing.
func TestCoverageNote(t *testing.T) {
	b := NewBook(5, 1)
	b.Epochs[1] = &Entry{Shards: make([]ShardEntry, 3), World: 5}
	b.Epochs[2] = &Entry{Shards: make([]ShardEntry, 5)}
	tests := []struct {
		epoch uint64
		want  string
	}{
		{1, "checkpoints cover 3 of 5 ranks: the program gave libshoal a communicator of its first 3; the others have no checkpoint, and a restart starts them afresh"},
		{2, ""},
		{3, ""},
	}
	for _, tt := range tests {
		if got := b.CoverageNote(tt.epoch); got != tt.want {
			t.Errorf("CoverageNote(%d) = %q, want %q", tt.epoch, got, tt.want)
		}
	}
}
