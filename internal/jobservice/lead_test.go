package jobservice

import (
	"context"
	"slices"
	"testing"
	"time"

	"shoal/internal/coord"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// revoker records the nodes a job is revoked on; with hold set, each revoke
// waits for its context to end.
type revoker struct {
	coord.Peer
	name string
	got  chan string
	hold bool
}

func (p revoker) Revoke(ctx context.Context, job string) error {
	if p.hold {
		<-ctx.Done()
		return ctx.Err()
	}
	p.got <- p.name
	return nil
}

// Shards answers that the node holds nothing of the job.
func (p revoker) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	return shard.Index{Job: job}, nil
}

// TestBeginFencesLiveNodes: what a takeover begins before the store's barrier
// revokes the job on the live nodes but its last coordinator, the nodes its run
// found lost, and nodes dead or leaving; and it stops when the term does.
func TestBeginFencesLiveNodes(t *testing.T) {
	nodes := []node.Node{
		{Name: "n1", State: "alive"}, {Name: "n2", State: "alive"}, {Name: "n3", State: "alive"},
		{Name: "n4", State: "alive"}, {Name: "n5", State: "dead"}, {Name: "n6", State: "alive", Leaving: true},
	}
	got := make(chan string, len(nodes))
	hold := false
	s := New(Config{Node: "n2", DataDir: t.TempDir(),
		Nodes: func(context.Context) ([]node.Node, error) { return nodes, nil },
		Peer:  func(n node.Node) coord.Peer { return revoker{name: n.Name, got: got, hold: hold} }})
	info := job.Job{ID: "j", Coordinator: "n1", Avoid: []string{"n3"}}
	e := s.begin(info, nil)
	<-e.fence.Done()
	<-e.fetched
	close(got)
	var asked []string
	for n := range got {
		asked = append(asked, n)
	}
	slices.Sort(asked)
	if want := []string{"n2", "n4"}; !slices.Equal(asked, want) {
		t.Errorf("begin revoked the job on %v, want %v", asked, want)
	}
	if e.fetchErr != nil {
		t.Errorf("fetching a job with no files: %v", e.fetchErr)
	}

	hold = true // every revoke now waits for the term to end
	e = s.begin(info, nodes)
	s.stepDown()
	select {
	case <-e.fence.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the fence begun in a term went on after the term ended")
	}
}
