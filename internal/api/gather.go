package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
)

// gatherSize bounds the bytes a gathering connection holds before it writes
// them. TLS cuts what it sends into records of at most 16 KiB and writes each
// to the connection on its own: a 256 MB shard was 16,384 system calls, each
// a trip through the TCP stack with a segment of one record. Gathered into
// writes of 256 KiB, 256 MB between two testbed hosts cost the sender 0.17
// CPU-s against 0.25 and the receiver 0.12 against 0.18 (bench/tls-cost), and
// the agents' cost of copying shards fell by 15 % (bench/copy-cost,
// docs/architecture.md).
const gatherSize = 256 << 10

var gatherBufs = sync.Pool{New: func() any { b := make([]byte, 0, gatherSize); return &b }}

// gathers is peerConn's write path: writes pass straight through, except
// while [peerConn.gather] runs, when they are held and written together.
type gathers struct {
	mu   sync.Mutex
	held *[]byte // nil unless gathering
}

// Write writes p to c, or holds it while gathering, writing what is held
// each time it reaches gatherSize; a write that fails then fails the Write
// that made it, and what was held is dropped.
func (c *peerConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		return c.Conn.Write(p)
	}
	n := 0
	for len(p) > 0 {
		b := *c.held
		if len(b) == cap(b) {
			if err := c.flushLocked(); err != nil {
				return n, err
			}
			b = *c.held
		}
		k := copy(b[len(b):cap(b)], p)
		*c.held = b[:len(b)+k]
		p, n = p[k:], n+k
	}
	return n, nil
}

func (c *peerConn) flushLocked() error {
	b := *c.held
	if len(b) == 0 {
		return nil
	}
	*c.held = b[:0]
	_, err := c.Conn.Write(b)
	return err
}

// gather runs write with the connection's writes gathered, and writes what
// is left held before it returns. Gathering does not nest.
func (c *peerConn) gather(write func() error) (err error) {
	c.mu.Lock()
	c.held = gatherBufs.Get().(*[]byte)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if ferr := c.flushLocked(); err == nil {
			err = ferr
		}
		gatherBufs.Put(c.held)
		c.held = nil
	}()
	return write()
}

type peerConnKey struct{}

// withPeerConn is the API server's ConnContext: it keeps the peerConn under
// a TLS connection (or the plain one) in the context of its requests.
func withPeerConn(ctx context.Context, c net.Conn) context.Context {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	if pc, ok := c.(*peerConn); ok {
		return context.WithValue(ctx, peerConnKey{}, pc)
	}
	return ctx
}

// gathering returns a writer that writes each piece to w with the writes of
// r's connection gathered (see gatherSize); w itself where r came by other
// means (the local socket).
func gathering(w http.ResponseWriter, r *http.Request) io.Writer {
	pc, ok := r.Context().Value(peerConnKey{}).(*peerConn)
	if !ok {
		return w
	}
	return gatheringWriter{w, pc}
}

type gatheringWriter struct {
	w io.Writer
	c *peerConn
}

func (g gatheringWriter) Write(p []byte) (n int, err error) {
	err = g.c.gather(func() error {
		n, err = g.w.Write(p)
		return err
	})
	return n, err
}

// copyOut copies src to w in pieces of up to 1 MiB, one Write each: a file's
// own WriteTo would hand w pieces of 32 KiB, and a gathering writer gathers
// within one Write.
func copyOut(w io.Writer, src io.Reader) error {
	buf := make([]byte, 1<<20)
	_, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{src}, buf)
	return err
}
