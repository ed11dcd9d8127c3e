package api

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"shoal/internal/shard"
)

// A shard crosses the network between agents zstd-compressed when its sender
// predicts that this pays (docs/api.md, GET /v1/shards/{job}/{epoch}/{rank}).
const (
	// EncodingZstd is the Content-Encoding (and Accept-Encoding token) of a
	// shard sent compressed.
	EncodingZstd = "zstd"
	// HeaderRawSize is the length in bytes of a shard sent compressed, decimal.
	HeaderRawSize = "X-Shoal-Raw-Size"
)

// maxShardWindow bounds the zstd window a receiver accepts, and so the memory
// a compressed stream can make it allocate: twice the 4 MiB the sender's level
// uses, so that a sender one level up still gets through.
const maxShardWindow = 8 << 20

// ShardEncoderOptions are the zstd settings that shape a shard's compressed
// stream: what a sample of the shard must be compressed with to predict the
// stream's ratio and speed. The fastest level: the stream must keep up with
// the link. Concurrency is the caller's to add.
func ShardEncoderOptions() []zstd.EOption {
	return []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest)}
}

// ShardDecoderOptions are the zstd settings a shard's compressed stream is
// decoded with. Concurrency is the caller's to add.
func ShardDecoderOptions() []zstd.DOption {
	return []zstd.DOption{zstd.WithDecoderMaxWindow(maxShardWindow)}
}

// ShardSender is a [ShardService] that can choose to send a shard compressed.
// The server uses it, when the service implements it, for a GET of a shard
// that gives the link's bandwidth and accepts zstd; same concurrency and error
// contract as ShardService.
type ShardSender interface {
	// OpenShardToSend is GetShard for a receiver whose link from this node
	// carries link bytes/s (> 0); compress says the shard pays to cross it
	// zstd-compressed.
	OpenShardToSend(ctx context.Context, ref shard.Ref, link float64) (r io.ReadCloser, size int64, compress bool, err error)
}

// linkQuery is the ?link= of a request for a shard over a link of link
// bytes/s (> 0), as a whole number.
func linkQuery(link float64) string {
	return "?link=" + strconv.FormatInt(max(1, int64(min(link, math.MaxInt64/2))), 10)
}

// shardLink reads ?link=BYTES_PER_SEC of GET /v1/shards/{job}/{epoch}/{rank}:
// the receiver's estimate of its link from this node; 0 when not given.
func shardLink(r *http.Request) (float64, error) {
	q := r.URL.Query()
	if !q.Has("link") {
		return 0, nil
	}
	v := q.Get("link")
	link, err := strconv.ParseFloat(v, 64)
	if err != nil || !(link > 0) || math.IsInf(link, 1) {
		return 0, fmt.Errorf("%w: link=%q: want the link's bandwidth in bytes per second, a positive number (omit it when unknown)", ErrBadRequest, v)
	}
	return link, nil
}

