package coord

import (
	"context"
	"testing"

	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/node"
)

// The count of each launch: a fixed job's is its spec's; an elastic job's
// first is the one it asked for, and after that the one place.Size predicts
// fastest over the live nodes, unless the epoch to restore holds per-rank
// regions.
func TestCount(t *testing.T) {
	live := map[string]node.Node{"n1": {Name: "n1", Cores: 2}, "n2": {Name: "n2", Cores: 2}}
	elastic := job.Spec{ID: "j", Ranks: 7, MinRanks: 2, MaxRanks: 16}
	perRankBook := ringBook(t)
	perRankBook.Epochs[4].PerRank = true
	tests := []struct {
		name    string
		spec    job.Spec
		current int // the last run's count; 0: the first launch
		book    epochs.Book
		epoch   uint64
		want    int
		why     string
	}{
		{"a fixed job", job.Spec{ID: "j", Ranks: 7}, 7, ringBook(t), 4, 7, ""},
		{"an elastic job's first launch at its -n", elastic, 0, epochs.NewBook(0, 2), 0, 7, ""},
		{"an elastic job's first launch, one per core", job.Spec{ID: "j", MinRanks: 1}, 0, epochs.NewBook(0, 2), 0, 4, "one per core on n1, n2"},
		{"a node lost", elastic, 7, ringBook(t), 4, 4, "one per core on n1, n2"},
		{"a multiple of 3", job.Spec{ID: "j", MinRanks: 2, MaxRanks: 16, RankMultiple: 3}, 7, ringBook(t), 4, 3, "3 of the 4 cores of n1, n2: the most the job allows there"},
		{"an epoch of per-rank regions", elastic, 5, perRankBook, 4, 5, "epoch 4 holds per-rank regions, which restore on its own count"},
	}
	for _, tt := range tests {
		rj := newJob(Config{}, tt.spec, Output{})
		rj.ranks = tt.current
		b := newClusterBackend(ClusterConfig{}, &memRecord{info: job.Job{ID: "j", Spec: tt.spec}}, rj, tt.book)
		n, why := b.count(context.Background(), live, tt.spec, tt.epoch)
		if n != tt.want || why != tt.why {
			t.Errorf("%s: count = %d, %q; want %d, %q", tt.name, n, why, tt.want, tt.why)
		}
	}
}
