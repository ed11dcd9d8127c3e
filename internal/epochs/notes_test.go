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
