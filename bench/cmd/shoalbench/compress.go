package main

// shoalbench compress measures, for each shard file it is given, what the
// agents' compression of shard transfers does on this machine (bench/compress
// runs it): the ratio and the one-core throughputs the sending agent measures
// on a shard's sample (shardstore.ReadSample, shardstore.Measure), and for
// links of 20 Mbit/s, 100 Mbit/s, 1 Gbit/s and loopback unthrottled, the
// transfer time predicted raw and compressed (compress.Decide), which the
// policy picks, and the time measured both ways.
//
// The measured transfers are real GET /v1/shards/… requests, the agent's
// handler and client over loopback TCP: the server's connection is throttled
// to the link's rate (its writes are paced in slices of 2 ms of the link; no
// latency is added), and the shard is sent raw and compressed, whatever the
// policy would pick. The time runs from the request to the last raw byte read
// and hashed by the client; the receiver's disk write and verification, the
// same either way, are not in it. "unthrottled" predicts with the loopback's
// bandwidth as the raw transfer measured it.
//
//	shoalbench compress [-links 20,100,1000,0] NAME=FILE...

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"

	"shoal/internal/api"
	"shoal/internal/compress"
	nodepkg "shoal/internal/node"
	"shoal/internal/shard"
	"shoal/internal/shardstore"
)

func compressMain(args []string) int {
	fs := flag.NewFlagSet("compress", flag.ContinueOnError)
	linksFlag := fs.String("links", "20,100,1000,0", "link rates in Mbit/s; 0 is loopback unthrottled")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var mbits []float64
	for _, v := range strings.Split(*linksFlag, ",") {
		m, err := strconv.ParseFloat(v, 64)
		if err != nil || m < 0 {
			fmt.Fprintf(os.Stderr, "compress: -links %q: want Mbit/s ≥ 0, comma-separated\n", *linksFlag)
			return 2
		}
		mbits = append(mbits, m)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: shoalbench compress [-links 20,100,1000,0] NAME=FILE...")
		return 2
	}
	var result []string
	for _, arg := range fs.Args() {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "compress: %q: want NAME=FILE\n", arg)
			return 2
		}
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compress:", err)
			return 1
		}
		ratio, err := bench(name, b, mbits)
		if err != nil {
			fmt.Fprintf(os.Stderr, "compress: %s: %v\n", name, err)
			return 1
		}
		result = append(result, fmt.Sprintf("%s_ratio=%.4f", name, ratio))
	}
	fmt.Println("RESULT " + strings.Join(result, " "))
	return 0
}

// bench prints one shard's figures and returns its sample's ratio.
func bench(name string, b []byte, mbits []float64) (float64, error) {
	sample, err := shardstore.ReadSample(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return 0, err
	}
	smp, err := shardstore.Measure(sample)
	if err != nil {
		return 0, err
	}
	whole, err := wholeRatio(b)
	if err != nil {
		return 0, err
	}
	fmt.Printf("\n%s: %.1f MiB; sample (%.2f MiB) ratio %.4f, whole shard %.4f; compress %.0f MB/s, decompress %.0f MB/s (one core)\n",
		name, mib(len(b)), mib(len(sample)), smp.Ratio, whole, smp.Compress/1e6, smp.Decompress/1e6)
	fmt.Printf("  %-12s %11s %11s %7s %11s %11s %7s\n", "link", "pred raw", "pred zstd", "policy", "meas raw", "meas zstd", "gain")
	srv, err := newServer(b)
	if err != nil {
		return 0, err
	}
	defer srv.close()
	for _, m := range mbits {
		rate := m * 1e6 / 8
		raw, err := srv.transfer(rate, false)
		if err != nil {
			return 0, err
		}
		zst, err := srv.transfer(rate, true)
		if err != nil {
			return 0, err
		}
		label := fmt.Sprintf("%g Mbit/s", m)
		link := rate
		if m == 0 {
			label = "unthrottled"
			link = float64(len(b)) / raw.Seconds()
		}
		p := compress.Decide(int64(len(b)), link, smp)
		pick := "raw"
		if p.Compress {
			pick = "zstd"
		}
		fmt.Printf("  %-12s %11s %11s %7s %11s %11s %6.0f%%\n", label, round(p.Raw), round(p.Compressed), pick,
			round(raw), round(zst), 100*(1-zst.Seconds()/raw.Seconds()))
	}
	return smp.Ratio, nil
}

func mib(n int) float64 { return float64(n) / (1 << 20) }

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	default:
		return d.Round(10 * time.Microsecond)
	}
}

