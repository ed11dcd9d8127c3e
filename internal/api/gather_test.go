package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"shoal/internal/pki"
	"shoal/internal/shard"
)

// writeLog is a connection that records the size of each write it is given,
// and fails them once fail is set.
type writeLog struct {
	net.Conn
	mu     sync.Mutex
	sizes  []int
	wrote  bytes.Buffer
	fail   error
	noData bool // sizes only: wrote stays empty
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		return 0, w.fail
	}
	w.sizes = append(w.sizes, len(p))
	if !w.noData {
		w.wrote.Write(p)
	}
	if w.Conn != nil {
		return w.Conn.Write(p)
	}
	return len(p), nil
}

func (w *writeLog) writes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sizes)
}

// TestPeerConnGathers: outside gather each write goes through as it comes;
// within it, pieces are written together, in writes of gatherSize but the
// last, the bytes in order; a failed write is the gather's error.
func TestPeerConnGathers(t *testing.T) {
	log := &writeLog{}
	c := &peerConn{Conn: log}
	c.Write([]byte("GET"))
	c.Write([]byte(" / "))
	if got := log.sizes; len(got) != 2 || got[0] != 3 || got[1] != 3 {
		t.Fatalf("writes outside gather: %v, want [3 3]", got)
	}
	data := make([]byte, 3*gatherSize+1000)
	rand.Read(data)
	log.sizes = nil
	err := c.gather(func() error {
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 16406) // a TLS record of 16 KiB
			if _, err := c.Write(rest[:n]); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{gatherSize, gatherSize, gatherSize, 1000}; !equalInts(log.sizes, want) {
		t.Errorf("gathered writes: %v, want %v", log.sizes, want)
	}
	if !bytes.Equal(log.wrote.Bytes(), append([]byte("GET / "), data...)) {
		t.Error("the bytes written differ from those given")
	}
	log.sizes = nil
	c.gather(func() error { return nil })
	c.Write([]byte("after"))
	if len(log.sizes) != 1 || log.sizes[0] != 5 {
		t.Errorf("an empty gather, then a write: %v, want [5]", log.sizes)
	}

	log.fail = errors.New("connection reset")
	err = c.gather(func() error {
		_, err := c.Write([]byte("held"))
		return err
	})
	if !errors.Is(err, log.fail) {
		t.Errorf("gather over a failing connection: %v, want its error", err)
	}
	if c.held != nil {
		t.Error("the connection still gathers after gather returned")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// logListener hands out connections that record their writes.
type logListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*writeLog
}

func (l *logListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	w := &writeLog{Conn: c, noData: true}
	l.mu.Lock()
	l.conns = append(l.conns, w)
	l.mu.Unlock()
	return w, nil
}

func (l *logListener) writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.conns {
		n += c.writes()
	}
	return n
}

// TestShardSentInGatheredWrites: a shard sent over the cluster's TLS arrives
// whole, in far fewer writes to the connection than its TLS records (256 of
// them for 4 MiB).
func TestShardSentInGatheredWrites(t *testing.T) {
	id, err := pki.NewIdentity(testSecret, "n1", net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	ref := shard.Ref{Job: "j1", Epoch: 3, Rank: 0}
	data := make([]byte, 4<<20)
	rand.Read(data)
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, Version: "test", TLS: id.ServerConfig()})
	s.SetShardService(&fakeData{shards: map[shard.Ref][]byte{ref: data}, changed: make(chan struct{})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := &logListener{Listener: ln}
	go s.Serve(ll)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	c := NewClient(ln.Addr().String(), testSecret)
	ctx := context.Background()
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	before := ll.writes()
	rc, size, err := c.GetShard(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || size != int64(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes (size %d), %v; want the shard's %d", len(got), size, err, len(data))
	}
	// 4 MiB gathered is 16 writes of 256 KiB, and one for each 1 MiB piece's
	// rest: 20 or so.
	if n := ll.writes() - before; n > 32 {
		t.Errorf("the shard took %d writes to the connection, want at most 32 (gathered)", n)
	}
}
