package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shoal/test/poll"
)

// TestPeerLimit: a peer holds at most max connections; one more is closed at
// once, and a closed one frees its slot.
func TestPeerLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitPeers(ln, byIP(2), slog.New(slog.NewTextHandler(io.Discard, nil)))
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

// TestUserLimit: on the local socket a user other than root holds at most
// MaxConnsPerUser connections, one more is closed unanswered, a closed one
// frees its slot; root is not bounded, nor is one user bounded by another's.
func TestUserLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("connecting as other users needs root")
	}
	const alice, bob = 65534, 65533
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, MaxConnsPerUser: 2})
	dir, err := os.MkdirTemp("", "shoal-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// Other users reach the socket as they do an agent's (mode 0666, the
	// directory passable).
	if err := errors.Join(os.Chmod(dir, 0o711), os.Chmod(path, 0o666)); err != nil {
		t.Fatal(err)
	}
	go s.ServeLocal(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	open := func(uid int) net.Conn {
		t.Helper()
		c, err := dialAs(path, uid)
		if err != nil {
			t.Fatalf("connect as uid %d: %v", uid, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a1, a2 := open(alice), open(alice)
	for i, c := range []net.Conn{a1, a2} {
		if err := askHealth(c); err != nil {
			t.Fatalf("uid %d's connection %d of 2: %v, want an answer", alice, i+1, err)
		}
	}
	if err := askHealth(open(alice)); err == nil {
		t.Fatalf("uid %d's third connection was answered, want it closed at the bound of 2", alice)
	}
	for i := range 3 {
		if err := askHealth(open(0)); err != nil {
			t.Fatalf("root's connection %d beside uid %d's two: %v, want an answer", i+1, alice, err)
		}
	}
	if err := askHealth(open(bob)); err != nil {
		t.Fatalf("uid %d's first connection while uid %d holds two: %v, want an answer", bob, alice, err)
	}
	a1.Close()
	poll.Until(t, 5*time.Second, func() string {
		if err := askHealth(open(alice)); err != nil {
			return fmt.Sprintf("after closing one of its two, uid %d's new connection: %v", alice, err)
		}
		return ""
	})
	if err := askHealth(a2); err != nil {
		t.Fatalf("uid %d's connection within the bound, asked again: %v", alice, err)
	}
}

// dialAs connects to the unix socket at path as uid: from a thread whose
// effective uid it changes first, which is the uid the kernel gives the other
// end (SO_PEERCRED). The thread ends with the goroutine, which never unlocks
// it, so nothing else runs as uid.
func dialAs(path string, uid int) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			done <- dialed{nil, fmt.Errorf("setresuid: %w", e)}
			return
		}
		c, err := net.Dial("unix", path)
		done <- dialed{c, err}
	}()
	d := <-done
	return d.c, d.err
}

// askHealth sends GET /v1/health on c and reads the answer.
func askHealth(c net.Conn) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
