package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/pki"
	"shoal/internal/shard"
)

// Client calls one agent's API. It is safe for concurrent use.
type Client struct {
	addr string // host:port
	base string // http://host:port
	key  []byte
	hc   *http.Client
	now  func() time.Time
	// broken, when set, is why the client cannot make its TLS identity; every
	// request fails with it.
	broken error
	// local is set for a client of the agent's local socket: nothing is signed.
	local bool
	// node is the agent's identity (Health.Node) that requests are signed for,
	// learned from its health answer before the first other request; cleared
	// when the agent says a request was for someone else (it restarted).
	node atomic.Pointer[string]
	// answered is when (UnixNano) the newest answer of the agent, with any
	// status, came: the agent was there a network delay before
	// ([Client.Answered]).
	answered atomic.Int64
}

// NewClient returns a client of the agent at addr (host:port, or an https:// URL)
// that signs its requests with the cluster secret's API key and talks TLS 1.3,
// showing this process's certificate from the cluster's authority and trusting
// only agents that show one ([pki]). An http:// URL talks plain HTTP, which no
// agent answers; tests of the API's handlers use it.
func NewClient(addr string, secret []byte) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "https://" + base
	}
	base = strings.TrimRight(base, "/")
	host := base
	if u, err := url.Parse(base); err == nil {
		host = u.Host
	}
	tr := &http.Transport{
		// Cluster traffic never goes through HTTP_PROXY.
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	c := &Client{addr: host, base: base, key: DeriveAuthKey(secret), hc: &http.Client{Transport: tr}, now: time.Now}
	if strings.HasPrefix(base, "https://") {
		id, err := pki.ClientIdentity(secret, "shoal client")
		if err != nil {
			c.broken = err
		} else {
			tr.TLSClientConfig = id.ClientConfig()
		}
	}
	return c
}

// NewLocalClient returns a client of the agent whose local socket is at path
// (DATA/agent.sock). Its requests are not signed: the agent knows the caller
// from the socket, and grants what that user may do (see [Server.ServeLocal]).
func NewLocalClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{addr: path, base: "http://agent", hc: &http.Client{Transport: tr}, now: time.Now, local: true}
}

// Addr returns the agent's address, host:port.
func (c *Client) Addr() string { return c.addr }

// CloseIdleConnections closes the client's kept-alive connections that carry no
// request now.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Clients hands out one [Client] per agent address, so that every caller on a
// node shares the connections kept alive to that agent. A Client made for one
// call dials a new connection (and its server a new goroutine), and leaves it
// idle until IdleConnTimeout: a coordinator calling every node several times per
// launch and per poll paid that for each call. It is safe for concurrent use.
type Clients struct {
	secret []byte
	mu     sync.Mutex
	byAddr map[string]*Client
}

// NewClients returns clients that sign their requests with the cluster secret's
// API key.
func NewClients(secret []byte) *Clients {
	return &Clients{secret: secret, byAddr: map[string]*Client{}}
}

// Get returns the client of the agent at addr (as for [NewClient]), made on
// first use.
func (cs *Clients) Get(addr string) *Client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.byAddr[addr]
	if c == nil {
		c = NewClient(addr, cs.secret)
		cs.byAddr[addr] = c
	}
	return c
}

// Answered returns when the newest answer of the agent at addr to one of
// these clients came ([Client.Answered]), zero if none has.
func (cs *Clients) Answered(addr string) time.Time {
	cs.mu.Lock()
	c := cs.byAddr[addr]
	cs.mu.Unlock()
	if c == nil {
		return time.Time{}
	}
	return c.Answered()
}

// Forget drops the client of addr and closes its idle connections: the agent
// there is gone. A later Get makes a new one.
func (cs *Clients) Forget(addr string) {
	cs.mu.Lock()
	c := cs.byAddr[addr]
	delete(cs.byAddr, addr)
	cs.mu.Unlock()
	if c != nil {
		c.CloseIdleConnections()
	}
}

