package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"shoal/internal/shard"
	"shoal/internal/testbed"
)

func TestParseLocation(t *testing.T) {
	good := []struct {
		in   string
		want Location
	}{
		{"/shared/durable", Location{Dir: "/shared/durable"}},
		{"/shared/durable/", Location{Dir: "/shared/durable"}},
		{"s3://shoal-ckpt/jobs/heat", Location{Bucket: "shoal-ckpt", Prefix: "jobs/heat"}},
		{"s3://shoal-ckpt/jobs/heat/", Location{Bucket: "shoal-ckpt", Prefix: "jobs/heat"}},
		{"s3://shoal-ckpt", Location{Bucket: "shoal-ckpt"}},
		{"s3://shoal-ckpt/", Location{Bucket: "shoal-ckpt"}},
	}
	for _, tt := range good {
		got, err := ParseLocation(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseLocation(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if err == nil && tt.in[len(tt.in)-1] != '/' && got.String() != tt.in {
			t.Errorf("ParseLocation(%q).String() = %q", tt.in, got.String())
		}
	}
	bad := []struct{ in, says string }{
		{"s3://", "no bucket"},
		{"s3:///jobs", "no bucket"},
		{"s3://Shoal_Ckpt/jobs", "bad bucket name"},
		{"s3://ab/jobs", "bad bucket name"},
		{"s3://shoal..ckpt/jobs", "bad bucket name"},
		{"s3://shoal-ckpt/jobs//heat", "empty, . or .."},
		{"s3://shoal-ckpt/jobs/../heat", "empty, . or .."},
		{"durable", "absolute"},
		{"./durable", "absolute"},
		{"gs://bucket/jobs", "neither an absolute directory nor s3://"},
	}
	for _, tt := range bad {
		_, err := ParseLocation(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseLocation(%q): error %v, want one line saying %q", tt.in, err, tt.says)
		}
	}
}

// The S3 server the tests share: SeaweedFS from make s3-server, on free loopback ports
// with a directory of its own, started by the first test that needs it and stopped
// by TestMain.
var s3srv struct {
	once sync.Once
	s    *testbed.S3Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if s3srv.s != nil {
		s3srv.s.Stop()
		os.RemoveAll(s3srv.s.Dir)
	}
	os.Exit(code)
}

const testBucket = "shoal-test"

// s3Server returns the shared server, starting it first; without weed the test is
// skipped, or fails under make test (SHOAL_REQUIRE_BUILD).
func s3Server(t *testing.T) *testbed.S3Server {
	t.Helper()
	weed := testbed.WeedPath()
	if _, err := os.Stat(weed); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%s missing: make test builds it (make s3-server)", weed)
		}
		t.Skipf("%s not built (make s3-server)", weed)
	}
	s3srv.once.Do(func() {
		dir, err := os.MkdirTemp("", "shoal-durable-s3-")
		if err != nil {
			s3srv.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s3srv.s, s3srv.err = testbed.StartS3(ctx, testbed.S3Config{Weed: weed, Dir: dir, BindIP: "127.0.0.1", Bucket: testBucket})
		if s3srv.err != nil {
			os.RemoveAll(dir)
		}
	})
	if s3srv.err != nil {
		t.Fatalf("start SeaweedFS: %v", s3srv.err)
	}
	return s3srv.s
}

var prefixes atomic.Int64

// backend is one kind of store under test, with what the tests do to it behind the
// store's back.
type backend struct {
	name string
	// open returns a new, empty store.
	open func(t *testing.T) Store
	// crash leaves what a save of epoch e that stopped before its manifest
	// leaves: every shard, no manifest.
	crash func(t *testing.T, st Store, e uint64)
	// spoil flips a byte of rank's shard of epoch e.
	spoil func(t *testing.T, st Store, e uint64, rank int)
	// epochs lists the epochs of which the store holds anything, complete or not.
	epochs func(t *testing.T, st Store) []uint64
	// keepsTwo: the newest complete epoch and the one before are kept, and a
	// corrupt newest one is refused for the one before.
	keepsTwo bool
}

var backends = []backend{
	{
		name: "dir",
		open: func(t *testing.T) Store { return &DirStore{Dir: filepath.Join(t.TempDir(), "durable")} },
		crash: func(t *testing.T, st Store, e uint64) {
			dir := filepath.Join(st.(*DirStore).Dir, tmpDir(e))
			os.MkdirAll(dir, 0o700)
			for r := range heat.Ranks {
				writeShard(t, filepath.Join(dir, shardName(r)), "heat-1", e, r)
			}
		},
		spoil: func(t *testing.T, st Store, e uint64, rank int) {
			p := filepath.Join(st.(*DirStore).Dir, epochDir(e), shardName(rank))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o600)
		},
		epochs: func(t *testing.T, st Store) []uint64 {
			var out []uint64
			for _, n := range names2(st.(*DirStore).Dir) {
				var e uint64
				n = filepath.Base(n)
				if _, err := fmt.Sscanf(strings.TrimPrefix(n, "."), "epoch-%d", &e); err == nil && isEpochEntry(n) {
					out = append(out, e)
				}
			}
			slices.Sort(out)
			return out
		},
	},
	{
		name: "s3",
		open: func(t *testing.T) Store {
			srv := s3Server(t)
			t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
			t.Setenv("AWS_REGION", srv.Region)
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
			loc := Location{Bucket: testBucket, Prefix: fmt.Sprintf("jobs/%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), prefixes.Add(1))}
			st, err := NewS3Store(loc, S3Options{Endpoint: srv.Endpoint("127.0.0.1"), Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		crash: func(t *testing.T, st Store, e uint64) {
			s := st.(*S3Store)
			for r := range heat.Ranks {
				b := encodeShard(t, "heat-1", e, r)
				put(t, s, s.key(epochDir(e)+"/"+shardName(r)), b)
			}
		},
		spoil: func(t *testing.T, st Store, e uint64, rank int) {
			s := st.(*S3Store)
			key := s.key(epochDir(e) + "/" + shardName(rank))
			obj, err := s.c.GetObject(context.Background(), testBucket, key, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(obj)
			obj.Close()
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			put(t, s, key, b)
		},
		epochs: func(t *testing.T, st Store) []uint64 {
			epochs, err := st.(*S3Store).list(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var out []uint64
			for e := range epochs {
				out = append(out, e)
			}
			slices.Sort(out)
			return out
		},
		keepsTwo: true,
	},
}

func put(t *testing.T, s *S3Store, key string, b []byte) {
	t.Helper()
	if _, err := s.c.PutObject(context.Background(), testBucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func encodeShard(t *testing.T, job string, epoch uint64, rank int) []byte {
	t.Helper()
	rc, err := shards(t, job, epoch, heat)(rank)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	return b
}

func writeShard(t *testing.T, path, job string, epoch uint64, rank int) {
	t.Helper()
	if err := os.WriteFile(path, encodeShard(t, job, epoch, rank), 0o600); err != nil {
		t.Fatal(err)
	}
}

// source is the shards of heat-1's epoch as a Source; sized says their sizes up front.
func source(t *testing.T, epoch uint64, sized bool) Source {
	return func(r int) (io.ReadCloser, int64, error) {
		b := encodeShard(t, "heat-1", epoch, r)
		if !sized {
			return io.NopCloser(bytes.NewReader(b)), -1, nil
		}
		return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
	}
}

func saveEpoch(t *testing.T, st Store, epoch uint64) {
	t.Helper()
	m := Manifest{Identity: heat, Job: "heat-1", SlurmJob: "7", Epoch: epoch}
	if err := st.Save(context.Background(), m, source(t, epoch, epoch%2 == 0)); err != nil {
		t.Fatalf("Save epoch %d: %v", epoch, err)
	}
}

// forEach runs test on every backend.
func forEach(t *testing.T, test func(t *testing.T, b backend, st Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b, b.open(t)) })
	}
}

// An epoch saved is resumed: its manifest, and every shard read back whole through
// OpenShard; Clear leaves nothing to resume.
func TestStoreSaveAndResume(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st Store) {
		ctx := context.Background()
		if _, err := st.Newest(ctx, heat); !errors.Is(err, ErrNoEpoch) {
			t.Fatalf("Newest of an empty store: %v, want %v", err, ErrNoEpoch)
		}
		saveEpoch(t, st, 2)
		saveEpoch(t, st, 3)
		m, err := st.Newest(ctx, heat)
		if err != nil || m.Epoch != 3 || m.Job != "heat-1" || m.SlurmJob != "7" || m.CreatedNs != 1003 || len(m.Shards) != 3 {
			t.Fatalf("Newest = %+v, %v; want epoch 3 of job heat-1 from Slurm job 7, created 1003, 3 shards", m, err)
		}
		if p, err := st.Peek(ctx, heat); err != nil || p.Epoch != 3 {
			t.Errorf("Peek = epoch %d, %v; want 3", p.Epoch, err)
		}
		for r := range m.Ranks {
			rc, size, err := st.OpenShard(ctx, m, r)
			if err != nil {
				t.Fatalf("OpenShard rank %d: %v", r, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if want := encodeShard(t, "heat-1", 3, r); err != nil || !bytes.Equal(got, want) || size != int64(len(want)) {
				t.Errorf("rank %d's shard: %d bytes (size %d), %v; want the %d saved", r, len(got), size, err, len(want))
			}
		}
		if _, err := st.Peek(ctx, Identity{Program: "heat", Ranks: 3}); !errors.Is(err, ErrForeign) {
			t.Errorf("Peek with other arguments: %v, want %v", err, ErrForeign)
		}
		if err := st.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.epochs(t, st); len(got) != 0 {
			t.Errorf("after Clear the store holds epochs %v", got)
		}
		if _, err := st.Newest(ctx, heat); !errors.Is(err, ErrNoEpoch) {
			t.Errorf("Newest after Clear: %v, want %v", err, ErrNoEpoch)
		}
	})
}

// A save that stopped between its shards and its manifest (SCR's issue 531) leaves
// the previous epoch current, and the next save removes what it left; a save that
// fails leaves the previous epoch current too.
func TestStoreCrashBeforeManifest(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st Store) {
		ctx := context.Background()
		saveEpoch(t, st, 2)
		b.crash(t, st, 3)
		if m, err := st.Newest(ctx, heat); err != nil || m.Epoch != 2 {
			t.Fatalf("Newest after a crash before epoch 3's manifest = epoch %d, %v; want 2", m.Epoch, err)
		}
		failing := func(r int) (io.ReadCloser, int64, error) {
			if r == 2 {
				return nil, 0, errors.New("node gone")
			}
			return source(t, 4, true)(r)
		}
		if err := st.Save(ctx, Manifest{Identity: heat, Job: "heat-1", Epoch: 4}, failing); err == nil {
			t.Fatal("Save with rank 2's shard unreadable succeeded")
		}
		spoilt := func(r int) (io.ReadCloser, int64, error) {
			rc, n, err := source(t, 4, true)(r)
			if r == 1 {
				b, _ := io.ReadAll(rc)
				b[len(b)/2] ^= 1
				rc = io.NopCloser(bytes.NewReader(b))
			}
			return rc, n, err
		}
		if err := st.Save(ctx, Manifest{Identity: heat, Job: "heat-1", Epoch: 4}, spoilt); !errors.Is(err, shard.ErrChecksum) {
			t.Fatalf("Save with a byte of rank 1's shard flipped on the way: %v, want %v", err, shard.ErrChecksum)
		}
		if m, err := st.Newest(ctx, heat); err != nil || m.Epoch != 2 {
			t.Fatalf("Newest after failed saves = epoch %d, %v; want 2", m.Epoch, err)
		}
		saveEpoch(t, st, 5)
		want := []uint64{5}
		if b.keepsTwo {
			want = []uint64{2, 5}
		}
		if got := b.epochs(t, st); !slices.Equal(got, want) {
			t.Errorf("after the next save the store holds epochs %v, want %v", got, want)
		}
		if m, err := st.Newest(ctx, heat); err != nil || m.Epoch != 5 {
			t.Errorf("Newest = epoch %d, %v; want 5", m.Epoch, err)
		}
	})
}

// A corrupt object of the newest epoch is refused; an object store then resumes the
// epoch before it, which it keeps for this, and a directory, which keeps one, has
// none to resume.
func TestStoreCorruptNewest(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st Store) {
		ctx := context.Background()
		saveEpoch(t, st, 2)
		saveEpoch(t, st, 3)
		saveEpoch(t, st, 4)
		want := []uint64{4}
		if b.keepsTwo {
			want = []uint64{3, 4}
		}
		if got := b.epochs(t, st); !slices.Equal(got, want) {
			t.Errorf("the store holds epochs %v, want %v", got, want)
		}
		m4, err := st.Peek(ctx, heat)
		if err != nil {
			t.Fatal(err)
		}
		b.spoil(t, st, 4, 1)
		rc, _, err := st.OpenShard(ctx, m4, 1)
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("reading the spoilt shard: %v, want %v", err, ErrCorrupt)
		}
		m, err := st.Newest(ctx, heat)
		if b.keepsTwo {
			if err != nil || m.Epoch != 3 {
				t.Errorf("Newest with epoch 4 corrupt = epoch %d, %v; want 3", m.Epoch, err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("Newest with epoch 4 corrupt: %v, want %v", err, ErrCorrupt)
		}
	})
}

// A shard larger than a part goes up in parts, its size unknown in advance, and comes
// back unchanged.
func TestS3LargeShard(t *testing.T) {
	st := backends[1].open(t)
	id := Identity{Program: "heat", Ranks: 1}
	data := make([]byte, partSize+3*copyBuf)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b, err := shard.Encode(shard.Header{Job: "heat-2", Epoch: 1, NRanks: 1, CreatedNs: 42},
		[]shard.Region{{ID: 1, ElemSize: 8, Count: uint64(len(data) / 8), Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	src := func(int) (io.ReadCloser, int64, error) { return io.NopCloser(bytes.NewReader(b)), -1, nil }
	ctx := context.Background()
	if err := st.Save(ctx, Manifest{Identity: id, Job: "heat-2", Epoch: 1}, src); err != nil {
		t.Fatal(err)
	}
	m, err := st.Newest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := st.OpenShard(ctx, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, b) {
		t.Errorf("the shard read back: %d bytes, %v; want the %d saved", len(got), err, len(b))
	}
}

// A wrong secret fails every call in one line that holds neither the secret nor the
// access key's secret part, whether the endpoint came from the option or the
// environment.
func TestS3BadSecret(t *testing.T) {
	st := backends[1].open(t)
	saveEpoch(t, st, 2)
	srv := s3srv.s
	const bad = "wr0ngSecretThatMustNotLeakIntoErrors1234"
	t.Setenv("AWS_SECRET_ACCESS_KEY", bad)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.Endpoint("127.0.0.1"))
	s, err := NewS3Store(st.(*S3Store).loc, S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, nerr := s.Newest(ctx, heat)
	serr := s.Save(ctx, Manifest{Identity: heat, Job: "heat-1", Epoch: 3}, source(t, 3, true))
	cerr := s.Clear(ctx)
	for name, err := range map[string]error{"Newest": nerr, "Save": serr, "Clear": cerr} {
		switch {
		case err == nil:
			t.Errorf("%s with a wrong secret succeeded", name)
		case errors.Is(err, ErrNoEpoch) || errors.Is(err, ErrCorrupt):
			t.Errorf("%s with a wrong secret: %v, want an error of the server", name, err)
		case strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), srv.SecretKey) || strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: %q holds a secret or is more than one line", name, err)
		}
	}
	t.Logf("the error: %v", nerr)
}

// Each node uploads its own shards to a bucket, in any order and at once
// (S3Store.PutShard, after one Begin), and the epoch is current once one process
// commits the manifest listing them: before, the previous epoch is; a shard put
// under another rank's name is refused.
func TestS3ShardsUploadedApart(t *testing.T) {
	b := backends[1]
	st := b.open(t).(*S3Store)
	ctx := context.Background()
	saveEpoch(t, st, 2)
	m := Manifest{Identity: heat, Job: "heat-1", Epoch: 3}
	if saved, err := st.Begin(ctx, m); err != nil || saved {
		t.Fatalf("Begin epoch 3: saved %v, %v", saved, err)
	}
	m.Shards = make([]ShardEntry, m.Ranks)
	created := make([]uint64, m.Ranks)
	var wg sync.WaitGroup
	errs := make([]error, m.Ranks)
	for r := m.Ranks - 1; r >= 0; r-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := encodeShard(t, "heat-1", 3, r)
			m.Shards[r], created[r], errs[r] = st.PutShard(ctx, m, r, bytes.NewReader(data), int64(len(data)))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("PutShard rank %d: %v", r, err)
		}
	}
	if p, err := st.Peek(ctx, heat); err != nil || p.Epoch != 2 {
		t.Fatalf("before the manifest: Peek = epoch %d, %v; want 2", p.Epoch, err)
	}
	m.CreatedNs = created[0]
	if err := st.Commit(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Newest(ctx, heat); err != nil || got.Epoch != 3 || got.CreatedNs != 1003 {
		t.Fatalf("after the manifest: Newest = epoch %d created %d, %v; want 3, 1003", got.Epoch, got.CreatedNs, err)
	}
	wrong := encodeShard(t, "heat-1", 4, 0)
	if _, _, err := st.PutShard(ctx, Manifest{Identity: heat, Job: "heat-1", Epoch: 4}, 1, bytes.NewReader(wrong), int64(len(wrong))); err == nil {
		t.Errorf("PutShard of rank 0's shard as rank 1's: accepted")
	}
}

// RemoveJob removes a job's epochs, and the objects of saves cut short only when
// no other job's epoch shares the prefix.
func TestS3RemoveJob(t *testing.T) {
	b := backends[1]
	ctx := context.Background()

	alone := b.open(t).(*S3Store)
	saveEpoch(t, alone, 2)
	b.crash(t, alone, 3)
	if n, err := alone.RemoveJob(ctx, "heat-9"); err != nil || n != 0 {
		t.Fatalf("RemoveJob of a job the prefix does not keep: %d epochs, %v; want 0", n, err)
	}
	if got := b.epochs(t, alone); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("after removing another job's: epochs %v, want [2 3]", got)
	}
	if n, err := alone.RemoveJob(ctx, "heat-1"); err != nil || n != 2 {
		t.Fatalf("RemoveJob heat-1: %d epochs, %v; want 2 (its own and the one cut short)", n, err)
	}
	if got := b.epochs(t, alone); len(got) != 0 {
		t.Errorf("after RemoveJob heat-1: epochs %v, want none", got)
	}

	shared := b.open(t).(*S3Store)
	saveEpoch(t, shared, 2)
	heat2 := func(r int) (io.ReadCloser, int64, error) {
		return io.NopCloser(bytes.NewReader(encodeShard(t, "heat-2", 3, r))), -1, nil
	}
	if err := shared.Save(ctx, Manifest{Identity: heat, Job: "heat-2", Epoch: 3}, heat2); err != nil {
		t.Fatal(err)
	}
	b.crash(t, shared, 4)
	if n, err := shared.RemoveJob(ctx, "heat-1"); err != nil || n != 1 {
		t.Fatalf("RemoveJob heat-1 beside heat-2: %d epochs, %v; want 1", n, err)
	}
	if got := b.epochs(t, shared); !slices.Equal(got, []uint64{3, 4}) {
		t.Errorf("after RemoveJob heat-1 beside heat-2: epochs %v, want [3 4] (heat-2's, and one no manifest names)", got)
	}
}

// DropAfter removes the job's epochs newer than the one a run resumes from, so
// that the run's own epochs under those numbers are saved, not taken for kept.
func TestS3DropAfter(t *testing.T) {
	b := backends[1]
	ctx := context.Background()
	st := b.open(t).(*S3Store)
	saveEpoch(t, st, 2)
	saveEpoch(t, st, 3)
	if n, err := st.DropAfter(ctx, "heat-9", 2); err != nil || n != 0 {
		t.Fatalf("DropAfter of another job: %d, %v; want 0", n, err)
	}
	if n, err := st.DropAfter(ctx, "heat-1", 2); err != nil || n != 1 {
		t.Fatalf("DropAfter heat-1 after 2: %d, %v; want 1 (epoch 3)", n, err)
	}
	if got := b.epochs(t, st); !slices.Equal(got, []uint64{2}) {
		t.Errorf("after DropAfter: epochs %v, want [2]", got)
	}
	if saved, err := st.Begin(ctx, Manifest{Identity: heat, Job: "heat-1", Epoch: 3}); err != nil || saved {
		t.Errorf("Begin epoch 3 after DropAfter: saved %v, %v; want a new save", saved, err)
	}
}

// Paced passes every byte on, in reads of at most a tenth of a second's worth.
func TestPaced(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 10000)
	r := strings.NewReader(string(data))
	if got := Paced(context.Background(), r, 0); got != io.Reader(r) {
		t.Errorf("Paced with no rate wraps the reader")
	}
	const rate = 400000 // 100 000 bytes: 0.25 s
	p := Paced(context.Background(), bytes.NewReader(data), rate)
	buf := make([]byte, 1<<20)
	var out []byte
	for {
		n, err := p.Read(buf)
		if n > rate/10 {
			t.Fatalf("a read of %d bytes, beyond a tenth of a second's", n)
		}
		out = append(out, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out, data) {
		t.Errorf("Paced passed %d bytes, want the %d given", len(out), len(data))
	}
}
