package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/errkind"
)

// DefaultMaxBody is the largest JSON request body accepted, in bytes.
const DefaultMaxBody = 1 << 20

// ServerConfig configures a [Server].
type ServerConfig struct {
	// Node answers the node routes. Required.
	Node LocalNode
	// Secret is the cluster secret; requests must be signed with
	// DeriveAuthKey(Secret). Required.
	Secret []byte
	// Version is reported by GET /v1/health.
	Version string
	// Log receives one line per rejected request and per server error; nil
	// discards them.
	Log *slog.Logger
	// MaxBody bounds JSON request bodies; 0 means DefaultMaxBody. File and
	// shard uploads are streamed and not bounded here.
	MaxBody int64
	// Relay, when set, starts a launch on the agent at API address to for a
	// caller of the local socket (LaunchRequest.To), with the cluster secret,
	// and returns the switched connection: the agent's peers client does.
	Relay func(ctx context.Context, to string, req LaunchRequest) (io.ReadWriteCloser, error)
	// MaxConnsPerUser bounds the connections one local user other than root
	// and the agent's own may hold open on the socket of [Server.ServeLocal];
	// one more is closed as soon as it is accepted. 0 means
	// DefaultMaxConnsPerUser; negative, no bound.
	MaxConnsPerUser int
	// TLS, when set, is what [Server.Serve] talks on its listener: an agent's is
	// TLS 1.3 with client certificates from the cluster's authority
	// (pki.Identity.ServerConfig), so plain HTTP gets no API answer. Nil serves
	// plain HTTP (tests of the handlers).
	TLS *tls.Config
	// Metrics, when set, answers GET /metrics (internal/metrics): to a
	// connection showing a certificate of the cluster, without the request
	// signature a Prometheus server cannot make ([Server.ServeHTTP]).
	Metrics http.Handler
}

// Server serves the agent API. Create it with [NewServer]; it is an
// http.Handler and can also listen itself ([Server.Serve]).
type Server struct {
	cfg     ServerConfig
	log     *slog.Logger
	verify  *Verifier
	mux     *http.ServeMux
	routes  map[string]route // by mux pattern
	jobs    atomic.Pointer[JobService]
	data    atomic.Pointer[DataService]
	shards  atomic.Pointer[ShardService]
	grants  atomic.Pointer[GrantService]
	gc      atomic.Pointer[GCService]
	store   atomic.Pointer[StoreService]
	results atomic.Pointer[ResultService]
	links   atomic.Pointer[LinkService]
	tunnels atomic.Pointer[TunnelService]
	http    *http.Server
	// closing is cancelled when Shutdown begins; long polls end on it.
	closing   context.Context
	stopWaits context.CancelFunc

	localMu sync.Mutex
	local   []*http.Server // ServeLocal's, shut down with the rest
}

// authenticatedKey marks, in a public route's request context, a request whose
// signature verified.
type authenticatedKey struct{}

// authenticated reports whether r, sent to a public route, was signed with the
// cluster secret.
func authenticated(r *http.Request) bool {
	ok, _ := r.Context().Value(authenticatedKey{}).(bool)
	return ok
}

// route is one API route: its handler and how its request is authenticated.
type route struct {
	public bool // no authentication needed (GET /v1/health only); see [authenticated]
	// certOnly: the connection's certificate of the cluster is enough, no
	// signature (GET /metrics); see [clusterCertificate].
	certOnly bool
	stream   bool // body streamed to the service and verified as it is read
	// user: a local user other than root may call it on the socket, for their
	// own jobs (see [Server.ServeLocal]).
	user bool
	h    func(w http.ResponseWriter, r *http.Request) error
}