// request builds a signed request. body is either nil, []byte, or an
// io.Reader with its hex SHA-256 given in sum and its length in size.
func (c *Client) request(ctx context.Context, method, path string, body any, sum string, size int64) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
		sum, size = EmptySHA256, 0
	case []byte:
		h := sha256.Sum256(b)
		sum, size, rd = hex.EncodeToString(h[:]), int64(len(b)), bytes.NewReader(b)
	case io.Reader:
		rd = b
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %v", ErrBadRequest, method, path, err)
	}
	req.ContentLength = size
	if rd != nil && size == 0 {
		req.Body = http.NoBody
	}
	if _, ok := body.([]byte); ok {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.local {
		req.Header.Set(HeaderContentSHA256, sum) // what a file upload names as its content
		return req, nil
	}
	node, err := c.nodeFor(ctx, method, path)
	if err != nil {
		return nil, err
	}
	Sign(req, c.key, node, sum, c.now())
	return req, nil
}

// nodeFor returns the X-Shoal-Node value of a request: AnyNode for the health
// check, else the agent's identity, asked of it first if not known yet.
func (c *Client) nodeFor(ctx context.Context, method, path string) (string, error) {
	if method == "GET" && path == "/v1/health" {
		return AnyNode, nil
	}
	if n := c.node.Load(); n != nil {
		return *n, nil
	}
	h, err := c.Health(ctx)
	if err != nil {
		return "", err
	}
	if h.Node == "" {
		// Only a caller with the cluster secret learns who an agent is: without
		// it the request that follows is refused for its signature, which says so.
		return AnyNode, nil
	}
	return h.Node, nil
}

// send performs req and turns transport failures and error statuses into errors.
// A request the agent refuses as signed for another run of it (it restarted
// since this client learned its identity) is signed again for the new run and
// sent once more, when its body can be read again.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.do(req)
	if !errors.Is(err, ErrMisdirected) {
		return resp, err
	}
	c.node.Store(nil)
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return nil, err
	}
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	node, nerr := c.nodeFor(req.Context(), req.Method, req.URL.Path)
	if nerr != nil {
		return nil, nerr
	}
	Sign(again, c.key, node, req.Header.Get(HeaderContentSHA256), c.now())
	return c.do(again)
}

// do performs req once.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	if c.broken != nil {
		return nil, fmt.Errorf("%w: %v", ErrInternal, c.broken)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s at %s: %w", req.Method, req.URL.Path, c.addr, ctxErr)
		}
		if otherCluster(err) {
			return nil, fmt.Errorf("%w: TLS: the agent at %s and this client have certificates of different clusters (wrong cluster secret?)", ErrUnauthorized, c.addr)
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		// The cause stays inspectable: a refused connection (the host is there,
		// no agent listens) means something else than a silent one.
		return nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, c.addr, err)
	}
	c.heard(time.Now())
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// heard records an answer that came at t.
func (c *Client) heard(t time.Time) {
	at := t.UnixNano()
	for {
		was := c.answered.Load()
		if was >= at || c.answered.CompareAndSwap(was, at) {
			return
		}
	}
}

// Answered returns when the newest answer (with any status) of this client's
// agent came, zero if none has: evidence that its agent was there a network
// delay before, which a check of its reach need not dial again for. It is
// when the answer came, not when its request went: a request a loaded agent
// or a long poll kept for seconds was still answered by a live agent.
func (c *Client) Answered() time.Time {
	if at := c.answered.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// otherCluster reports whether err is a TLS handshake that failed because one
// end's certificate was not issued by the other's cluster authority: the agent
// holds another cluster secret.
func otherCluster(err error) bool {
	if errors.Is(err, pki.ErrUntrusted) {
		return true
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		switch alert {
		case 42, 43, 48, 116: // bad_certificate, unsupported_certificate, unknown_ca, certificate_required
			return true
		}
	}
	// The server's refusal of this client's certificate arrives as an alert
	// that crypto/tls reports by its text only.
	msg := err.Error()
	return strings.Contains(msg, "remote error: tls: ") && strings.Contains(msg, "certificate")
}

// readError turns an error answer into an *Error.
func readError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode}
	var body errorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		e.Code, e.Message, e.NoAnswer = body.Code, body.Error, body.NoAnswer
	} else {
		e.Message = fmt.Sprintf("%s (status %d)", strings.TrimSpace(http.StatusText(resp.StatusCode)), resp.StatusCode)
	}
	return e
}

