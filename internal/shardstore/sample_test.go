package shardstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/node"
	"shoal/internal/shard"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// storeService serves a store's shards as an agent's API does.
type storeService struct {
	api.Unavailable
	s *Store
}

func (n storeService) GetShard(ctx context.Context, ref shard.Ref) (io.ReadCloser, int64, error) {
	f, info, err := n.s.Open(ref)
	return f, info.Size, err
}

func (n storeService) OpenShardToSend(ctx context.Context, ref shard.Ref, link float64) (io.ReadCloser, int64, bool, error) {
	f, info, compress, err := n.s.OpenToSend(ref, link)
	return f, info.Size, compress, err
}

type localNode struct{}

func (localNode) Name() string                                { return "n1" }
func (localNode) Nodes(context.Context) ([]node.Node, error)  { return nil, nil }
func (localNode) Voters(context.Context) ([]node.Node, error) { return nil, nil }
func (localNode) MembersAt(string) []node.Node                { return nil }
func (localNode) Leave(context.Context) error                 { return nil }

// sender is a node serving the store src through the real API handler. It
// records how each shard was sent, and damages a compressed one when told.
type sender struct {
	src    *Store
	client *api.Client

	mu     sync.Mutex
	sent   []string // Content-Encoding of each shard answer: "zstd" or ""
	damage bool
}

func newSender(t *testing.T) *sender {
	t.Helper()
	sd := &sender{src: New(t.TempDir())}
	srv := api.NewServer(api.ServerConfig{Node: localNode{}, Secret: testSecret, Version: "test"})
	srv.SetShardService(storeService{s: sd.src})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/shards/") {
			sd.mu.Lock()
			damage := sd.damage
			sd.mu.Unlock()
			w = &recordingWriter{ResponseWriter: w, s: sd, damage: damage}
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	sd.client = api.NewClient(ts.URL, testSecret)
	return sd
}

func (sd *sender) encodings() []string {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return append([]string(nil), sd.sent...)
}

