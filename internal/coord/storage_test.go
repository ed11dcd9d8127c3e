package coord

import (
	"context"
	"slices"
	"testing"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/place"
)

// storePeer is a node whose checkpoint store answers a probe with fault ("":
// sound).
type storePeer struct {
	Peer
	fault string
}

func (p storePeer) Probe(ctx context.Context, job string, bytes int64) (api.Probe, error) {
	return api.Probe{Error: p.fault}, nil
}

// The nodes whose stores fail are the loss, excluded from later placements,
// and its reason says each fault once.
func TestStoreFaults(t *testing.T) {
	faults := map[string]string{"a": "no space left on device", "b": "", "c": "input/output error", "d": "no space left on device"}
	cfg := ClusterConfig{Peer: func(n node.Node) Peer { return storePeer{fault: faults[n.Name]} }}
	b := newClusterBackend(cfg, &memRecord{info: job.Job{ID: "j"}}, newJob(Config{}, job.Spec{ID: "j", Ranks: 4}, Output{}), epochs.NewBook(4, 2))
	b.placement = place.Placement{"a", "b", "c", "d"}
	b.nodes = map[string]node.Node{}
	for n := range faults {
		b.nodes[n] = node.Node{Name: n}
	}
	loss := b.storeFaults(context.Background())
	if loss == nil {
		t.Fatal("no loss, want a, c and d")
	}
	if !slices.Equal(loss.nodes, []string{"a", "c", "d"}) || !loss.fault {
		t.Errorf("loss of %v (fault %v), want a, c, d as a fault", loss.nodes, loss.fault)
	}
	if want := "cannot store checkpoints: input/output error; no space left on device"; loss.reason != want {
		t.Errorf("reason %q, want %q", loss.reason, want)
	}
	for _, n := range []string{"a", "c", "d"} {
		if !b.excluded[n] {
			t.Errorf("%s not excluded from later placements", n)
		}
	}
}
