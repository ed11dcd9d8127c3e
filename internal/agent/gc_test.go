package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/retention"
	"shoal/internal/shard"
	"shoal/test/poll"
)

// mkJobData creates what a node holds of job: the given shard epochs, and its
// job and coordinator directories when asked.
func mkJobData(t *testing.T, a *Agent, job string, epochs []uint64, dirs ...string) {
	t.Helper()
	for _, e := range epochs {
		writeRankShard(t, a, shard.Ref{Job: job, Epoch: e, Rank: 0}, testShard(t, job, e, 0, 1, 100))
	}
	for _, d := range dirs {
		p := filepath.Join(a.DataDir(), d, job, "x")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("some bytes"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestAgentCollects runs the collection of two real agents on a real job
// store: the loop removes an old failed job's data on both nodes by itself, the
// old epochs of a running job and the spares of a job that ended (kept with
// --keep: its shards stay), keeps a standalone job's data, and POST
// /v1/gc removes a named job on request, refusing one that runs.
func TestAgentCollects(t *testing.T) {
	c1 := testConfig(t, "n1")
	c1.Init = true
	c1.Retention = &retention.Policy{Succeeded: time.Hour, Failed: time.Second, UnusedFiles: time.Second}
	a := startAgent(t, c1)
	c2 := testConfig(t, "n2")
	c2.Join = []string{a.GossipAddr()}
	c2.SecretFile = filepath.Join(a.DataDir(), SecretFile)
	c2.Retention = c1.Retention
	b := startAgent(t, c2)
	poll.Until(t, 10*time.Second, func() string {
		if !a.Store().IsLeader() {
			return "n1 does not lead the job store"
		}
		return ""
	})

	// Both nodes hold data of a job that failed an hour ago, of a running job
	// with epochs 1, 2 and 4 (2 and 4 complete), and of a standalone run.
	// A job kept with --keep that ended, and the running job, hold a spare.
	spareOf := func(n *Agent, job string) string {
		return jobdir.Dir{Root: filepath.Join(n.DataDir(), CkptDir), Job: job}.SparePath(0)
	}
	for _, n := range []*Agent{a, b} {
		mkJobData(t, n, "failed", []uint64{3}, JobsDir, CoordDir)
		mkJobData(t, n, "running", []uint64{1, 2, 4}, JobsDir)
		mkJobData(t, n, "standalone", []uint64{1}, JobsDir)
		mkJobData(t, n, "kept", []uint64{5})
		for _, job := range []string{"kept", "running"} {
			if err := os.WriteFile(spareOf(n, job), []byte("a pruned shard"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A directory in the file cache named like a file is not one: left alone.
	sum := strings.Repeat("ab", 32)
	mkJobData(t, a, sum, nil, FilesDir)
	other := strings.Repeat("cd", 32)
	otherPath := filepath.Join(a.DataDir(), FilesDir, other)
	if err := os.WriteFile(otherPath, []byte("program"), 0o444); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(otherPath, old, old)

	store := a.Store()
	ended := time.Now().Add(-time.Hour)
	if err := store.Submit(job.Job{ID: "failed", State: job.Failed, Ended: ended,
		Spec: job.Spec{Files: []job.File{{Name: "p", SHA256: other}}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.Submit(job.Job{ID: "running", State: job.Running, Epoch: 4}, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.Submit(job.Job{ID: "kept", State: job.Cancelled, Ended: ended, Spec: job.Spec{Keep: job.KeepForever}}, nil); err != nil {
		t.Fatal(err)
	}
	book := epochs.NewBook(1, 1)
	book.Epochs = map[uint64]*epochs.Entry{2: {Complete: true}, 4: {Complete: true}}
	raw, _ := json.Marshal(book)
	if err := store.Update("running", nil, nil, raw); err != nil {
		t.Fatal(err)
	}

	ckptOf := func(n *Agent, job string, epoch uint64) string {
		p := filepath.Join(n.DataDir(), CkptDir, job)
		if epoch > 0 {
			p = filepath.Join(p, fmt.Sprintf("e%08d", epoch))
		}
		return p
	}
	// The loop notices the store's change by itself, on both nodes.
	poll.Until(t, 15*time.Second, func() string {
		for _, n := range []*Agent{a, b} {
			for _, p := range []string{ckptOf(n, "failed", 0), filepath.Join(n.DataDir(), JobsDir, "failed"),
				filepath.Join(n.DataDir(), CoordDir, "failed"), ckptOf(n, "running", 1), spareOf(n, "kept")} {
				if exists(p) {
					return fmt.Sprintf("%s: %s still there", n.Name(), p)
				}
			}
		}
		if exists(otherPath) {
			return "the failed job's cached program is still there"
		}
		return ""
	})
	for _, n := range []*Agent{a, b} {
		for _, p := range []string{ckptOf(n, "running", 2), ckptOf(n, "running", 4),
			filepath.Join(n.DataDir(), JobsDir, "running"), ckptOf(n, "standalone", 1),
			filepath.Join(n.DataDir(), JobsDir, "standalone"), ckptOf(n, "kept", 5), spareOf(n, "running")} {
			if !exists(p) {
				t.Errorf("%s: %s removed, want it kept", n.Name(), p)
			}
		}
	}
	if !exists(filepath.Join(a.DataDir(), FilesDir, sum, "x")) {
		t.Error("a directory in the file cache was touched")
	}

	ctx := context.Background()
	ca := api.NewClient(a.LocalAPIAddr(), a.Secret())
	if _, err := ca.Collect(ctx, api.GCRequest{Job: "running"}); !errors.Is(err, errkind.Conflict) {
		t.Errorf("gc of a running job: %v, want a conflict", err)
	}
	// A dry run on every node lists the standalone job's data as to be removed
	// and removes nothing.
	res, err := ca.Collect(ctx, api.GCRequest{Job: "standalone", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, r := range res.Nodes {
		nodes = append(nodes, r.Node)
		var what []string
		for _, it := range r.Items {
			if it.Job == "standalone" && it.Removed {
				what = append(what, it.What)
				if it.Bytes <= 0 {
					t.Errorf("%s: %s listed with %d bytes", r.Node, it.What, it.Bytes)
				}
			}
		}
		if !slices.Equal(what, []string{"shards", "job-dir"}) || r.Error != "" {
			t.Errorf("dry run on %s: would remove %v (error %q), want [shards job-dir]", r.Node, what, r.Error)
		}
	}
	if !slices.Equal(nodes, []string{"n1", "n2"}) {
		t.Errorf("dry run asked %v, want [n1 n2]", nodes)
	}
	if !exists(ckptOf(b, "standalone", 1)) {
		t.Fatal("a dry run removed data")
	}
	// Only on n2, for real.
	res, err = ca.Collect(ctx, api.GCRequest{Job: "standalone", Node: "n2"})
	if err != nil || len(res.Nodes) != 1 || res.Nodes[0].Node != "n2" {
		t.Fatalf("gc --job standalone --node n2: %+v, %v", res, err)
	}
	if exists(ckptOf(b, "standalone", 0)) || exists(filepath.Join(b.DataDir(), JobsDir, "standalone")) {
		t.Error("n2 still holds the standalone job's data after gc --job")
	}
	if !exists(ckptOf(a, "standalone", 1)) {
		t.Error("gc --node n2 removed n1's data")
	}
	if _, err := ca.Collect(ctx, api.GCRequest{Node: "n9"}); !errors.Is(err, errkind.NotFound) {
		t.Errorf("gc on an unknown node: %v, want not found", err)
	}
}

// TestAgentCollectsAtStart: an agent that was down when a job ended removes
// the job's data once it is back.
func TestAgentCollectsAtStart(t *testing.T) {
	c := testConfig(t, "n1")
	c.Init = true
	c.Retention = &retention.Policy{Succeeded: time.Hour, Failed: time.Hour, UnusedFiles: time.Hour}
	a := startAgent(t, c)
	poll.Until(t, 10*time.Second, func() string {
		if !a.Store().IsLeader() {
			return "no leader"
		}
		return ""
	})
	if err := a.Store().Submit(job.Job{ID: "gone", State: job.Cancelled, Ended: time.Now().Add(-2 * time.Hour)}, nil); err != nil {
		t.Fatal(err)
	}
	// Stop quickly after, so the loop may not have collected yet; the data
	// appears while the agent is down.
	a.Shutdown()
	mkJobData(t, a, "gone", []uint64{5}, JobsDir)
	a = startAgent(t, c)
	poll.Until(t, 10*time.Second, func() string {
		if exists(filepath.Join(a.DataDir(), CkptDir, "gone")) || exists(filepath.Join(a.DataDir(), JobsDir, "gone")) {
			return "the cancelled job's data is still there after the restart"
		}
		return ""
	})
}