// call sends a JSON request (in may be nil) and decodes the JSON answer into out
// (which may be nil).
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body any
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%w: encoding request: %v", ErrBadRequest, err)
		}
		body = b
	}
	req, err := c.request(ctx, method, path, body, "", 0)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: %s %s at %s: malformed answer: %v", ErrInternal, method, path, c.addr, err)
	}
	return nil
}

// Health calls GET /v1/health, signed, so that the answer names the node and its
// version (an unsigned call gets an empty object).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.call(ctx, "GET", "/v1/health", nil, &h)
	if err == nil && h.Node != "" {
		c.node.Store(&h.Node)
	}
	return h, err
}

// Nodes calls GET /v1/nodes.
func (c *Client) Nodes(ctx context.Context) ([]node.Node, error) {
	var l node.List
	err := c.call(ctx, "GET", "/v1/nodes", nil, &l)
	return l.Nodes, err
}

// Voters calls GET /v1/nodes?voters=1: the job store's leader and voters.
func (c *Client) Voters(ctx context.Context) ([]node.Node, error) {
	var l node.List
	err := c.call(ctx, "GET", "/v1/nodes?voters=1", nil, &l)
	return l.Nodes, err
}

// Leave calls POST /v1/leave and returns once the agent has left; timeout 0
// uses the agent's default.
func (c *Client) Leave(ctx context.Context, timeout time.Duration) (LeaveResponse, error) {
	var out LeaveResponse
	err := c.call(ctx, "POST", "/v1/leave", LeaveRequest{Timeout: job.Duration(timeout)}, &out)
	return out, err
}

// RecoverQuorum calls POST /v1/recover-quorum: the agent makes its node the
// only voter of the job store, when the cluster has no quorum.
func (c *Client) RecoverQuorum(ctx context.Context) (RecoverResponse, error) {
	var out RecoverResponse
	err := c.call(ctx, "POST", "/v1/recover-quorum", nil, &out)
	return out, err
}

// Submit calls POST /v1/jobs.
func (c *Client) Submit(ctx context.Context, spec job.Spec) (job.Job, error) {
	var j job.Job
	err := c.call(ctx, "POST", "/v1/jobs", spec, &j)
	return j, err
}

// Jobs calls GET /v1/jobs.
func (c *Client) Jobs(ctx context.Context) ([]job.Job, error) {
	var l JobList
	err := c.call(ctx, "GET", "/v1/jobs", nil, &l)
	return l.Jobs, err
}

// Job calls GET /v1/jobs/{id}.
func (c *Client) Job(ctx context.Context, id string) (job.Job, error) {
	var j job.Job
	err := c.call(ctx, "GET", "/v1/jobs/"+url.PathEscape(id), nil, &j)
	return j, err
}

// Cancel calls DELETE /v1/jobs/{id}.
func (c *Client) Cancel(ctx context.Context, id string) (job.Job, error) {
	var j job.Job
	err := c.call(ctx, "DELETE", "/v1/jobs/"+url.PathEscape(id), nil, &j)
	return j, err
}

// EventStream reads the lines of GET /v1/jobs/{id}/events.
type EventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Next returns the next event, io.EOF at the end of the stream, or the
// server's error if the stream ended with one.
func (s *EventStream) Next() (job.Event, error) {
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return job.Event{}, err
		}
		return job.Event{}, io.EOF
	}
	line := s.sc.Bytes()
	var probe struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(line, &probe) == nil && probe.Error != "" {
		e := &Error{Status: http.StatusInternalServerError, Code: probe.Code, Message: probe.Error}
		for _, se := range statusErrors {
			if se.code == probe.Code {
				e.Status = se.status
			}
		}
		return job.Event{}, e
	}
	var ev job.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return job.Event{}, fmt.Errorf("%w: malformed event line: %v", ErrInternal, err)
	}
	return ev, nil
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// Events calls GET /v1/jobs/{id}/events: the job's events with Seq ≥ from; with
// follow, until the job ends.
func (c *Client) Events(ctx context.Context, id string, from uint64, follow bool) (*EventStream, error) {
	path := fmt.Sprintf("/v1/jobs/%s/events?from=%d&follow=%t", url.PathEscape(id), from, follow)
	req, err := c.request(ctx, "GET", path, nil, "", 0)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &EventStream{body: resp.Body, sc: sc}, nil
}

