package staging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"shoal/internal/api"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/place"
)

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

// nodePeer is a node that lacks the files in missing.
type nodePeer struct {
	Peer
	node    string
	log     *callLog
	missing []string
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

// TestSetUpSendsWhatTheGrantFoundMissing: a node's grant asks which of the
// job's files it lacks, and only those are sent; the coordinator's own node
// is not asked (the submitter uploaded them there).
func TestSetUpSendsWhatTheGrantFoundMissing(t *testing.T) {
	log := &callLog{}
	data := t.TempDir()
	s := Origin{Node: "a", Cache: files.Cache{Dir: data}}
	jobFiles := []job.File{{Name: "prog", SHA256: sumOf("prog body")}, {Name: "in1", SHA256: sumOf("in1 body")}, {Name: "in2", SHA256: sumOf("in2 body")}}
	for _, body := range []string{"prog body", "in1 body", "in2 body"} {
		if err := s.Cache.Put(sumOf(body), strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	info := job.Job{ID: "j", Spec: job.Spec{Files: jobFiles}}
	b := nodePeer{node: "b", log: log, missing: []string{jobFiles[1].SHA256}}
	copied, err := SetUp(context.Background(), s, b, "b", "amd64", info, 2, nil)
	if err != nil || len(copied) != 1 || copied[0].Name != "in1" {
		t.Fatalf("set up b: copied %v, %v; want in1 alone", copied, err)
	}
	want := []string{"grant b", "check b " + jobFiles[0].SHA256, "check b " + jobFiles[1].SHA256, "check b " + jobFiles[2].SHA256,
		fmt.Sprintf("put b %s %q", jobFiles[1].SHA256, "in1 body")}
	if !slices.Equal(log.calls, want) {
		t.Errorf("calls to b %q; want %q", log.calls, want)
	}
	log.calls = nil
	a := nodePeer{node: "a", log: log, missing: []string{jobFiles[0].SHA256}}
	if copied, err := SetUp(context.Background(), s, a, "a", "amd64", info, 2, nil); err != nil || len(copied) != 0 {
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
	s := Origin{Node: "a", Cache: files.Cache{Dir: t.TempDir()}}
	jobFiles := []job.File{{Name: "prog", SHA256: sumOf("x86"), Arch: "amd64"}, {Name: "prog", SHA256: sumOf("arm"), Arch: "arm64"}, {Name: "in", SHA256: sumOf("in")}}
	for _, body := range []string{"x86", "arm", "in"} {
		if err := s.Cache.Put(sumOf(body), strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	info := job.Job{ID: "j", Spec: job.Spec{Argv: []string{"prog"}, Files: jobFiles}}
	b := nodePeer{node: "b", log: log, missing: []string{jobFiles[0].SHA256, jobFiles[1].SHA256, jobFiles[2].SHA256}}
	copied, err := SetUp(context.Background(), s, b, "b", "arm64", info, 2, nil)
	if err != nil || !slices.Equal(copied, []job.File{jobFiles[1], jobFiles[2]}) {
		t.Fatalf("set up b (arm64): copied %v, %v; want the arm64 build and in", copied, err)
	}
	if got, want := StageArgs(info.Spec, "arm64"), []string{"--stage", "prog=" + jobFiles[1].SHA256 + ":755", "--stage", "in=" + jobFiles[2].SHA256 + ":644"}; !slices.Equal(got, want) {
		t.Errorf("stageArgs(arm64) = %q, want %q", got, want)
	}
	// A world of both sets names every build with its set; each rank places its own.
	if got, want := StageArgs(info.Spec, place.Mixed), []string{"--stage", "prog=" + jobFiles[0].SHA256 + ":755:amd64", "--stage", "prog=" + jobFiles[1].SHA256 + ":755:arm64", "--stage", "in=" + jobFiles[2].SHA256 + ":644"}; !slices.Equal(got, want) {
		t.Errorf("stageArgs(mixed) = %q, want %q", got, want)
	}
}

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
