package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"testing"

	"shoal/internal/pki"
)

// echoTunnels accepts a tunnel from node n2 only and echoes what it carries.
type echoTunnels struct{}

func (echoTunnels) Tunnel(_ context.Context, req TunnelRequest) (func(io.ReadWriteCloser), error) {
	if req.Node != "n2" {
		return nil, fmt.Errorf("%w: node %s is not a member", ErrForbidden, req.Node)
	}
	return func(c io.ReadWriteCloser) {
		defer c.Close()
		io.Copy(c, c)
	}, nil
}

type tunnelCase struct {
	name   string
	client *Client
	req    TunnelRequest
	want   error
}

// TestTunnel: over the API's TLS, a signed request from a node the service
// accepts switches to a connection carrying bytes both ways; one it refuses
// gets its error; without TLS (no certificate of the cluster) and without the
// overlay, none is switched.
func TestTunnel(t *testing.T) {
	id, err := pki.NewIdentity(testSecret, "n1", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, TLS: id.ServerConfig()})
	s.SetTunnelService(echoTunnels{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(t.Context()) })
	c := NewClient(ln.Addr().String(), testSecret)

	conn, err := c.Tunnel(t.Context(), TunnelRequest{Node: "n2", Overlay: "100.64.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "frame" {
		t.Errorf("echoed %q, %v; want frame", got, err)
	}
	conn.Close()

	tests := []tunnelCase{
		{"refused by the service", c, TunnelRequest{Node: "n3", Overlay: "100.64.0.3"}, ErrForbidden},
		{"no node", c, TunnelRequest{Overlay: "100.64.0.3"}, ErrBadRequest},
	}
	plain := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret})
	plain.SetTunnelService(echoTunnels{})
	ts := httptest.NewServer(plain)
	t.Cleanup(ts.Close)
	tests = append(tests, tunnelCase{"plain HTTP", NewClient(ts.URL, testSecret), TunnelRequest{Node: "n2", Overlay: "100.64.0.2"}, ErrUnauthorized})
	off := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, TLS: id.ServerConfig()})
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go off.Serve(ln2)
	t.Cleanup(func() { off.Shutdown(t.Context()) })
	tests = append(tests, tunnelCase{"no overlay", NewClient(ln2.Addr().String(), testSecret), TunnelRequest{Node: "n2", Overlay: "100.64.0.2"}, ErrNotAvailable})
	for _, tt := range tests {
		conn, err := tt.client.Tunnel(t.Context(), tt.req)
		if conn != nil {
			conn.Close()
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}