// Launch calls POST /v1/launch and returns the switched connection, which
// carries the launch protocol (internal/launch). ctx bounds the request until
// the switch only: after that the connection lives until the caller closes
// it, and closing it makes the agent kill what it launched.
func (c *Client) Launch(ctx context.Context, lr LaunchRequest) (io.ReadWriteCloser, error) {
	return c.upgrade(ctx, "/v1/launch", LaunchProtocol, "launch", lr)
}

// upgrade POSTs body to path asking to switch to protocol, and returns the
// switched connection; what names the request in its error.
func (c *Client) upgrade(ctx context.Context, path, protocol, what string, body any) (io.ReadWriteCloser, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding request: %v", ErrBadRequest, err)
	}
	req, err := c.request(ctx, "POST", path, b, "", 0)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s at %s: answered %s instead of switching protocols", ErrInternal, what, c.addr, resp.Status)
	}
	return rwc, nil
}

// Grant calls POST /v1/grants: the agent will launch MPI daemons for req.Job,
// on behalf of the coordinator node, for req.TTL from now (0:
// [DefaultGrantTTL]), and counts req.Ranks of the job's ranks as its own until
// the grant is revoked; with req.Files, the answer's Missing lists those the
// node lacks.
func (c *Client) Grant(ctx context.Context, req GrantRequest) (Grant, error) {
	var g Grant
	err := c.call(ctx, "POST", "/v1/grants", req, &g)
	return g, err
}

// Revoke calls DELETE /v1/grants/{job}: the agent withdraws the grant and
// kills what it launched for job, and answers once it is gone.
func (c *Client) Revoke(ctx context.Context, job string) (Revoked, error) {
	var rv Revoked
	err := c.call(ctx, "DELETE", "/v1/grants/"+url.PathEscape(job), nil, &rv)
	return rv, err
}

// HasFile calls HEAD /v1/files/{sha256}.
func (c *Client) HasFile(ctx context.Context, sum string) (bool, error) {
	req, err := c.request(ctx, "HEAD", "/v1/files/"+url.PathEscape(sum), nil, "", 0)
	if err != nil {
		return false, err
	}
	resp, err := c.send(req)
	if errors.Is(err, ErrNotFound) { // HEAD answers carry no error body
		return false, nil
	}
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return true, nil
}

// GetFile calls GET /v1/files/{sha256}; the caller closes the reader and checks
// the content against sum (files.Cache.Put does).
func (c *Client) GetFile(ctx context.Context, sum string) (io.ReadCloser, int64, error) {
	return c.getStream(ctx, "/v1/files/"+url.PathEscape(sum))
}

