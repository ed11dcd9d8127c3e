// Package ui serves the web dashboard of `shoal ui`: a few read-only pages of
// the cluster (nodes, jobs, one job, a farm's tasks) and the JSON they read,
// drawn from a local agent through its unix socket as the user who runs the
// dashboard, so that the agent's rules for that user apply.
//
// The dashboard listens on loopback, where every local user reaches it. A
// [Server] therefore answers only a browser that shows the token it was started
// with (once in the URL, then in an HttpOnly SameSite=Strict cookie), only GET
// and HEAD, only requests whose Host names the loopback address it listens on
// (against DNS rebinding), and sends a Content-Security-Policy that allows the
// page's own files and nothing else (docs/security.md, "The dashboard").
package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/node"
)

// Errors of the dashboard's configuration.
var (
	// ErrNotLoopback is a listen address off the loopback interface.
	ErrNotLoopback = errors.New("ui: not a loopback address")
)

//go:embed static
var static embed.FS

// Source is what the dashboard reads of the cluster: an agent, as the user
// the dashboard runs as ([api.Client] through the local socket, see
// [ClientSource]). It must be safe for concurrent use.
type Source interface {
	Health(ctx context.Context) (api.Health, error)
	Nodes(ctx context.Context) ([]node.Node, error)
	Links(ctx context.Context, all bool) (links.List, error)
	ListJobs(ctx context.Context, q job.Query) (api.JobList, error)
	Job(ctx context.Context, id string) (job.Job, error)
	// Events returns the job's events with Seq ≥ from: with follow until the
	// job's end, else those recorded so far.
	Events(ctx context.Context, id string, from uint64, follow bool) (Events, error)
}

// Events is a stream of a job's events; Next returns io.EOF at its end.
type Events interface {
	Next() (job.Event, error)
	Close() error
}

// ClientSource is a [Source] over an agent's API client.
type ClientSource struct{ *api.Client }

var _ Source = ClientSource{}

// Events reads the job's events from from on.
func (c ClientSource) Events(ctx context.Context, id string, from uint64, follow bool) (Events, error) {
	return c.Client.Events(ctx, id, from, follow)
}

// NewToken returns a random token of 32 hex digits (128 bits).
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// CheckListen returns nil if addr (host:port) is on loopback: 127.0.0.0/8,
// ::1 or localhost.
func CheckListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ui: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: --listen %q: the dashboard listens on loopback only (127.0.0.1:PORT), where the token guards it", ErrNotLoopback, addr)
}

// Server is the dashboard's HTTP handler.
type Server struct {
	src    Source
	token  string
	cookie string          // the cookie's name: one per port, as browsers share cookies between ports
	hosts  map[string]bool // the Host values accepted
	log    *slog.Logger
	mux    *http.ServeMux
	seen   progressBook
	links  linkCache
}

// New returns the dashboard reading src, for a browser that shows token, on
// addr, the loopback address (host:port) it listens on. The Host of a request
// must name that port of addr's host, 127.0.0.1, localhost or ::1.
func New(src Source, token string, addr *net.TCPAddr, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := strconv.Itoa(addr.Port)
	s := &Server{
		src: src, token: token, log: log, mux: http.NewServeMux(),
		cookie: "shoal-ui-" + p,
		hosts: map[string]bool{addr.String(): true,
			"127.0.0.1:" + p: true, "localhost:" + p: true, "[::1]:" + p: true},
	}
	page, _ := fs.Sub(static, "static")
	files := http.FileServerFS(page)
	index := func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, page, "index.html")
	}
	s.mux.HandleFunc("GET /{$}", index)
	s.mux.HandleFunc("GET /nodes", index)
	s.mux.HandleFunc("GET /jobs", index)
	s.mux.HandleFunc("GET /jobs/{id}", index)
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	s.mux.HandleFunc("GET /api/agent", s.agent)
	s.mux.HandleFunc("GET /api/nodes", s.nodes)
	s.mux.HandleFunc("GET /api/jobs", s.jobs)
	s.mux.HandleFunc("GET /api/jobs/{id}", s.job)
	s.mux.HandleFunc("GET /api/jobs/{id}/events", s.events)
	return s
}

