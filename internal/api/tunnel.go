package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// TunnelProtocol is the Upgrade token of POST /v1/tunnel.
const TunnelProtocol = "shoal-tunnel/1"

// TunnelRequest is the body of POST /v1/tunnel: the node that dials, which
// must be a live member of the cluster announcing that overlay address.
type TunnelRequest struct {
	Node    string `json:"node"`
	Overlay string `json:"overlay"`
}

// TunnelService carries the overlay's packets (internal/agent, internal/overlay).
// Tunnel checks req against the node's view of the cluster and returns what
// runs the switched connection (it closes it), or an error answered instead
// of the switch. It must be safe for concurrent use.
type TunnelService interface {
	Tunnel(ctx context.Context, req TunnelRequest) (func(io.ReadWriteCloser), error)
}

var _ TunnelService = Unavailable{}

func (Unavailable) Tunnel(context.Context, TunnelRequest) (func(io.ReadWriteCloser), error) {
	return nil, notAvailable("the overlay (an agent started with --overlay)")
}

// SetTunnelService plugs in the overlay; nil unplugs it.
func (s *Server) SetTunnelService(t TunnelService) {
	if t == nil {
		t = Unavailable{}
	}
	s.tunnels.Store(&t)
}

func (s *Server) tunnelService() TunnelService { return *s.tunnels.Load() }

// tunnel switches the connection to the overlay's frames and hands it over.
// Only another agent may ask, over the API's TLS with a certificate of the
// cluster, signed: the tunnel then carries MPI's packets encrypted between the
// two nodes.
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request) error {
	if CallerOf(r.Context()) != nil {
		return fmt.Errorf("%w: a tunnel is between two agents, not on the local socket", ErrForbidden)
	}
	if err := clusterCertificate(r); err != nil {
		return err
	}
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), TunnelProtocol) {
		return fmt.Errorf("%w: want headers Connection: Upgrade and Upgrade: %s", ErrBadRequest, TunnelProtocol)
	}
	var req TunnelRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if req.Node == "" || req.Overlay == "" {
		return fmt.Errorf("%w: node and overlay: want the dialling node's name and overlay address", ErrBadRequest)
	}
	run, err := s.tunnelService().Tunnel(r.Context(), req)
	if err != nil {
		return err
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("%w: cannot switch protocols on this connection: %v", ErrInternal, err)
	}
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + TunnelProtocol + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil
	}
	run(&bufferedConn{Conn: conn, r: brw.Reader})
	return nil
}

// Tunnel calls POST /v1/tunnel and returns the switched connection, which
// carries the overlay's frames both ways (internal/overlay). ctx bounds the
// request until the switch only.
func (c *Client) Tunnel(ctx context.Context, tr TunnelRequest) (io.ReadWriteCloser, error) {
	return c.upgrade(ctx, "/v1/tunnel", TunnelProtocol, "tunnel", tr)
}