// wholeRatio is the ratio of the whole of b streamed as a shard is.
func wholeRatio(b []byte) (float64, error) {
	var n countWriter
	enc, err := zstd.NewWriter(&n, append(api.ShardEncoderOptions(), zstd.WithEncoderConcurrency(1))...)
	if err != nil {
		return 0, err
	}
	if _, err := enc.Write(b); err != nil {
		return 0, err
	}
	if err := enc.Close(); err != nil {
		return 0, err
	}
	return float64(n) / float64(len(b)), nil
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

var secret = []byte("compressbench compressbench compressbench")

var ref = shard.Ref{Job: "bench", Epoch: 1, Rank: 0}

// server is an agent's API serving one shard on loopback, whose connections
// write at the rate last set.
type server struct {
	shard  []byte
	sum    uint64
	ln     *throttledListener
	hs     *http.Server
	client *api.Client
	svc    *service
}

// service serves the shard, compressed or not as told.
type service struct {
	api.Unavailable
	shard []byte
	mu    sync.Mutex
	zstd  bool
}

func (s *service) GetShard(context.Context, shard.Ref) (io.ReadCloser, int64, error) {
	return io.NopCloser(bytes.NewReader(s.shard)), int64(len(s.shard)), nil
}

func (s *service) OpenShardToSend(ctx context.Context, ref shard.Ref, link float64) (io.ReadCloser, int64, bool, error) {
	rc, size, err := s.GetShard(ctx, ref)
	s.mu.Lock()
	defer s.mu.Unlock()
	return rc, size, s.zstd, err
}

type node struct{}

func (node) Name() string                                   { return "bench" }
func (node) Nodes(context.Context) ([]nodepkg.Node, error)  { return nil, nil }
func (node) Voters(context.Context) ([]nodepkg.Node, error) { return nil, nil }
func (node) MembersAt(string) []nodepkg.Node                { return nil }
func (node) Leave(context.Context) error                    { return nil }

func newServer(shard []byte) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{shard: shard, sum: xxh3.Hash(shard), ln: &throttledListener{Listener: ln}, svc: &service{shard: shard}}
	as := api.NewServer(api.ServerConfig{Node: node{}, Secret: secret, Version: "bench"})
	as.SetShardService(s.svc)
	s.hs = &http.Server{Handler: as}
	go s.hs.Serve(s.ln)
	s.client = api.NewClient("http://"+ln.Addr().String(), secret)
	return s, nil
}

func (s *server) close() { s.hs.Close() }

// transfer fetches the shard once over a link of rate bytes/s (0: as fast as
// loopback goes), compressed or not, checks it and returns how long it took.
func (s *server) transfer(rate float64, compressed bool) (time.Duration, error) {
	s.svc.mu.Lock()
	s.svc.zstd = compressed
	s.svc.mu.Unlock()
	s.ln.setRate(rate)
	s.client.CloseIdleConnections() // a new connection, paced at the new rate
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := s.client.Health(ctx); err != nil { // the handshake and identity, not timed
		return 0, err
	}
	start := time.Now()
	rc, size, err := s.client.GetShardOver(ctx, ref, 1) // any link: the service decides
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	h := xxh3.New()
	n, err := io.Copy(h, rc)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if n != size || n != int64(len(s.shard)) || h.Sum64() != s.sum {
		return 0, fmt.Errorf("transfer (compressed %v) delivered %d bytes that differ from the shard's %d", compressed, n, len(s.shard))
	}
	return took, nil
}

// throttledListener accepts connections whose writes are paced at its rate,
// as it was when they were accepted.
type throttledListener struct {
	net.Listener
	mu   sync.Mutex
	rate float64
}

func (l *throttledListener) setRate(r float64) {
	l.mu.Lock()
	l.rate = r
	l.mu.Unlock()
}

func (l *throttledListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	rate := l.rate
	l.mu.Unlock()
	if rate <= 0 {
		return c, nil
	}
	return &throttledConn{Conn: c, rate: rate}, nil
}

// throttledConn writes no faster than rate bytes/s: a token bucket that holds
// at most four slices of credit, so an idle connection does not save up. A
// slice is 2 ms of the link (16 KiB at least): shorter sleeps would be
// overslept on a busy machine.
type throttledConn struct {
	net.Conn
	rate float64
	next time.Time // when the next slice may go
}

func (c *throttledConn) Write(p []byte) (int, error) {
	slice := max(16<<10, int(c.rate*0.002))
	written := 0
	for len(p) > 0 {
		n := min(len(p), slice)
		now := time.Now()
		if earliest := now.Add(-seconds(4 * float64(slice) / c.rate)); c.next.Before(earliest) {
			c.next = earliest
		}
		if d := c.next.Sub(now); d > 0 {
			time.Sleep(d)
		}
		m, err := c.Conn.Write(p[:n])
		written += m
		c.next = c.next.Add(seconds(float64(m) / c.rate))
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
