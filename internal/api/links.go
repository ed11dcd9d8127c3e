package api

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"time"

	"shoal/internal/links"
)

// MaxProbeBytes bounds GET /v1/probe.
const MaxProbeBytes = 64 << 20

// LinkService is this node's knowledge of its links (internal/agent): its own
// measurements, or with all, every live node's and estimates of the pairs none
// measured. Same contract as [JobService].
type LinkService interface {
	Links(ctx context.Context, all bool) (links.List, error)
}

// SetLinkService plugs in the link measurements; nil unplugs them.
func (s *Server) SetLinkService(l LinkService) {
	if l == nil {
		l = Unavailable{}
	}
	s.links.Store(&l)
}

func (s *Server) linkService() LinkService { return *s.links.Load() }

var _ LinkService = Unavailable{}

func (Unavailable) Links(context.Context, bool) (links.List, error) {
	return links.List{}, notAvailable("link measurements")
}

func (s *Server) getLinks(w http.ResponseWriter, r *http.Request) error {
	if err := noQuery(r, "all"); err != nil {
		return err
	}
	all := false
	if v := r.URL.Query().Get("all"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: all %q: want true or false", ErrBadRequest, v)
		}
		all = b
	}
	l, err := s.linkService().Links(r.Context(), all)
	if err != nil {
		return err
	}
	if l.Links == nil {
		l.Links = []links.Link{}
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

// probeChunk is what GET /v1/probe sends, over and over.
var probeChunk = make([]byte, 64<<10)

// linkProbe answers ?bytes=N bytes, for another node to time.
func (s *Server) linkProbe(w http.ResponseWriter, r *http.Request) error {
	if err := noQuery(r, "bytes"); err != nil {
		return err
	}
	n, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
	if err != nil || n < 0 || n > MaxProbeBytes {
		return fmt.Errorf("%w: bytes %q: want 0 to %d", ErrBadRequest, r.URL.Query().Get("bytes"), MaxProbeBytes)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	for n > 0 {
		k := min(n, int64(len(probeChunk)))
		if _, err := w.Write(probeChunk[:k]); err != nil {
			return nil // the prober gave up
		}
		n -= k
	}
	return nil
}

// Links calls GET /v1/links: the node's own measurements, or with all, the
// whole cluster's.
func (c *Client) Links(ctx context.Context, all bool) (links.List, error) {
	var l links.List
	path := "/v1/links"
	if all {
		path += "?all=true"
	}
	err := c.call(ctx, "GET", path, nil, &l)
	return l, err
}

// ProbeLink calls GET /v1/probe?bytes=n, reads the answer and returns how
// long the whole request took, and the least round trip the kernel measured
// on the connection it went over (0 when unknown; see kernelRTT).
func (c *Client) ProbeLink(ctx context.Context, n int64) (took, rtt time.Duration, err error) {
	var conn net.Conn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn }})
	req, err := c.request(ctx, "GET", "/v1/probe?bytes="+strconv.FormatInt(n, 10), nil, "", 0)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := c.send(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	got, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if got != n {
		return 0, 0, fmt.Errorf("%w: probe of %d bytes answered %d", ErrBadGateway, n, got)
	}
	took = time.Since(start)
	if conn != nil {
		rtt = kernelRTT(conn)
	}
	return took, rtt, nil
}
