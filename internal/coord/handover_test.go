package coord

import (
	"context"
	"testing"
	"time"

	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/place"
	"shoal/internal/shard"
)

// TestHeldCheckpointEndsTheRun: once the checkpoint a move asked for is
// complete, a move ends the run for its relaunch here, while a hand-over to the
// next coordinator says where the run stopped and leaves the run held, to be
// stopped by the service.
func TestHeldCheckpointEndsTheRun(t *testing.T) {
	tests := []struct {
		name     string
		handOver bool
		wantLoss bool
	}{
		{"a node leaving", false, true},
		{"the coordinator leaving", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ClusterConfig{Peer: func(n node.Node) Peer { return holdPeer{} }}
			b := newClusterBackend(s, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: 2}, Output{}), epochs.NewBook(2, 1))
			b.nodes = map[string]node.Node{"a": {Name: "a"}, "b": {Name: "b"}}
			b.placement = place.Placement{"a", "b"}
			b.epochBase(0)
			rc := reconfig{reason: "leaving", done: make(chan struct{})}
			if tt.handOver {
				rc.handOver = &job.Handover{}
			}
			b.startReconfig(context.Background(), rc)
			if loss := b.checkHeld(); loss != nil {
				t.Fatalf("before the held checkpoint: got a loss %q, want none", loss)
			}
			created := time.Unix(1700000000, 123)
			b.book.Index(map[string][]shard.Info{
				"a": {{Epoch: 1, Rank: 0, Checksum: 10, CreatedNs: uint64(created.UnixNano())}},
				"b": {{Epoch: 1, Rank: 1, Checksum: 11, CreatedNs: uint64(created.UnixNano())}},
			}, b.placement)
			b.book.MarkComplete(2)
			loss := b.checkHeld()
			if got := loss != nil; got != tt.wantLoss {
				t.Fatalf("after the held checkpoint: got a loss %v, want %v", got, tt.wantLoss)
			}
			if !tt.handOver {
				if !loss.planned || !loss.at.Equal(created) {
					t.Errorf("got loss %+v, want a planned one at %v", loss, created)
				}
				return
			}
			select {
			case <-rc.done:
			default:
				t.Fatal("the hand-over's done is not closed")
			}
			if got, want := *rc.handOver, (job.Handover{Epoch: 1, At: created}); got.Epoch != want.Epoch || !got.At.Equal(want.At) {
				t.Errorf("got hand-over %+v, want %+v", got, want)
			}
			if !b.handed || b.pending != nil {
				t.Errorf("handed %v, pending %v: want the run held with no move pending", b.handed, b.pending)
			}
		})
	}
}
