package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"shoal/internal/shard"
)

// fakeSender is fakeData that sends a shard compressed over links slower than
// 1 MB/s, and whose shards break after cut bytes when cut > 0.
type fakeSender struct {
	*fakeData
	cut int
}

func (f *fakeSender) OpenShardToSend(ctx context.Context, ref shard.Ref, link float64) (io.ReadCloser, int64, bool, error) {
	rc, size, err := f.GetShard(ctx, ref)
	if err == nil && f.cut > 0 {
		rc = io.NopCloser(io.MultiReader(io.LimitReader(rc, int64(f.cut)), errorReader{errors.New("disk on fire")}))
	}
	return rc, size, link < 1e6, err
}

type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) { return 0, e.err }

// newSenderServer runs a server whose shard service is a fakeSender holding
// shard under ref.
func newSenderServer(t *testing.T, ref shard.Ref, data []byte) (*fakeSender, *httptest.Server) {
	t.Helper()
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, Version: "test", MaxBody: 4096})
	f := &fakeSender{fakeData: &fakeData{shards: map[shard.Ref][]byte{ref: data}, changed: make(chan struct{})}}
	s.SetShardService(f)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return f, ts
}

// encodingRecorder records the Content-Encoding of the shard answers its
// client receives, as they arrive (before the client decodes anything).
type encodingRecorder struct {
	rt  http.RoundTripper
	got []string
}

func (e *encodingRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := e.rt.RoundTrip(req)
	if err == nil && strings.HasPrefix(req.URL.Path, "/v1/shards/") {
		e.got = append(e.got, resp.Header.Get("Content-Encoding"))
	}
	return resp, err
}

// TestGetShardCompressed: the server compresses when its service says so, the
// client asked with a link and accepts zstd; the client returns the raw bytes
// and size either way.
func TestGetShardCompressed(t *testing.T) {
	ref := shard.Ref{Job: "j1", Epoch: 2, Rank: 1}
	data := bytes.Repeat([]byte("heat diffuses slowly; "), 50000)
	_, ts := newSenderServer(t, ref, data)
	c := NewClient(ts.URL, testSecret)
	rec := &encodingRecorder{rt: c.hc.Transport}
	c.hc.Transport = rec
	ctx := context.Background()
	tests := []struct {
		name     string
		get      func() (io.ReadCloser, int64, error)
		encoding string
	}{
		{"slow link", func() (io.ReadCloser, int64, error) { return c.GetShardOver(ctx, ref, 125e3) }, "zstd"},
		{"fast link", func() (io.ReadCloser, int64, error) { return c.GetShardOver(ctx, ref, 125e6) }, ""},
		{"unknown link", func() (io.ReadCloser, int64, error) { return c.GetShardOver(ctx, ref, 0) }, ""},
		{"GetShard", func() (io.ReadCloser, int64, error) { return c.GetShard(ctx, ref) }, ""},
	}
	for _, tt := range tests {
		rec.got = nil
		rc, size, err := tt.get()
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) || size != int64(len(data)) {
			t.Errorf("%s: got %d bytes (size %d), %v; want the %d bytes of the shard", tt.name, len(got), size, err, len(data))
		}
		if len(rec.got) != 1 || rec.got[0] != tt.encoding {
			t.Errorf("%s: sent with Content-Encoding %q, want %q", tt.name, rec.got, tt.encoding)
		}
	}
}

// TestGetShardNeedsAcceptEncoding: a link alone does not get a compressed
// answer; the client must accept zstd.
func TestGetShardNeedsAcceptEncoding(t *testing.T) {
	ref := shard.Ref{Job: "j1", Epoch: 2, Rank: 1}
	data := bytes.Repeat([]byte{7}, 100000)
	_, ts := newSenderServer(t, ref, data)
	for _, accept := range []string{"", "gzip", "zstd", "gzip, zstd"} {
		req, _ := http.NewRequest("GET", ts.URL+shardPath(ref)+"?link=1000", nil)
		req.Header.Set("Accept-Encoding", accept)
		Sign(req, DeriveAuthKey(testSecret), nodeOf(t, ts), EmptySHA256, time.Now())
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		want := ""
		if strings.Contains(accept, "zstd") {
			want = "zstd"
		}
		if got := resp.Header.Get("Content-Encoding"); resp.StatusCode != 200 || got != want {
			t.Errorf("Accept-Encoding %q: %d with Content-Encoding %q, want 200 with %q", accept, resp.StatusCode, got, want)
		}
		if want == "zstd" && resp.Header.Get(HeaderRawSize) != fmt.Sprint(len(data)) {
			t.Errorf("Accept-Encoding %q: %s %q, want %d", accept, HeaderRawSize, resp.Header.Get(HeaderRawSize), len(data))
		}
		if want == "" && resp.ContentLength != int64(len(data)) {
			t.Errorf("Accept-Encoding %q: raw answer with Content-Length %d, want %d", accept, resp.ContentLength, len(data))
		}
	}
}

// TestGetShardCompressedBreaks: a sender that fails in the middle of a
// compressed answer leaves the frame unfinished, and the client's reader
// fails instead of ending early.
func TestGetShardCompressedBreaks(t *testing.T) {
	ref := shard.Ref{Job: "j1", Epoch: 2, Rank: 1}
	data := bytes.Repeat([]byte("0123456789"), 100000)
	f, ts := newSenderServer(t, ref, data)
	f.cut = 300000
	rc, size, err := NewClient(ts.URL, testSecret).GetShardOver(context.Background(), ref, 1000)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err == nil || !strings.Contains(err.Error(), "decompressing shard j1/2/1") || size != int64(len(data)) {
		t.Errorf("reading a broken compressed answer: %d bytes of %d, %v; want an error naming the shard", len(got), size, err)
	}
}

// TestGetShardQuery: ?link= is checked, and no other parameter is taken.
func TestGetShardQuery(t *testing.T) {
	ref := shard.Ref{Job: "j1", Epoch: 2, Rank: 1}
	_, ts := newSenderServer(t, ref, []byte("shard"))
	tests := []struct {
		query  string
		status int
		want   string
	}{
		{"link=12500000", 200, ""},
		{"link=1.5e6", 200, ""},
		{"link=", 400, `link="": want the link's bandwidth in bytes per second`},
		{"link=fast", 400, `link="fast"`},
		{"link=0", 400, `link="0"`},
		{"link=-5", 400, `link="-5"`},
		{"link=Inf", 400, `link="Inf"`},
		{"link=NaN", 400, `link="NaN"`},
		{"link=1e400", 400, `link="1e400"`},
		{"lnk=1000", 400, `unknown query parameter "lnk": want link`},
		{"link=1000&wait=1s", 400, `unknown query parameter "wait"`},
	}
	for _, tt := range tests {
		status, eb := raw(t, ts, testSecret, "GET", shardPath(ref)+"?"+tt.query, "")
		if status != tt.status || !strings.Contains(eb.Error, tt.want) {
			t.Errorf("GET ?%s: got %d %q, want %d with %q", tt.query, status, eb.Error, tt.status, tt.want)
		}
		if status == 400 && eb.Code != "bad_request" {
			t.Errorf("GET ?%s: got code %q, want bad_request", tt.query, eb.Code)
		}
	}
}
