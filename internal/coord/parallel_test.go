package coord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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
	"shoal/internal/place"
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
// after another time out there. It lacks the files in missing.
type nodePeer struct {
	Peer
	node    string
	log     *callLog
	revokes *barrier
	missing []string
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
	var missing []string
	for _, sum := range req.Files {
		p.log.add("check " + p.node + " " + sum)
		if slices.Contains(p.missing, sum) {
			missing = append(missing, sum)
		}
	}
	return missing, nil
}

func (p nodePeer) PutFile(ctx context.Context, sum string, r io.Reader, size int64) error {
	b, err := io.ReadAll(r)
	p.log.add(fmt.Sprintf("put %s %s %q", p.node, sum, b))
	return err
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

// TestSetUpSendsWhatTheGrantFoundMissing: a node's grant asks which of the
// job's files it lacks, and only those are sent; the coordinator's own node
// is not asked (the submitter uploaded them there).
func TestSetUpSendsWhatTheGrantFoundMissing(t *testing.T) {
	log := &callLog{}
	data := t.TempDir()
	s := (ClusterConfig{Node: "a", DataDir: data})
	files := []job.File{{Name: "prog", SHA256: sumOf("prog body")}, {Name: "in1", SHA256: sumOf("in1 body")}, {Name: "in2", SHA256: sumOf("in2 body")}}
	for _, body := range []string{"prog body", "in1 body", "in2 body"} {
		if err := s.cache().Put(sumOf(body), strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	info := job.Job{ID: "j", Spec: job.Spec{Files: files}}
	b := nodePeer{node: "b", log: log, missing: []string{files[1].SHA256}}
	copied, err := s.setUp(context.Background(), b, "b", "amd64", info, 2, nil)
	if err != nil || len(copied) != 1 || copied[0].Name != "in1" {
		t.Fatalf("set up b: copied %v, %v; want in1 alone", copied, err)
	}
	want := []string{"grant b", "check b " + files[0].SHA256, "check b " + files[1].SHA256, "check b " + files[2].SHA256,
		fmt.Sprintf("put b %s %q", files[1].SHA256, "in1 body")}
	if !slices.Equal(log.calls, want) {
		t.Errorf("calls to b %q; want %q", log.calls, want)
	}
	log.calls = nil
	a := nodePeer{node: "a", log: log, missing: []string{files[0].SHA256}}
	if copied, err := s.setUp(context.Background(), a, "a", "amd64", info, 2, nil); err != nil || len(copied) != 0 {
		t.Fatalf("set up a: copied %v, %v; want nothing", copied, err)
	}
	if !slices.Equal(log.calls, []string{"grant a"}) {
		t.Errorf("calls to a %q; want its grant alone", log.calls)
	}
}

// TestSetUpSendsTheBuildOfTheNodesSet: of a program built for two
// instruction sets, a node gets the build of its own, and the files of none.
func TestSetUpSendsTheBuildOfTheNodesSet(t *testing.T) {
	log := &callLog{}
	s := (ClusterConfig{Node: "a", DataDir: t.TempDir()})
	files := []job.File{{Name: "prog", SHA256: sumOf("x86"), Arch: "amd64"}, {Name: "prog", SHA256: sumOf("arm"), Arch: "arm64"}, {Name: "in", SHA256: sumOf("in")}}
	for _, body := range []string{"x86", "arm", "in"} {
		if err := s.cache().Put(sumOf(body), strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	info := job.Job{ID: "j", Spec: job.Spec{Argv: []string{"prog"}, Files: files}}
	b := nodePeer{node: "b", log: log, missing: []string{files[0].SHA256, files[1].SHA256, files[2].SHA256}}
	copied, err := s.setUp(context.Background(), b, "b", "arm64", info, 2, nil)
	if err != nil || !slices.Equal(copied, []job.File{files[1], files[2]}) {
		t.Fatalf("set up b (arm64): copied %v, %v; want the arm64 build and in", copied, err)
	}
	if got, want := StageArgs(info.Spec, "arm64"), []string{"--stage", "prog=" + files[1].SHA256 + ":755", "--stage", "in=" + files[2].SHA256 + ":644"}; !slices.Equal(got, want) {
		t.Errorf("stageArgs(arm64) = %q, want %q", got, want)
	}
	// A world of both sets names every build with its set; each rank places its own.
	if got, want := StageArgs(info.Spec, place.Mixed), []string{"--stage", "prog=" + files[0].SHA256 + ":755:amd64", "--stage", "prog=" + files[1].SHA256 + ":755:arm64", "--stage", "in=" + files[2].SHA256 + ":644"}; !slices.Equal(got, want) {
		t.Errorf("stageArgs(mixed) = %q, want %q", got, want)
	}
}

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
