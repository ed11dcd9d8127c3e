package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/shard"
	"shoal/internal/testbed"
)

// startS3 starts SeaweedFS for one test, with a bucket "shoal-test"; without weed the
// test is skipped, or fails under make test (SHOAL_REQUIRE_BUILD).
func startS3(t *testing.T) *testbed.S3Server {
	t.Helper()
	weed := testbed.WeedPath()
	if _, err := os.Stat(weed); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%s missing: make test builds it (make s3-server)", weed)
		}
		t.Skipf("%s not built (make s3-server)", weed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := testbed.StartS3(ctx, testbed.S3Config{Weed: weed, Dir: t.TempDir(), BindIP: "127.0.0.1", Bucket: "shoal-test"})
	if err != nil {
		t.Fatalf("start SeaweedFS: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// TestDownloadShard: a node reads a shard of an epoch kept in an object store with
// its agent's credentials, verifies it against the manifest's entry and its own
// checksum, and keeps it in its shard store as a shard put there. A shard that is
// missing, damaged, or not the one the request describes is corrupt (422) and
// nothing is kept; an agent without credentials answers 503.
func TestDownloadShard(t *testing.T) {
	srv := startS3(t)
	for _, kv := range srv.EnvVars(srv.Host) {
		k, v, _ := bytes.Cut([]byte(kv), []byte("="))
		t.Setenv(string(k), string(v))
	}
	// No shared credentials file of this machine's user counts.
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	s3, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(key string, b []byte) {
		t.Helper()
		if _, err := s3.PutObject(ctx, "shoal-test", key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	checksum := func(b []byte) uint64 {
		v := shard.NewVerifier(int64(len(b)))
		v.Write(b)
		_, sum, err := v.Sum()
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	good := testShard(t, "heat", 7, 1, 2, 1<<20)
	put("jobs/heat/epoch-7/rank-1.shard", good)
	damaged := testShard(t, "heat", 7, 0, 2, 4000)
	sum0 := checksum(damaged)
	damaged[3000] ^= 1
	put("jobs/heat/epoch-7/rank-0.shard", damaged)

	a := startCluster(t, 1)[0]
	c := api.NewClient(a.LocalAPIAddr(), a.Secret())
	loc := "s3://shoal-test/jobs/heat"
	req := api.DownloadRequest{Location: loc, Ranks: 2, Size: int64(len(good)), Checksum: checksum(good)}
	ref1 := shard.Ref{Job: "heat", Epoch: 7, Rank: 1}
	f, err := c.DownloadShard(ctx, ref1, req)
	if err != nil {
		t.Fatalf("download rank 1: %v", err)
	}
	if !f.Copied || f.Shard.Size != int64(len(good)) || f.Shard.Rank != 1 || f.Shard.Epoch != 7 {
		t.Errorf("download rank 1 = %+v, want rank 1 of epoch 7 copied, %d bytes", f, len(good))
	}
	rc, _, err := c.GetShard(ctx, ref1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, good) {
		t.Errorf("the node keeps %d bytes of rank 1, not the %d kept in the store", len(got), len(good))
	}

	bad := []struct {
		name string
		ref  shard.Ref
		req  api.DownloadRequest
		want error
	}{
		{"damaged object", shard.Ref{Job: "heat", Epoch: 7, Rank: 0},
			api.DownloadRequest{Location: loc, Ranks: 2, Size: int64(len(damaged)), Checksum: sum0}, errkind.Corrupt},
		{"another checksum", shard.Ref{Job: "heat", Epoch: 7, Rank: 1},
			api.DownloadRequest{Location: loc, Ranks: 2, Size: int64(len(good)), Checksum: sum0}, errkind.Corrupt},
		{"another size", shard.Ref{Job: "heat", Epoch: 7, Rank: 1},
			api.DownloadRequest{Location: loc, Ranks: 2, Size: int64(len(good)) - 1, Checksum: req.Checksum}, errkind.Corrupt},
		{"another rank count", shard.Ref{Job: "heat", Epoch: 7, Rank: 1},
			api.DownloadRequest{Location: loc, Ranks: 3, Size: int64(len(good)), Checksum: req.Checksum}, errkind.Corrupt},
		{"missing object", shard.Ref{Job: "heat", Epoch: 8, Rank: 1}, req, errkind.Corrupt},
		{"rank past the epoch's", shard.Ref{Job: "heat", Epoch: 7, Rank: 2}, req, errkind.BadRequest},
		{"a directory", ref1, api.DownloadRequest{Location: "/etc", Ranks: 2, Size: 4096}, errkind.BadRequest},
	}
	for _, tt := range bad {
		_, err := c.DownloadShard(ctx, tt.ref, tt.req)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
	idx, err := c.Shards(ctx, "heat")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Shards) != 1 || idx.Shards[0].Rank != 1 || idx.Shards[0].Epoch != 7 || len(idx.Bad) != 0 {
		t.Errorf("the node's index = %+v, want rank 1 of epoch 7 alone", idx)
	}

	// Without credentials the node says so, and shoal run puts the shard itself.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	_, err = c.DownloadShard(ctx, shard.Ref{Job: "heat", Epoch: 7, Rank: 0}, req)
	if !errors.Is(err, errkind.NotAvailable) {
		t.Errorf("download without credentials: got %v, want not available", err)
	}
}