// NewServer returns a server with no job or data service plugged in.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxConnsPerUser == 0 {
		cfg.MaxConnsPerUser = DefaultMaxConnsPerUser
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Log,
		verify: NewVerifier(DeriveAuthKey(cfg.Secret), cfg.Node.Name()+"/"+NewRun()),
		mux:    http.NewServeMux(),
		routes: map[string]route{},
	}
	s.closing, s.stopWaits = context.WithCancel(context.Background())
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext:       withPeerConn,
	}
	s.SetJobService(nil)
	s.SetDataService(nil)
	s.SetShardService(nil)
	s.SetGrantService(nil)
	s.SetGCService(nil)
	s.SetStoreService(nil)
	s.SetResultService(nil)
	s.SetLinkService(nil)
	s.SetTunnelService(nil)
	s.handle("GET /v1/health", route{public: true, h: s.health})
	s.handle("GET /v1/nodes", route{user: true, h: s.nodes})
	s.handle("POST /v1/leave", route{h: s.leave})
	s.handle("POST /v1/recover-quorum", route{h: s.recoverQuorum})
	s.handle("GET /v1/jobs", route{user: true, h: s.listJobs})
	s.handle("POST /v1/jobs", route{user: true, h: s.submitJob})
	s.handle("GET /v1/jobs/{id}", route{user: true, h: s.getJob})
	s.handle("DELETE /v1/jobs/{id}", route{user: true, h: s.cancelJob})
	s.handle("GET /v1/jobs/{id}/events", route{user: true, h: s.jobEvents})
	s.handle("POST /v1/jobs/{id}/rebalance", route{h: s.rebalanceJob})
	s.handle("POST /v1/jobs/{id}/durable", route{h: s.keptDurable})
	s.handle("POST /v1/evacuate", route{h: s.evacuate})
	s.handle("POST /v1/launch", route{user: true, h: s.launch})
	s.handle("POST /v1/grants", route{h: s.grant})
	s.handle("DELETE /v1/grants/{job}", route{h: s.revoke})
	s.handle("GET /v1/grants/{job}/ranks", route{h: s.rankStates})
	s.handle("HEAD /v1/files/{sha256}", route{user: true, h: s.hasFile})
	s.handle("GET /v1/files/{sha256}", route{h: s.getFile})
	s.handle("PUT /v1/files/{sha256}", route{stream: true, user: true, h: s.putFile})
	s.handle("GET /v1/shards/{job}/{epoch}/{rank}", route{h: s.getShard})
	s.handle("PUT /v1/shards/{job}/{epoch}/{rank}", route{stream: true, h: s.putShard})
	s.handle("POST /v1/shards/{job}/{epoch}/{rank}/fetch", route{h: s.fetchShard})
	s.handle("POST /v1/shards/{job}/{epoch}/{rank}/changes", route{h: s.shardChanges})
	s.handle("POST /v1/shards/{job}/{epoch}/{rank}/rebuild", route{h: s.rebuildShard})
	s.handle("POST /v1/shards/{job}/{epoch}/{rank}/upload", route{h: s.uploadShard})
	s.handle("POST /v1/shards/{job}/{epoch}/{rank}/download", route{h: s.downloadShard})
	s.handle("POST /v1/shards/{job}/{epoch}/parity", route{h: s.encodeParity})
	s.handle("GET /v1/shards/{job}/{epoch}/parity/{group}/{row}", route{h: s.getParity})
	s.handle("PUT /v1/shards/{job}/{epoch}/parity/{group}/{row}", route{stream: true, h: s.putParity})
	s.handle("GET /v1/shards/{job}", route{h: s.listShards})
	s.handle("DELETE /v1/shards/{job}", route{h: s.removeShards})
	s.handle("POST /v1/shards/{job}/request-checkpoint", route{h: s.requestCheckpoint})
	s.handle("POST /v1/shards/{job}/probe", route{h: s.probe})
	s.handle("POST /v1/gc", route{h: s.collect})
	s.handle("GET /v1/store/follow", route{h: s.followStore})
	s.handle("PUT /v1/results/{job}/{task}", route{stream: true, h: s.putResult})
	s.handle("GET /v1/results/{job}/{task}", route{user: true, h: s.getResult})
	s.handle("GET /v1/results/{job}", route{h: s.listResults})
	s.handle("GET /v1/links", route{user: true, h: s.getLinks})
	s.handle("GET /v1/probe", route{h: s.linkProbe})
	s.handle("POST /v1/tunnel", route{h: s.tunnel})
	s.handle("GET /metrics", route{certOnly: true, h: s.metrics})
	return s
}

func (s *Server) handle(pattern string, rt route) {
	s.routes[pattern] = rt
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		if err := rt.h(tw, r); err != nil {
			if tw.wrote {
				s.log.Warn("request failed after the answer began", "method", r.Method, "path", r.URL.Path, "err", err)
				return
			}
			s.fail(tw, r, err)
		}
	})
}

// SetJobService plugs in the job coordinator; nil unplugs it. Safe to call
// while the server runs: requests already in a service finish there.
func (s *Server) SetJobService(j JobService) {
	if j == nil {
		j = Unavailable{}
	}
	s.jobs.Store(&j)
}

// SetDataService plugs in the file store; nil unplugs it.
func (s *Server) SetDataService(d DataService) {
	if d == nil {
		d = Unavailable{}
	}
	s.data.Store(&d)
}

// SetShardService plugs in the checkpoint store; nil unplugs it.
func (s *Server) SetShardService(d ShardService) {
	if d == nil {
		d = Unavailable{}
	}
	s.shards.Store(&d)
}

// SetGrantService plugs in the launch grants; nil unplugs them.
func (s *Server) SetGrantService(g GrantService) {
	if g == nil {
		g = Unavailable{}
	}
	s.grants.Store(&g)
}

func (s *Server) jobService() JobService     { return *s.jobs.Load() }
func (s *Server) dataService() DataService   { return *s.data.Load() }
func (s *Server) shardService() ShardService { return *s.shards.Load() }
func (s *Server) grantService() GrantService { return *s.grants.Load() }