// getStream GETs path and returns the answer's body, which the caller closes,
// and its length (-1 when not given).
func (c *Client) getStream(ctx context.Context, path string) (io.ReadCloser, int64, error) {
	req, err := c.request(ctx, "GET", path, nil, "", 0)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// PutFile calls PUT /v1/files/{sha256} with size bytes from r, whose content
// must hash to sum.
func (c *Client) PutFile(ctx context.Context, sum string, r io.Reader, size int64) error {
	resp, err := c.putOctets(ctx, "/v1/files/"+url.PathEscape(sum), r, sum, size)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func shardPath(ref shard.Ref) string {
	return fmt.Sprintf("/v1/shards/%s/%d/%d", url.PathEscape(ref.Job), ref.Epoch, ref.Rank)
}

// GetShard calls GET /v1/shards/{job}/{epoch}/{rank}; the caller closes the
// reader and verifies the shard. The shard comes raw; [Client.GetShardOver]
// lets the agent compress it.
func (c *Client) GetShard(ctx context.Context, ref shard.Ref) (io.ReadCloser, int64, error) {
	return c.getStream(ctx, shardPath(ref))
}

// PutShard calls PUT /v1/shards/{job}/{epoch}/{rank} with the content of r,
// which it reads twice: once to hash it, once to send it.
func (c *Client) PutShard(ctx context.Context, ref shard.Ref, r io.ReadSeeker) error {
	resp, err := c.putStream(ctx, shardPath(ref), r, "shard "+ref.String())
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// putStream PUTs the bytes r holds to path, signed with their SHA-256: r is
// read once for the hash, rewound and sent. what names the bytes in errors.
func (c *Client) putStream(ctx context.Context, path string, r io.ReadSeeker, what string) (*http.Response, error) {
	h := sha256.New()
	size, err := io.Copy(h, r)
	if err != nil {
		return nil, fmt.Errorf("hashing %s: %w", what, err)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewinding %s: %w", what, err)
	}
	return c.putOctets(ctx, path, r, hex.EncodeToString(h.Sum(nil)), size)
}

// putOctets PUTs size bytes from r to path, signed with sum, their SHA-256 in
// hex.
func (c *Client) putOctets(ctx context.Context, path string, r io.Reader, sum string, size int64) (*http.Response, error) {
	req, err := c.request(ctx, "PUT", path, r, sum, size)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return c.send(req)
}

// Shards calls GET /v1/shards/{job}: the job's verified shards on the agent's
// node, and the files there that fail verification.
func (c *Client) Shards(ctx context.Context, job string) (shard.Index, error) {
	return c.WaitShards(ctx, job, "", 0)
}

// WaitShards calls GET /v1/shards/{job}?wait=wait&known=known: the agent
// answers once its index of the job is no longer the one tagged known, or as
// it is when wait (at most [MaxShardWait]) has passed. With known empty or
// wait 0 it answers at once, as Shards does. ctx should allow wait and the
// time of an answer.
func (c *Client) WaitShards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	path := "/v1/shards/" + url.PathEscape(job)
	if known != "" && wait > 0 {
		path += "?" + url.Values{"wait": {wait.String()}, "known": {known}}.Encode()
	}
	var idx shard.Index
	err := c.call(ctx, "GET", path, nil, &idx)
	return idx, err
}

// FetchShard calls POST /v1/shards/{job}/{epoch}/{rank}/fetch: the agent copies
// the shard from the agent whose API address is from, verifies it and stores
// it, and answers once it is durable (at once if it already held a verified
// copy). ctx bounds the whole transfer.
func (c *Client) FetchShard(ctx context.Context, ref shard.Ref, from string) (Fetched, error) {
	var f Fetched
	err := c.call(ctx, "POST", shardPath(ref)+"/fetch", FetchRequest{From: from}, &f)
	return f, err
}

// GetParity calls GET /v1/shards/{job}/{epoch}/parity/{group}/{row}; the
// caller closes the reader.
func (c *Client) GetParity(ctx context.Context, ref shard.ParityRef) (io.ReadCloser, int64, error) {
	return c.getStream(ctx, parityPath(ref))
}

func parityPath(ref shard.ParityRef) string {
	return fmt.Sprintf("/v1/shards/%s/%d/parity/%d/%d", url.PathEscape(ref.Job), ref.Epoch, ref.Group, ref.Row)
}

// PutParity calls PUT /v1/shards/{job}/{epoch}/parity/{group}/{row} with the
// parity file r holds (read twice: for its SHA-256, then sent); the agent
// answers once it has verified and stored it.
func (c *Client) PutParity(ctx context.Context, ref shard.ParityRef, r io.ReadSeeker) (shard.ParityInfo, error) {
	var out shard.ParityInfo
	resp, err := c.putStream(ctx, parityPath(ref), r, "parity "+ref.String())
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("%w: parity %s: reading the answer: %v", ErrBadGateway, ref, err)
	}
	return out, nil
}

// EncodeParity calls POST /v1/shards/{job}/{epoch}/parity: the agent fetches
// the group's data shards, computes the parity row (and those it is to push)
// and stores it, and answers once it is durable and every push has ended.
// ctx bounds the whole transfer.
func (c *Client) EncodeParity(ctx context.Context, job string, epoch uint64, req EncodeRequest) (EncodeResult, error) {
	var out EncodeResult
	err := c.call(ctx, "POST", fmt.Sprintf("/v1/shards/%s/%d/parity", url.PathEscape(job), epoch), req, &out)
	return out, err
}

// RebuildShard calls POST /v1/shards/{job}/{epoch}/{rank}/rebuild: the agent
// rebuilds the shard from its group's other pieces and stores it.
func (c *Client) RebuildShard(ctx context.Context, ref shard.Ref, req RebuildRequest) (Fetched, error) {
	var f Fetched
	err := c.call(ctx, "POST", shardPath(ref)+"/rebuild", req, &f)
	return f, err
}

// RemoveShardsBefore calls DELETE /v1/shards/{job}?before=epoch: the agent
// deletes the job's epochs older than epoch (≥ 1) and returns them.
func (c *Client) RemoveShardsBefore(ctx context.Context, job string, epoch uint64) ([]uint64, error) {
	var out ShardsRemoved
	err := c.call(ctx, "DELETE", fmt.Sprintf("/v1/shards/%s?before=%d", url.PathEscape(job), epoch), nil, &out)
	return out.Removed, err
}

// RemoveJobShards calls DELETE /v1/shards/{job}: the agent deletes the job's
// whole checkpoint directory and returns the epochs it held.
func (c *Client) RemoveJobShards(ctx context.Context, job string) ([]uint64, error) {
	var out ShardsRemoved
	err := c.call(ctx, "DELETE", "/v1/shards/"+url.PathEscape(job), nil, &out)
	return out.Removed, err
}

// RequestCheckpoint calls POST /v1/shards/{job}/request-checkpoint: the job's
// rank 0, if it runs on the agent's node, checkpoints at its next agreement.
func (c *Client) RequestCheckpoint(ctx context.Context, job string) error {
	return c.call(ctx, "POST", "/v1/shards/"+url.PathEscape(job)+"/request-checkpoint", nil, nil)
}

// Probe calls POST /v1/shards/{job}/probe: whether the node's checkpoint store
// takes bytes now.
func (c *Client) Probe(ctx context.Context, job string, bytes int64) (Probe, error) {
	var out Probe
	err := c.call(ctx, "POST", "/v1/shards/"+url.PathEscape(job)+"/probe", ProbeRequest{Bytes: bytes}, &out)
	return out, err
}

// RankStates calls GET /v1/grants/{job}/ranks: the states recorded by the job's
// ranks on the agent's node, by rank.
func (c *Client) RankStates(ctx context.Context, job string) ([]job.RankState, error) {
	var out RankStates
	err := c.call(ctx, "GET", "/v1/grants/"+url.PathEscape(job)+"/ranks", nil, &out)
	return out.Ranks, err
}

// Rebalance calls POST /v1/jobs/{id}/rebalance on the job's coordinator.
func (c *Client) Rebalance(ctx context.Context, id string, req RebalanceRequest) (job.Job, error) {
	var j job.Job
	err := c.call(ctx, "POST", "/v1/jobs/"+url.PathEscape(id)+"/rebalance", req, &j)
	return j, err
}

// KeptDurable calls POST /v1/jobs/{id}/durable: epoch req.Epoch of job id is kept
// at req.Location.
func (c *Client) KeptDurable(ctx context.Context, id string, req DurableRequest) error {
	return c.call(ctx, "POST", "/v1/jobs/"+url.PathEscape(id)+"/durable", req, nil)
}

// Evacuate calls POST /v1/evacuate: the coordinator moves its jobs off node.
func (c *Client) Evacuate(ctx context.Context, node string) error {
	return c.call(ctx, "POST", "/v1/evacuate", EvacuateRequest{Node: node}, nil)
}

// RequestHold calls POST /v1/shards/{job}/request-checkpoint with {"hold": true}.
func (c *Client) RequestHold(ctx context.Context, job string) error {
	return c.call(ctx, "POST", "/v1/shards/"+url.PathEscape(job)+"/request-checkpoint", CheckpointRequest{Hold: true}, nil)
}