// sendZstd answers 200 with size bytes of rc (closed after) as one zstd frame,
// streamed as it is compressed: Content-Encoding zstd, the raw size in
// X-Shoal-Raw-Size, no Content-Length. The encoder runs in the handler's
// goroutine, one core: the socket's send buffer lets the link carry one block
// while the next is compressed. A failure after the answer began leaves the
// frame unfinished, which the receiver's decoder reports.
func sendZstd(w http.ResponseWriter, r *http.Request, rc io.ReadCloser, size int64, what string) error {
	defer rc.Close()
	enc, err := zstd.NewWriter(gathering(w, r), append(ShardEncoderOptions(), zstd.WithEncoderConcurrency(1))...)
	if err != nil {
		return fmt.Errorf("%w: zstd encoder for %s: %v", ErrInternal, what, err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Encoding", EncodingZstd)
	h.Set(HeaderRawSize, strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(enc, rc); err != nil {
		return fmt.Errorf("sending %s compressed: %w", what, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("sending %s compressed: %w", what, err)
	}
	return nil
}

// GetShardOver is GetShard for a shard that crosses a link of link bytes/s
// from the agent to this process (the caller's estimate; 0 when unknown, then
// it is GetShard). The agent sends the shard zstd-compressed when it predicts
// that this pays; either way the reader yields the shard's raw bytes and size
// is their number. A compressed stream that fails to decode, or decodes to
// other than size bytes, fails the reader; the caller still verifies the
// shard.
func (c *Client) GetShardOver(ctx context.Context, ref shard.Ref, link float64) (io.ReadCloser, int64, error) {
	if !(link > 0) || math.IsInf(link, 1) {
		return c.GetShard(ctx, ref)
	}
	resp, err := c.sendAcceptingZstd(ctx, "GET", shardPath(ref)+linkQuery(link), nil)
	if err != nil {
		return nil, 0, err
	}
	return c.shardBody(resp, shardPath(ref), "shard "+ref.String())
}

// sendAcceptingZstd sends a signed request (body as for request) whose answer
// may come zstd-compressed, for shardBody to read.
func (c *Client) sendAcceptingZstd(ctx context.Context, method, path string, body any) (*http.Response, error) {
	req, err := c.request(ctx, method, path, body, "", 0)
	if err != nil {
		return nil, err
	}
	// Set here, the Transport neither asks for gzip nor decodes anything.
	req.Header.Set("Accept-Encoding", EncodingZstd)
	return c.send(req)
}

// shardBody is the body of an answer that may come zstd-compressed (GET of a
// shard with ?link=, POST of its changes) and its length decoded: either way
// the reader yields the raw bytes, and fails if they are not that many, and
// its Wire method counts the bytes that arrived. what names them in errors.
func (c *Client) shardBody(resp *http.Response, path, what string) (io.ReadCloser, int64, error) {
	switch enc := resp.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		return &countedBody{ReadCloser: resp.Body}, resp.ContentLength, nil
	case EncodingZstd:
	default:
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%w: %s at %s: answered in Content-Encoding %q, want zstd or none", ErrInternal, path, c.addr, enc)
	}
	v := resp.Header.Get(HeaderRawSize)
	size, err := strconv.ParseInt(v, 10, 64)
	if err != nil || size < 0 {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%w: %s at %s: compressed answer with %s %q, want the raw size", ErrInternal, path, c.addr, HeaderRawSize, v)
	}
	body := &countedBody{ReadCloser: resp.Body}
	dec, err := zstd.NewReader(body, append(ShardDecoderOptions(), zstd.WithDecoderConcurrency(1))...)
	if err != nil {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%w: zstd decoder: %v", ErrInternal, err)
	}
	return &zstdShard{dec: dec, body: body, left: size, what: fmt.Sprintf("%s from %s", what, c.addr)}, size, nil
}

// countedBody counts the bytes read from a response body.
type countedBody struct {
	io.ReadCloser
	n int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// Wire returns how many bytes have been read.
func (c *countedBody) Wire() int64 { return c.n }

// zstdShard yields the raw bytes of a shard sent compressed: exactly the size
// the sender announced, or an error.
type zstdShard struct {
	dec  *zstd.Decoder
	body *countedBody
	left int64 // raw bytes still to come
	what string
}

func (z *zstdShard) Read(p []byte) (int, error) {
	n, err := z.dec.Read(p)
	z.left -= int64(n)
	switch {
	case z.left < 0:
		return n, fmt.Errorf("decompressing %s: more bytes than the %s announced", z.what, HeaderRawSize)
	case err == io.EOF && z.left > 0:
		return n, fmt.Errorf("decompressing %s: %d bytes short of the %s announced: %w", z.what, z.left, HeaderRawSize, io.ErrUnexpectedEOF)
	case err != nil && err != io.EOF:
		return n, fmt.Errorf("decompressing %s: %w", z.what, err)
	}
	return n, err
}

// Wire returns how many compressed bytes have arrived so far.
func (z *zstdShard) Wire() int64 { return z.body.n }

func (z *zstdShard) Close() error {
	z.dec.Close()
	return z.body.Close()
}
