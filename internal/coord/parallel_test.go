package coord

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// barrier lets n callers through together; a caller that waits longer than a
// second gives up and reports that the calls did not overlap.
type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait() bool {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return true
	case <-time.After(time.Second):
		return false
	}
}

// callLog records the calls made to the nodes, in order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(call string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call)
}

// nodePeer is a node whose revokes meet at a barrier, so that calls made one
// after another time out there. It has every file.
type nodePeer struct {
	Peer
	node    string
	log     *callLog
	revokes *barrier
}

func (p nodePeer) Revoke(ctx context.Context, job string) error {
	if !p.revokes.wait() {
		p.log.add("revoke alone " + p.node)
	}
	p.log.add("revoked " + p.node)
	return nil
}

func (p nodePeer) Grant(ctx context.Context, req api.GrantRequest) ([]string, error) {
	p.log.add("grant " + p.node)
	for _, sum := range req.Files {
		p.log.add("check " + p.node + " " + sum)
	}
	return nil, nil
}

func (p nodePeer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	return shard.Index{Job: job}, nil
}

// TestPrepareFencesInParallel: a relaunch revokes the old run on every node at
// once, and stages and grants only once every revoke has returned.
func TestPrepareFencesInParallel(t *testing.T) {
	nodes := []node.Node{
		{Name: "a", State: "alive", Cores: 2}, {Name: "b", State: "alive", Cores: 2}, {Name: "c", State: "alive", Cores: 2},
	}
	log := &callLog{}
	revokes := newBarrier(len(nodes))
	data := t.TempDir()
	s := (ClusterConfig{
		Node: "a", DataDir: data,
		Nodes: func(context.Context) ([]node.Node, error) { return nodes, nil },
		Peer:  func(n node.Node) Peer { return nodePeer{node: n.Name, log: log, revokes: revokes} },
	})
	spec := job.Spec{ID: "j", Ranks: 6, Argv: []string{"prog"}, Files: []job.File{{Name: "prog", SHA256: "00"}}}
	cj := &memRecord{info: job.Job{ID: "j", Spec: spec}}
	rj := newJob(Config{RunRoot: filepath.Join(data, "coord")}, job.Spec{ID: "j", Ranks: 6, Argv: []string{"prog"}}, Output{})
	b := newClusterBackend(s, cj, rj, epochs.NewBook(6, 2))
	b.nodes = map[string]node.Node{"a": nodes[0], "b": nodes[1], "c": nodes[2]} // the last run's
	if err := os.MkdirAll(filepath.Join(data, "coord", "j"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := b.prepare(context.Background(), launchRequest{ranksDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	lastRevoke, firstOther := -1, len(log.calls)
	for i, c := range log.calls {
		switch {
		case strings.HasPrefix(c, "revoke alone"):
			t.Errorf("%s: the revokes did not overlap", c)
		case strings.HasPrefix(c, "revoked"):
			lastRevoke = i
		default:
			firstOther = min(firstOther, i)
		}
	}
	if lastRevoke < 0 || lastRevoke > firstOther {
		t.Errorf("calls %q: every revoke must return before staging or granting starts", log.calls)
	}
	for _, want := range []string{"grant a", "grant b", "grant c", "check b 00", "check c 00"} {
		if !slices.Contains(log.calls, want) {
			t.Errorf("calls %q: no %q", log.calls, want)
		}
	}
}

// TestFirstRunFencesNothing: a new job's first run has no earlier run to
// fence, so it revokes nothing before staging and granting.
func TestFirstRunFencesNothing(t *testing.T) {
	nodes := []node.Node{
		{Name: "a", State: "alive", Cores: 2}, {Name: "b", State: "alive", Cores: 2},
	}
	log := &callLog{}
	data := t.TempDir()
	s := (ClusterConfig{
		Node: "a", DataDir: data,
		Nodes: func(context.Context) ([]node.Node, error) { return nodes, nil },
		Peer:  func(n node.Node) Peer { return nodePeer{node: n.Name, log: log, revokes: newBarrier(1)} },
	})
	spec := job.Spec{ID: "j", Ranks: 4, Argv: []string{"prog"}, Files: []job.File{{Name: "prog", SHA256: "00"}}}
	cj := &memRecord{info: job.Job{ID: "j", Spec: spec}}
	rj := newJob(Config{RunRoot: filepath.Join(data, "coord")}, job.Spec{ID: "j", Ranks: 4, Argv: []string{"prog"}}, Output{})
	b := newClusterBackend(s, cj, rj, epochs.NewBook(4, 2))
	if err := os.MkdirAll(filepath.Join(data, "coord", "j"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := b.prepare(context.Background(), launchRequest{ranksDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range log.calls {
		if strings.HasPrefix(c, "revoke") {
			t.Errorf("calls %q: the first run revoked %s", log.calls, c)
		}
	}
	if !slices.Contains(log.calls, "grant a") || !slices.Contains(log.calls, "grant b") {
		t.Errorf("calls %q: want grants on a and b", log.calls)
	}

	// A job taken over is fenced on the nodes of its first run here all the
	// same: one cut off at the takeover may be back with its ranks.
	log.calls = nil
	rj = newJob(Config{RunRoot: filepath.Join(data, "coord")}, job.Spec{ID: "j", Ranks: 4, Argv: []string{"prog"}}, Output{})
	rj.resume = &Resume{Why: "coordinator lost"}
	b = newClusterBackend(s, cj, rj, epochs.NewBook(4, 2))
	if _, _, _, err := b.prepare(context.Background(), launchRequest{ranksDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"revoked a", "revoked b"} {
		if !slices.Contains(log.calls, want) {
			t.Errorf("calls %q of a job taken over: no %q", log.calls, want)
		}
	}
}