// recordingWriter records the encoding of an answer as its header goes out,
// and with damage flips a bit in the middle of a compressed body's first write
// of more than a few bytes.
type recordingWriter struct {
	http.ResponseWriter
	s       *sender
	damage  bool
	damaged bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if code == http.StatusOK {
		w.s.mu.Lock()
		w.s.sent = append(w.s.sent, w.Header().Get("Content-Encoding"))
		w.s.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.damage && !w.damaged && len(b) > 64 && w.Header().Get("Content-Encoding") == api.EncodingZstd {
		c := append([]byte(nil), b...)
		c[len(c)/2] ^= 0x10
		w.damaged = true
		return w.ResponseWriter.Write(c)
	}
	return w.ResponseWriter.Write(b)
}

// randomShard returns a valid shard of ref whose payload is random bytes.
func randomShard(t *testing.T, r shard.Ref, payload int) []byte {
	t.Helper()
	data := make([]byte, payload)
	rand.Read(data)
	b, err := shard.Encode(shard.Header{Job: r.Job, Epoch: r.Epoch, Rank: uint32(r.Rank), NRanks: 4, CreatedNs: 1},
		[]shard.Region{{ID: 0, ElemSize: 1, Count: uint64(payload), Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFetchCompressed fetches shards through the real API handler and client:
// a compressible one over a slow link is sent compressed, and arrives
// bit-identical and verified; an incompressible one, or any over a link of
// unknown speed, is sent raw.
func TestFetchCompressed(t *testing.T) {
	ctx := context.Background()
	sd := newSender(t)
	smooth := makeShard(t, "heat", 2, 0, 4, 3<<20) // a repeating pattern: compresses well
	noise := randomShard(t, ref(2, 1), 1<<20)
	place(t, sd.src, ref(2, 0), smooth)
	place(t, sd.src, ref(2, 1), noise)
	slow := func(string) float64 { return 1e6 } // 8 Mbit/s
	tests := []struct {
		name     string
		ref      shard.Ref
		want     []byte
		link     func(string) float64
		encoding string
	}{
		{"compressible, slow link", ref(2, 0), smooth, slow, "zstd"},
		{"incompressible, slow link", ref(2, 1), noise, slow, ""},
		{"compressible, link unknown", ref(2, 0), smooth, func(string) float64 { return 0 }, ""},
		{"compressible, no LinkRate", ref(2, 0), smooth, nil, ""},
	}
	for _, tt := range tests {
		dst := New(t.TempDir())
		dst.LinkRate = tt.link
		before := len(sd.encodings())
		f, err := dst.Fetch(ctx, tt.ref, sd.client)
		if err != nil || !f.Copied || f.Shard.Checksum != ckptChecksum(tt.want) || f.Shard.Size != int64(len(tt.want)) {
			t.Errorf("%s: Fetch = %+v, %v; want a copy of the %d-byte shard", tt.name, f, err, len(tt.want))
			continue
		}
		if got := sd.encodings()[before:]; len(got) != 1 || got[0] != tt.encoding {
			t.Errorf("%s: sent with Content-Encoding %q, want %q", tt.name, got, tt.encoding)
		}
		if compressed := f.Wire < f.Shard.Size; compressed != (tt.encoding == "zstd") || f.Wire <= 0 {
			t.Errorf("%s: %d bytes crossed for a shard of %d (Content-Encoding %q)", tt.name, f.Wire, f.Shard.Size, tt.encoding)
		}
		got, err := os.ReadFile(dst.path(tt.ref))
		if err != nil || !bytes.Equal(got, tt.want) {
			t.Errorf("%s: stored %d bytes, %v; want the sender's %d bytes", tt.name, len(got), err, len(tt.want))
		}
	}
}

// TestFetchCompressedDamaged: a compressed stream damaged on the way is a
// failed transfer (502), and nothing is stored.
func TestFetchCompressedDamaged(t *testing.T) {
	sd := newSender(t)
	place(t, sd.src, ref(3, 0), makeShard(t, "heat", 3, 0, 4, 2<<20))
	sd.mu.Lock()
	sd.damage = true
	sd.mu.Unlock()
	dst := New(t.TempDir())
	dst.LinkRate = func(string) float64 { return 1e6 }
	_, err := dst.Fetch(context.Background(), ref(3, 0), sd.client)
	if !errors.Is(err, errkind.BadGateway) || !strings.Contains(err.Error(), "decompressing shard heat/3/0") {
		t.Errorf("Fetch of a damaged compressed stream: %v, want ErrBadGateway naming the decompression", err)
	}
	if got := sd.encodings(); len(got) != 1 || got[0] != "zstd" {
		t.Errorf("sent with Content-Encoding %q, want zstd", got)
	}
	if _, err := dst.Stat(ref(3, 0)); !errors.Is(err, errkind.NotFound) {
		t.Errorf("after the failed fetch: Stat = %v, want ErrNotFound", err)
	}
	if tmp := tmpFiles(t, dst.Dir); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// TestFetchLinkRatePlainSource: a source that cannot be told the link is
// asked as before.
func TestFetchLinkRatePlainSource(t *testing.T) {
	good := makeShard(t, "heat", 4, 1, 2, 1<<20)
	src := &fakeSource{shards: map[shard.Ref][]byte{ref(4, 1): good}}
	s := New(t.TempDir())
	asked := 0
	s.LinkRate = func(addr string) float64 {
		asked++
		return 1e6
	}
	f, err := s.Fetch(context.Background(), ref(4, 1), src)
	if err != nil || !f.Copied || src.calls != 1 || asked != 0 {
		t.Errorf("Fetch from a plain Source = %+v, %v after %d GetShard calls and %d LinkRate calls; want one GetShard call, no LinkRate", f, err, src.calls, asked)
	}
}

// TestOpenToSendSamples: a shard file's version is sampled once; a new
// version is sampled again.
func TestOpenToSendSamples(t *testing.T) {
	s := New(t.TempDir())
	r := ref(5, 0)
	path := place(t, s, r, makeShard(t, "heat", 5, 0, 1, 1<<20))
	open := func(link float64) bool {
		t.Helper()
		f, _, compress, err := s.OpenToSend(r, link)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		return compress
	}
	if open(0) || s.cache["heat"][path].sample != nil {
		t.Fatalf("OpenToSend over an unknown link: compress or sampled; want neither")
	}
	if !open(1e6) {
		t.Errorf("OpenToSend of a compressible shard over 1 MB/s: raw, want compressed")
	}
	first := s.cache["heat"][path].sample
	if first == nil || !(first.Ratio > 0 && first.Ratio < 0.1) || !(first.Compress > 0) || !(first.Decompress > 0) {
		t.Fatalf("sample after OpenToSend: %+v, want a ratio below 0.1 and throughputs", first)
	}
	if open(1e6); s.cache["heat"][path].sample != first {
		t.Errorf("the same version was sampled again")
	}
	if open(1e12) {
		t.Errorf("OpenToSend over 1 TB/s: compressed, want raw")
	}
	place(t, s, r, randomShard(t, r, 1<<20)) // a new version
	if open(1e6) {
		t.Errorf("OpenToSend of an incompressible new version: compressed, want raw")
	}
	if smp := s.cache["heat"][path].sample; smp == nil || smp == first || smp.Ratio < 0.99 {
		t.Errorf("sample of the new version: %+v, want a new one with ratio about 1", smp)
	}
	if _, _, _, err := s.OpenToSend(ref(5, 1), 1e6); !errors.Is(err, errkind.NotFound) {
		t.Errorf("OpenToSend of a missing shard: %v, want ErrNotFound", err)
	}
}

// A rank's new shard takes the sample of its earlier shard on the node for
// ResampleEpochs epochs from the one measured; another rank's does not.
func TestOpenToSendTakesEarlierSample(t *testing.T) {
	s := New(t.TempDir())
	open := func(r shard.Ref) bool {
		t.Helper()
		f, _, compress, err := s.OpenToSend(r, 1e6)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		return compress
	}
	place(t, s, ref(1, 0), makeShard(t, "heat", 1, 0, 2, 1<<20))
	if !open(ref(1, 0)) {
		t.Fatalf("a compressible shard over 1 MB/s: raw, want compressed")
	}
	measured := *s.cache["heat"][s.path(ref(1, 0))].sample
	// Incompressible from now on: the rank's shards go on taking epoch 1's
	// sample until ResampleEpochs epochs after it.
	for epoch := uint64(2); epoch <= ResampleEpochs+1; epoch++ {
		r := ref(epoch, 0)
		path := place(t, s, r, randomShard(t, r, 1<<20))
		compressed := open(r)
		e := s.cache["heat"][path]
		if epoch <= ResampleEpochs {
			if !compressed || *e.sample != measured || e.sampledAt != 1 {
				t.Fatalf("epoch %d: compressed %v, sample %+v of epoch %d; want epoch 1's %+v", epoch, compressed, *e.sample, e.sampledAt, measured)
			}
		} else if compressed || e.sample.Ratio < 0.99 || e.sampledAt != epoch {
			t.Fatalf("epoch %d: compressed %v, sample %+v of epoch %d; want its own, ratio about 1", epoch, compressed, *e.sample, e.sampledAt)
		}
	}
	r := ref(3, 1)
	place(t, s, r, randomShard(t, r, 1<<20))
	if open(r) {
		t.Errorf("another rank's incompressible shard: compressed, want its own sample")
	}
}

func TestMeasure(t *testing.T) {
	if _, err := Measure(nil); err == nil {
		t.Errorf("Measure of nothing: no error")
	}
	smp, err := Measure(make([]byte, 1<<20))
	if err != nil || !(smp.Ratio > 0 && smp.Ratio < 0.01) || !(smp.Compress > 0) || !(smp.Decompress > 0) {
		t.Errorf("Measure of 1 MiB of zeros = %+v, %v; want a tiny ratio and throughputs", smp, err)
	}
}

// TestReadSample: a file up to SampleSize is its own sample; a larger one's
// sample is samplePieces pieces, the first at its start, the last at its end
// and the others evenly between at multiples of 4 KiB; a file shorter than
// its size is an error.
func TestReadSample(t *testing.T) {
	const piece = SampleSize / samplePieces
	file := make([]byte, 10*SampleSize+12345)
	for i := 0; i < len(file)-4; i += 4 {
		binary.LittleEndian.PutUint32(file[i:], uint32(i)) // so each piece is found once
	}
	for _, size := range []int64{0, 1, 4095, SampleSize} {
		got, err := ReadSample(bytes.NewReader(file[:size]), size)
		if err != nil || !bytes.Equal(got, file[:size]) {
			t.Errorf("sample of %d bytes: %d bytes, %v; want the whole file", size, len(got), err)
		}
	}
	for _, size := range []int64{SampleSize + 1, 3*SampleSize + 17, int64(len(file))} {
		got, err := ReadSample(bytes.NewReader(file[:size]), size)
		if err != nil || len(got) != SampleSize {
			t.Fatalf("sample of %d bytes: %d bytes, %v; want %d", size, len(got), err, SampleSize)
		}
		var offs []int64
		for i := range int64(samplePieces) {
			off := int64(bytes.Index(file[:size], got[i*piece:(i+1)*piece]))
			offs = append(offs, off)
		}
		if offs[0] != 0 || offs[samplePieces-1] != size-piece {
			t.Errorf("sample of %d bytes: pieces at %v, want the first at 0 and the last at %d", size, offs, size-piece)
		}
		for i := 1; i < samplePieces-1; i++ {
			even := (size - piece) * int64(i) / (samplePieces - 1)
			if offs[i]%4096 != 0 || offs[i] > even || even-offs[i] >= 4096 || offs[i] < offs[i-1]+piece {
				t.Errorf("sample of %d bytes: piece %d at %d, want at %d rounded down to 4 KiB, after piece %d", size, i, offs[i], even, i-1)
			}
		}
	}
	if _, err := ReadSample(bytes.NewReader(file[:2*SampleSize]), 3*SampleSize); err == nil {
		t.Error("sample of a file shorter than its size: no error")
	}
}