// ServeHTTP authenticates the request, then routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := s.mux.Handler(r)
	rt, known := s.routes[pattern]
	if c := CallerOf(r.Context()); c != nil {
		s.serveLocal(w, r, c, rt, known)
		return
	}
	if known && rt.public {
		// Anyone may ask, but only a signed request learns more than that the agent
		// answers: a name and a version help an attacker pick a target.
		if r.Header.Get(HeaderAuthorization) != "" {
			if sum, err := s.verify.Verify(r, true); err == nil && s.bufferBody(r, sum) == nil {
				r = r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, true))
			}
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	if known && rt.certOnly {
		if err := clusterCertificate(r); err != nil {
			s.log.Warn("rejected request", "from", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "why", err)
			s.fail(w, r, err)
			return
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	// Authenticate before routing, so unauthenticated callers learn nothing,
	// not even which routes exist.
	sum, err := s.verify.Verify(r, false)
	if err != nil {
		s.log.Warn("rejected request", "from", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "why", err)
		s.fail(w, r, err)
		return
	}
	if !known {
		s.noRoute(w, r)
		return
	}
	if rt.stream {
		r.Body = struct {
			io.Reader
			io.Closer
		}{s.verify.Body(r.Body, sum), r.Body}
	} else if err := s.bufferBody(r, sum); err != nil {
		s.fail(w, r, err)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// bufferBody reads a JSON body, bounded, and checks it against its signed hash
// (none for a request from the local socket: sum "").
func (s *Server) bufferBody(r *http.Request, sum string) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
	r.Body.Close()
	if err != nil {
		return fmt.Errorf("%w: reading body: %v", ErrBadRequest, err)
	}
	if int64(len(b)) > s.cfg.MaxBody {
		return fmt.Errorf("%w: body larger than %d bytes", ErrTooLarge, s.cfg.MaxBody)
	}
	h := sha256.Sum256(b)
	if sum != "" && hex.EncodeToString(h[:]) != sum {
		return fmt.Errorf("%w: body does not match its signed SHA-256 (tampered or truncated)", ErrUnauthorized)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// noRoute answers 404, or 405 when the path exists for other methods.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", rec.header.Get("Allow"))
		s.fail(w, r, fmt.Errorf("%w: %s %s (allowed: %s)", ErrMethodNotAllowed, r.Method, r.URL.Path, rec.header.Get("Allow")))
		return
	}
	s.fail(w, r, fmt.Errorf("%w: no route %s %s", ErrNotFound, r.Method, r.URL.Path))
}

// fail answers err as {"error": ..., "code": ...} with the status it maps to.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	if status == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	body := errorBody{Error: err.Error(), Code: code}
	if status == http.StatusBadGateway {
		body.NoAnswer = errkind.NoAnswerFrom(err)
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encoding answer: " + err.Error(), Code: "internal"})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decodeJSON decodes r's body into v, rejecting unknown fields and trailing
// data. An empty body is an error unless optional. Errors wrap ErrBadRequest
// and say what is wrong and where.
func decodeJSON(r *http.Request, v any, optional bool) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("%w: reading body: %v", ErrBadRequest, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if optional {
			return nil
		}
		return fmt.Errorf("%w: empty body, want a JSON object", ErrBadRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return fmt.Errorf("%w: malformed JSON at byte %d: %v", ErrBadRequest, syn.Offset, syn)
		case errors.As(err, &typ):
			return fmt.Errorf("%w: field %q: want %v, got JSON %s", ErrBadRequest, typ.Field, typ.Type, typ.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("%w: malformed JSON: body ends in the middle of a value", ErrBadRequest)
		}
		return fmt.Errorf("%w: malformed JSON: %s", ErrBadRequest, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return fmt.Errorf("%w: malformed JSON: data after the object at byte %d", ErrBadRequest, dec.InputOffset())
	}
	return nil
}

// Serve answers requests on l until [Server.Shutdown], with at most
// MaxConnsPerPeer connections open from one IP address.
func (s *Server) Serve(l net.Listener) error {
	l = limitPeers(l, byIP(MaxConnsPerPeer), s.log)
	if s.cfg.TLS != nil {
		l = tls.NewListener(l, s.cfg.TLS)
	}
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting requests and waits, until ctx is done, for those in
// progress; a long poll of a shard index is answered at once. Launch
// connections already switched are not waited for. A Serve called after
// Shutdown returns at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopWaits()
	s.localMu.Lock()
	local := s.local
	s.localMu.Unlock()
	for _, l := range local {
		l.Shutdown(ctx)
	}
	return s.http.Shutdown(ctx)
}

// trackingWriter remembers whether the answer has begun.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) { t.wrote = true; t.ResponseWriter.WriteHeader(code) }
func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// statusRecorder captures the status and headers the mux's own 404/405
// handlers would send.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return len(b), nil
}
func (s *statusRecorder) WriteHeader(code int) { s.status = code }