// csp allows the page its own script, style and data, and nothing else: no
// inline script, no other origin, no frames, no forms.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if d := s.refuse(r); d != nil {
		s.log.Warn("refused a request", "method", r.Method, "path", r.URL.Path, "host", r.Host, "why", d.why)
		http.Error(w, d.why, d.status)
		return
	}
	if t := r.URL.Query().Get("token"); t != "" {
		// Keep the token out of the address bar, the history and any Referer.
		http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q := r.URL.Query()
		q.Del("token")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// denial is why a request is refused, and its status.
type denial struct {
	status int
	why    string
}

// refuse decides whether r is refused, and why: a pure decision on the
// request's method, Host, token and cookie.
func (s *Server) refuse(r *http.Request) *denial {
	if !s.hosts[r.Host] {
		return &denial{http.StatusForbidden, fmt.Sprintf("host %q not allowed: open the address shoal ui printed", r.Host)}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return &denial{http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: the dashboard is read-only", r.Method)}
	}
	if t := r.URL.Query().Get("token"); t != "" {
		if s.match(t) {
			return nil
		}
		return &denial{http.StatusForbidden, "wrong token: open the address shoal ui printed"}
	}
	if c, err := r.Cookie(s.cookie); err == nil && s.match(c.Value) {
		return nil
	}
	return &denial{http.StatusForbidden, "no token: open the address shoal ui printed, with its ?token="}
}

func (s *Server) match(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

// NodesView is the answer of GET /api/nodes: the members, and the links
// between them when the agent measures them.
type NodesView struct {
	Nodes []node.Node  `json:"nodes"`
	Links []links.Link `json:"links,omitempty"`
	// LinksError says why Links is missing; "" when it is not.
	LinksError string `json:"links_error,omitempty"`
}

func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.src.Nodes(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	v := NodesView{Nodes: nodes}
	if l, err := s.links.get(r.Context(), s.src); err != nil {
		v.LinksError = err.Error()
	} else {
		v.Links = l.Links
	}
	writeJSON(w, v)
}

// agent answers GET /api/agent: the local agent's name and version.
func (s *Server) agent(w http.ResponseWriter, r *http.Request) {
	h, err := s.src.Health(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, h)
}

// linkAge is how long the links read from the agent are shown before they are
// read again: reading them asks every live node, and the nodes measure their
// links every few minutes only.
const linkAge = 10 * time.Second

// linkCache holds the links last read, for linkAge. It is safe for concurrent
// use.
type linkCache struct {
	mu   sync.Mutex
	at   time.Time
	list links.List
}

func (c *linkCache) get(ctx context.Context, src Source) (links.List, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < linkAge {
		return c.list, nil
	}
	l, err := src.Links(ctx, true)
	if err != nil {
		return links.List{}, err
	}
	c.list, c.at = l, time.Now()
	return l, nil
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	l, err := s.src.ListJobs(r.Context(), job.Query{Limit: 200})
	if err != nil {
		s.fail(w, err)
		return
	}
	if l.Jobs == nil {
		l.Jobs = []job.Job{}
	}
	s.seen.fill(r.Context(), s.src, l.Jobs)
	writeJSON(w, l)
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	j, err := s.src.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, j)
}

// events streams a job's events as server-sent events, each with its Seq as
// its id, so that the browser's EventSource resumes a broken stream after the
// last event it read (Last-Event-ID). The stream ends after the job's end.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	from := uint64(1)
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("Last-Event-ID %q: want an event's seq", last), http.StatusBadRequest)
			return
		}
		from = n + 1
	}
	st, err := s.src.Events(r.Context(), r.PathValue("id"), from, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer st.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	// A broken stream is retried by the browser a second later.
	io.WriteString(w, "retry: 1000\n\n")
	rc.Flush()
	for {
		e, err := st.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && r.Context().Err() == nil {
				s.log.Warn("event stream broke", "job", r.PathValue("id"), "err", err)
			}
			return
		}
		b, _ := json.Marshal(e)
		if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, b); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// fail answers with the agent's error as {"error": …}: 404 for a job the
// agent does not know (or does not show this user), 502 for the rest.
func (s *Server) fail(w http.ResponseWriter, err error) {
	status := http.StatusBadGateway
	if errors.Is(err, errkind.NotFound) || errors.Is(err, job.ErrNotFound) {
		status = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
