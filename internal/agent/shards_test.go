package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/engine"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/pki"
	"shoal/internal/shard"
)

// testShard returns a valid shard of job at epoch for rank of nranks.
func testShard(t *testing.T, job string, epoch uint64, rank, nranks, size int) []byte {
	t.Helper()
	data := bytes.Repeat([]byte{byte(rank + 1), byte(epoch)}, size/2)
	return encodeShard(t, shard.Header{Job: job, Epoch: epoch, Rank: uint32(rank), NRanks: uint32(nranks), CreatedNs: 42}, data)
}

// encodeShard returns the shard with header h and one region holding data.
func encodeShard(t *testing.T, h shard.Header, data []byte) []byte {
	t.Helper()
	b, err := shard.Encode(h, []shard.Region{{ID: 1, ElemSize: 1, Count: uint64(len(data)), Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeRankShard writes a shard into a's checkpoint store as a rank there would.
func writeRankShard(t *testing.T, a *Agent, ref shard.Ref, b []byte) string {
	t.Helper()
	path := jobdir.Dir{Root: filepath.Join(a.DataDir(), CkptDir), Job: ref.Job}.ShardPath(ref.Epoch, ref.Rank)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestShardReplicationBetweenAgents(t *testing.T) {
	agents := startCluster(t, 2)
	a, b := agents[0], agents[1]
	ctx := context.Background()
	ca := api.NewClient(a.LocalAPIAddr(), a.Secret())
	cb := api.NewClient(b.LocalAPIAddr(), b.Secret())

	// Rank 0 and 1 of epoch 3 were written on a; rank 1's copy got damaged.
	good := testShard(t, "heat", 3, 0, 2, 1<<20)
	writeRankShard(t, a, shard.Ref{Job: "heat", Epoch: 3, Rank: 0}, good)
	bad := testShard(t, "heat", 3, 1, 2, 1000)
	bad[600] ^= 1
	writeRankShard(t, a, shard.Ref{Job: "heat", Epoch: 3, Rank: 1}, bad)

	idx, err := ca.Shards(ctx, "heat")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Shards) != 1 || idx.Shards[0].Rank != 0 || idx.Shards[0].Size != int64(len(good)) ||
		len(idx.Bad) != 1 || idx.Bad[0].Rank != 1 || idx.Bad[0].Error != "checksum mismatch" {
		t.Fatalf("index on a = %+v, want rank 0 good and rank 1 bad (checksum mismatch)", idx)
	}

	// b copies rank 0 from a: verified, durable, identical.
	ref0 := shard.Ref{Job: "heat", Epoch: 3, Rank: 0}
	f, err := cb.FetchShard(ctx, ref0, a.APIAddr())
	if err != nil || !f.Copied || !reflect.DeepEqual(f.Shard, idx.Shards[0]) {
		t.Fatalf("FetchShard to b = %+v, %v; want a copy described as %+v", f, err, idx.Shards[0])
	}
	rc, size, err := cb.GetShard(ctx, ref0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, good) || size != int64(len(good)) {
		t.Errorf("b serves %d bytes (Content-Length %d), want a's %d", len(got), size, len(good))
	}
	if f, err := cb.FetchShard(ctx, ref0, a.APIAddr()); err != nil || f.Copied {
		t.Errorf("second fetch = %+v, %v; want no copy", f, err)
	}
	if idx, err := b.Shards().Index("heat"); err != nil || len(idx.Shards) != 1 {
		t.Errorf("b's own store index = %+v, %v", idx, err)
	}

	// a refuses to serve its corrupt rank 1, and b's fetch says so.
	ref1 := shard.Ref{Job: "heat", Epoch: 3, Rank: 1}
	if _, _, err := ca.GetShard(ctx, ref1); !errors.Is(err, errkind.Corrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("GET of a's corrupt shard: %v, want ErrCorrupt naming the checksum mismatch", err)
	}
	_, err = cb.FetchShard(ctx, ref1, a.APIAddr())
	if !errors.Is(err, errkind.Corrupt) || !strings.Contains(err.Error(), "heat/3/1") ||
		!strings.Contains(err.Error(), a.APIAddr()) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("fetch of a corrupt shard: %v, want ErrCorrupt naming the shard, %s and the checksum mismatch", err, a.APIAddr())
	}
	if _, _, err := cb.GetShard(ctx, ref1); !errors.Is(err, errkind.NotFound) {
		t.Errorf("b after the refused fetch: %v, want no copy (ErrNotFound)", err)
	}
	// Not on a at all; a node that is not there.
	if _, err := cb.FetchShard(ctx, shard.Ref{Job: "heat", Epoch: 4, Rank: 0}, a.APIAddr()); !errors.Is(err, errkind.NotFound) {
		t.Errorf("fetch of a shard a lacks: %v, want ErrNotFound", err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := l.Addr().String()
	l.Close()
	if _, err := cb.FetchShard(ctx, shard.Ref{Job: "heat", Epoch: 4, Rank: 0}, gone); !errors.Is(err, errkind.BadGateway) || !strings.Contains(err.Error(), gone) {
		t.Errorf("fetch from a dead address: %v, want ErrBadGateway naming %s", err, gone)
	}

	// A corrupt upload is rejected and b keeps its good copy.
	if err := cb.PutShard(ctx, ref0, bytes.NewReader(bad)); !errors.Is(err, errkind.BadRequest) || !strings.Contains(err.Error(), "wrong shard") && !strings.Contains(err.Error(), "checksum") {
		t.Errorf("PUT of a bad shard: %v, want ErrBadRequest naming the check", err)
	}
	if info, err := b.Shards().Stat(ref0); err != nil || !reflect.DeepEqual(info, idx.Shards[0]) {
		t.Errorf("b's copy after a bad upload: %+v, %v", info, err)
	}

	// Requests, removal.
	if err := ca.RequestCheckpoint(ctx, "heat"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.DataDir(), CkptDir, "heat", "request-checkpoint")); err != nil {
		t.Errorf("request file: %v", err)
	}
	// A new run granted on a withdraws the request the earlier run left.
	if _, err := ca.Grant(ctx, api.GrantRequest{Job: "heat", Coordinator: a.Name(), Ranks: 1, TTL: job.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.DataDir(), CkptDir, "heat", "request-checkpoint")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("request file after a new grant: %v, want it gone", err)
	}
	writeRankShard(t, b, shard.Ref{Job: "heat", Epoch: 5, Rank: 0}, testShard(t, "heat", 5, 0, 2, 100))
	if removed, err := cb.RemoveShardsBefore(ctx, "heat", 5); err != nil || len(removed) != 1 || removed[0] != 3 {
		t.Errorf("RemoveShardsBefore(5) on b = %v, %v; want [3]", removed, err)
	}
	if removed, err := ca.RemoveJobShards(ctx, "heat"); err != nil || len(removed) != 1 || removed[0] != 3 {
		t.Errorf("RemoveJobShards on a = %v, %v; want [3]", removed, err)
	}
	if idx, err := ca.Shards(ctx, "heat"); err != nil || len(idx.Shards)+len(idx.Bad) != 0 {
		t.Errorf("a's index after removing the job = %+v, %v", idx, err)
	}
}

func TestShardRoutesNeedTheSecret(t *testing.T) {
	a := startCluster(t, 1)[0]
	writeRankShard(t, a, shard.Ref{Job: "heat", Epoch: 1, Rank: 0}, testShard(t, "heat", 1, 0, 1, 100))
	ctx := context.Background()
	wrong := api.NewClient(a.LocalAPIAddr(), []byte("not the cluster secret at all!!"))
	checks := map[string]error{}
	_, checks["index"] = wrong.Shards(ctx, "heat")
	_, _, checks["get"] = wrong.GetShard(ctx, shard.Ref{Job: "heat", Epoch: 1, Rank: 0})
	_, checks["fetch"] = wrong.FetchShard(ctx, shard.Ref{Job: "heat", Epoch: 1, Rank: 0}, "127.0.0.1:1")
	_, checks["remove"] = wrong.RemoveJobShards(ctx, "heat")
	checks["request"] = wrong.RequestCheckpoint(ctx, "heat")
	_, checks["ranks"] = wrong.RankStates(ctx, "heat")
	for name, err := range checks {
		if !errors.Is(err, errkind.Unauthorized) {
			t.Errorf("%s with a wrong secret: %v, want ErrUnauthorized", name, err)
		}
	}
	// Over TLS with the cluster's certificate but unsigned: refused all the same.
	id, err := pki.ClientIdentity(a.Secret(), "test")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: id.ClientConfig()}}
	for _, path := range []string{"/v1/shards/heat", "/v1/shards/heat/1/0", "/v1/grants/heat/ranks"} {
		resp, err := hc.Get("https://" + a.LocalAPIAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("unsigned GET %s: status %d, want 401", path, resp.StatusCode)
		}
		// Plain HTTP gets no API answer at all.
		resp, err = http.Get("http://" + a.LocalAPIAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || strings.Contains(string(body), `"error"`) {
			t.Errorf("plain HTTP GET %s: status %d, body %q; want 400 and no API answer", path, resp.StatusCode, body)
		}
	}
	if idx, _ := a.Shards().Index("heat"); len(idx.Shards) != 1 {
		t.Errorf("the shard is gone after refused calls: %+v", idx)
	}
}

func TestRankStatesRoute(t *testing.T) {
	a := startCluster(t, 1)[0]
	ctx := context.Background()
	c := api.NewClient(a.LocalAPIAddr(), a.Secret())
	if ranks, err := c.RankStates(ctx, "heat"); err != nil || len(ranks) != 0 {
		t.Errorf("RankStates before any rank ran = %+v, %v; want none", ranks, err)
	}
	dir := RanksDir(a.DataDir(), "heat")
	os.MkdirAll(dir, 0o755)
	engine.WriteRankState(dir, engine.RankState{Rank: 3, PID: 300, State: engine.StateSignaled, Signal: 9, TimeNs: 77})
	engine.WriteRankState(dir, engine.RankState{Rank: 1, PID: os.Getpid(), State: engine.StateRunning}) // a wrapper alive
	engine.WriteRankState(dir, engine.RankState{Rank: 2, PID: 200, State: engine.StateExited, Code: 3, TimeNs: 78})
	ranks, err := c.RankStates(ctx, "heat")
	want := []job.RankState{
		{Rank: 1, PID: os.Getpid(), State: "running"},
		{Rank: 2, PID: 200, State: "exited", Code: 3, TimeNs: 78},
		{Rank: 3, PID: 300, State: "signaled", Signal: 9, TimeNs: 77},
	}
	if err != nil || len(ranks) != len(want) {
		t.Fatalf("RankStates = %+v, %v; want %+v", ranks, err, want)
	}
	for i := range want {
		if ranks[i] != want[i] {
			t.Errorf("rank state %d = %+v, want %+v", i, ranks[i], want[i])
		}
	}
}

// TestShardIndexLongPoll: a coordinator waiting on a node's index of a job hears
// of a shard a rank writes there, and of a copy another node fetches, without
// asking again.
func TestShardIndexLongPoll(t *testing.T) {
	agents := startCluster(t, 2)
	a, b := agents[0], agents[1]
	ctx := context.Background()
	ca := api.NewClient(a.LocalAPIAddr(), a.Secret())
	cb := api.NewClient(b.LocalAPIAddr(), b.Secret())
	ref := shard.Ref{Job: "heat", Epoch: 3, Rank: 0}

	steps := []struct {
		name   string
		client *api.Client
		change func()
		want   int // shards listed after the change
	}{
		{"a rank writes on a", ca, func() { // as libshoal does: a temporary file renamed
			path := jobdir.Dir{Root: filepath.Join(a.DataDir(), CkptDir), Job: "heat"}.ShardPath(3, 0)
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path+".tmp", testShard(t, "heat", 3, 0, 2, 1000), 0o644)
			os.Rename(path+".tmp", path)
		}, 1},
		{"b fetches it", cb, func() { cb.FetchShard(ctx, ref, a.APIAddr()) }, 1},
	}
	for _, st := range steps {
		before, err := st.client.Shards(ctx, "heat")
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(200*time.Millisecond, st.change)
		start := time.Now()
		after, err := st.client.WaitShards(ctx, "heat", before.Tag, 30*time.Second)
		if err != nil || after.Tag == before.Tag || len(after.Shards) != st.want || time.Since(start) > 5*time.Second {
			t.Errorf("%s: the wait ended after %v with %+v, %v; want the new shard within a second or so", st.name, time.Since(start), after, err)
		}
	}
}

// TestShardCopiedAsChanges: a node that holds a rank's shard of an earlier
// epoch is sent only the blocks of the new shard that changed, over the
// cluster's TLS, and stores the same bytes as its source; an earlier copy
// damaged after it was verified, in a block the new shard takes from it,
// fails that block's sum, and the shard is then copied whole.
func TestShardCopiedAsChanges(t *testing.T) {
	agents := startCluster(t, 2)
	a, b := agents[0], agents[1]
	// Raw copies until the test says the link is slow: the links the agents
	// measure on a loaded machine may be slow enough for b to ask for its
	// copies compressed, which their sizes on the wire would not show.
	b.Shards().LinkRate = nil
	ctx := context.Background()
	cb := api.NewClient(b.LocalAPIAddr(), b.Secret())
	state := make([]byte, 10*shard.BlockSize+1234)
	for i := range state {
		state[i] = byte(i * 31 / 7)
	}
	fetch := func(epoch uint64) (api.Fetched, []byte) {
		t.Helper()
		ref := shard.Ref{Job: "heat", Epoch: epoch, Rank: 0}
		want := encodeShard(t, shard.Header{Job: "heat", Epoch: epoch, Rank: 0, NRanks: 1, CreatedNs: epoch}, state)
		writeRankShard(t, a, ref, want)
		f, err := cb.FetchShard(ctx, ref, a.APIAddr())
		if err != nil || !f.Copied || f.Shard.Size != int64(len(want)) {
			t.Fatalf("FetchShard of epoch %d = %+v, %v; want a copy of %d bytes", epoch, f, err, len(want))
		}
		rc, _, err := cb.GetShard(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if got, _ := io.ReadAll(rc); !bytes.Equal(got, want) {
			t.Fatalf("b's copy of epoch %d differs from a's shard", epoch)
		}
		return f, want
	}

	// Nothing earlier on b: the whole shard.
	if f, want := fetch(1); f.Changed > 0 || f.Wire != int64(len(want)) {
		t.Errorf("first copy = %+v, want the whole %d bytes", f, len(want))
	}
	// Epoch 2 changes the state in block 4 only; the header's block and the
	// last (the trailer's checksum) change with every epoch.
	state[4*shard.BlockSize+100]++
	f, want := fetch(2)
	if most := int64(2+3*shard.BlockSize) + 1234; f.Changed == 0 || f.Changed > most || f.Changed < 2*shard.BlockSize || f.Wire != f.Changed {
		t.Errorf("copy of epoch 2 = %+v, want its changes: 3 blocks of %d bytes, %d bytes at most, sent raw", f, len(want), most)
	}

	// b's copy of epoch 2 is damaged in block 6 after it was verified (its
	// size and time kept, so the store's verification still stands): the
	// block copied from it into epoch 3 fails its sum, and b copies epoch 3
	// whole.
	path := jobdir.Dir{Root: filepath.Join(b.DataDir(), CkptDir), Job: "heat"}.ShardPath(2, 0)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged, _ := os.ReadFile(path)
	damaged[6*shard.BlockSize+5] ^= 1
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	state[8*shard.BlockSize]++
	if f, want := fetch(3); f.Changed > 0 || f.Wire != int64(len(want)) {
		t.Errorf("copy of epoch 3 over a damaged epoch 2 = %+v, want the whole %d bytes", f, len(want))
	}
	// And from the good epoch 3, epoch 4's changes again.
	state[0]++
	if f, _ := fetch(4); f.Changed == 0 {
		t.Errorf("copy of epoch 4 = %+v, want its changes", f)
	}
	// Over a slow link the changes are sent compressed (the state compresses).
	b.Shards().LinkRate = func(string) float64 { return 1e6 }
	state[2*shard.BlockSize]++
	if f, _ := fetch(5); f.Changed == 0 || f.Wire >= f.Changed || f.Changed > 4*shard.BlockSize {
		t.Errorf("copy of epoch 5 over a slow link = %+v, want its changes, compressed", f)
	}
}
