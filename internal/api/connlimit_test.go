package api

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// TestPeerLimit: a peer holds at most max connections; one more is closed at
// once, and a closed one frees its slot.
func TestPeerLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitPeers(ln, 2, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer l.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedByServer says whether the server closed c within a second.
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF || err != nil && !isTimeout(err)
	}
	a, b := dial(), dial()
	first := <-accepted
	<-accepted
	c := dial()
	if !closedByServer(c) {
		t.Fatal("a third connection from one address was kept, want it closed at the bound of 2")
	}
	if closedByServer(a) || closedByServer(b) {
		t.Fatal("the two connections within the bound were closed")
	}
	first.Close()
	first.Close() // a second Close gives nothing back twice
	d := dial()
	select {
	case <-accepted:
	case <-time.After(2 * time.Second):
		t.Fatal("after one connection closed, a new one was not accepted")
	}
	if closedByServer(d) {
		t.Fatal("the connection taking the freed slot was closed")
	}
	if e := dial(); !closedByServer(e) {
		t.Fatal("a connection over the bound was kept after a double Close freed one slot")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
