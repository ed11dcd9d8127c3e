package epochs

import (
	"slices"
	"testing"

	"shoal/internal/job"
)

// The nodes' epoch against the one kept outside the cluster: book4's epochs 3
// and 4, with some nodes lost, and a kept epoch newer, as new, older or none.
func TestRestoreKept(t *testing.T) {
	s3 := func(e uint64) *job.Durable { return &job.Durable{Epoch: e, Location: "s3://lab/app"} }
	all := []string{"n1", "n2", "n3", "n4", "n5"}
	tests := []struct {
		name string
		live []string
		kept *job.Durable
		want bool
	}{
		{"nothing kept", nil, nil, false},
		{"every node alive, the kept epoch older", all, s3(3), false},
		{"every node alive, the kept epoch theirs", all, s3(4), false},
		{"every node alive, the kept epoch newer", all, s3(5), true},
		{"every node lost", nil, s3(3), true},
		{"two neighbours lost: epochs 3 and 4 with them", []string{"n1", "n2", "n5"}, s3(3), true},
		{"two nodes apart lost: epoch 4 survives", []string{"n1", "n3", "n5"}, s3(3), false},
		{"epoch 4 lost, 3 survives on a copy: the kept 3 is not newer", []string{"n1", "n2", "n5"}, s3(3), false},
		{"every node lost, the epoch kept in a directory", nil, &job.Durable{Epoch: 3, Location: "/shared/u/app.ckpt"}, false},
	}
	for _, tt := range tests {
		b := book4()
		if tt.name == "epoch 4 lost, 3 survives on a copy: the kept 3 is not newer" {
			b.AddCopy(3, 2, "n1")
		}
		nodes, _, _ := b.Choose(tt.live)
		if got := RestoreKept(nodes, tt.kept); got != tt.want {
			t.Errorf("%s: the nodes restore epoch %d; RestoreKept = %v, want %v", tt.name, nodes, got, tt.want)
		}
	}
}

// A kept epoch is complete with no holder until its nodes fetch its shards,
// restores on its own count, and lowers the pruning floor; the restart's run
// forgets the lost epochs above it and writes above them.
func TestEpochBookAddKept(t *testing.T) {
	b := book4()
	b.Floor = 4
	b.AddKept(2, []KeptShard{{10, 21}, {10, 22}}, 3, 77)
	if got, _, err := b.Choose([]string{"n6"}); got != 0 || err == nil {
		t.Errorf("Choose before any fetch = %d, %v; want a lost epoch", got, err)
	}
	if b.Ranks(2) != 2 || b.World(2) != 3 || b.CreatedNs(2) != 77 {
		t.Errorf("ranks, world, created = %d, %d, %d; want 2, 3, 77", b.Ranks(2), b.World(2), b.CreatedNs(2))
	}
	if b.Restores(2, 4) || !b.Restores(2, 3) {
		t.Errorf("Restores(2, 4), Restores(2, 3) = %v, %v; want false, true", b.Restores(2, 4), b.Restores(2, 3))
	}
	b.AddCopy(2, 0, "n6")
	b.AddCopy(2, 1, "n7")
	if got, _, err := b.Choose([]string{"n6", "n7"}); got != 2 || err != nil {
		t.Errorf("Choose once fetched = %d, %v; want 2", got, err)
	}
	if base := b.StartRun(2); base != 5 || !slices.Equal(b.Complete(), []uint64{2}) {
		t.Errorf("StartRun(2) = %d, complete %v; want 5, [2]", base, b.Complete())
	}
	if b.KeepFrom() > 2 {
		t.Errorf("KeepFrom = %d: the kept epoch 2 would be pruned", b.KeepFrom())
	}
}
