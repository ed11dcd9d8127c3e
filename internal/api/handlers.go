package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"shoal/internal/job"
	jobpkg "shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// LaunchProtocol is the Upgrade token of POST /v1/launch.
const LaunchProtocol = "shoal-launch/1"

// health answers every caller that the agent is up; only a signed request gets the
// node's name and version.
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	if !authenticated(r) {
		writeJSON(w, http.StatusOK, struct{}{})
		return nil
	}
	writeJSON(w, http.StatusOK, Health{Name: s.cfg.Node.Name(), Version: s.cfg.Version, Node: s.verify.node, User: agentUser()})
	return nil
}

func (s *Server) nodes(w http.ResponseWriter, r *http.Request) error {
	read := s.cfg.Node.Nodes
	switch v := r.URL.Query().Get("voters"); v {
	case "", "0":
	case "1":
		read = s.cfg.Node.Voters
	default:
		return fmt.Errorf("%w: voters=%q: want 1 or 0", ErrBadRequest, v)
	}
	nodes, err := read(r.Context())
	if err != nil {
		return err
	}
	if nodes == nil {
		nodes = []node.Node{}
	}
	writeJSON(w, http.StatusOK, node.List{Nodes: nodes})
	return nil
}

func (s *Server) leave(w http.ResponseWriter, r *http.Request) error {
	var req LeaveRequest
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	if req.Timeout < 0 {
		return fmt.Errorf("%w: timeout %v: want ≥ 0", ErrBadRequest, req.Timeout)
	}
	ctx := r.Context()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout))
		defer cancel()
	}
	if err := s.cfg.Node.Leave(ctx); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, LeaveResponse{Name: s.cfg.Node.Name(), State: "left"})
	return nil
}

func (s *Server) recoverQuorum(w http.ResponseWriter, r *http.Request) error {
	rq, ok := s.cfg.Node.(QuorumRecoverer)
	if !ok {
		return fmt.Errorf("%w: this agent keeps no job store to recover", ErrNotAvailable)
	}
	resp, err := rq.RecoverQuorum(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) error {
	var spec job.Spec
	if err := decodeJSON(r, &spec, false); err != nil {
		return err
	}
	if c := CallerOf(r.Context()); c != nil {
		owner, err := c.JobOwner(spec.Owner)
		if err != nil {
			return err
		}
		spec.Owner = owner
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	job, err := s.jobService().Submit(r.Context(), spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, job)
	return nil
}

// jobID returns the {id} path value, checked.
func jobID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !job.ValidID(id) {
		return "", fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadRequest, id)
	}
	return id, nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	job, err := s.ownedJob(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	if _, err := s.ownedJob(r, id); err != nil {
		return err
	}
	job, err := s.jobService().Cancel(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}

func (s *Server) rebalanceJob(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	var req RebalanceRequest
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	job, err := s.jobService().Rebalance(r.Context(), id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}

func (s *Server) keptDurable(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	var req DurableRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	if err := s.jobService().KeptDurable(r.Context(), id, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) evacuate(w http.ResponseWriter, r *http.Request) error {
	var req EvacuateRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if req.Node == "" {
		return fmt.Errorf("%w: node: want the name of the leaving node", ErrBadRequest)
	}
	if err := s.jobService().Evacuate(r.Context(), req.Node); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// jobEvents streams events as newline-delimited JSON. Once the stream has begun
// an error can no longer change the status; it is sent as a last line
// {"error": ..., "code": ...}.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var from uint64
	if v := q.Get("from"); v != "" {
		if from, err = strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("%w: from=%q: want a sequence number", ErrBadRequest, v)
		}
	}
	follow := false
	if v := q.Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%w: follow=%q: want true or false", ErrBadRequest, v)
		}
	}
	jobs := s.jobService()
	if _, err := s.ownedJob(r, id); err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	enc := json.NewEncoder(w)
	err = jobs.Events(r.Context(), id, from, follow, func(ev job.Event) error {
		if err := enc.Encode(ev); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && r.Context().Err() == nil {
		_, code := statusOf(err)
		enc.Encode(errorBody{Error: err.Error(), Code: code})
	}
	return nil
}

// launch switches the connection to the launch protocol and hands it over.
func (s *Server) launch(w http.ResponseWriter, r *http.Request) error {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), LaunchProtocol) {
		return fmt.Errorf("%w: want headers Connection: Upgrade and Upgrade: %s", ErrBadRequest, LaunchProtocol)
	}
	var req LaunchRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	if c := CallerOf(r.Context()); c != nil && req.To != "" {
		return s.relayLaunch(w, r, c, req)
	} else if req.To != "" {
		return fmt.Errorf("%w: to: a launch names another agent only on the local socket", ErrBadRequest)
	} else if c != nil && !c.Privileged() {
		return fmt.Errorf("%w: %s may launch only through the agent of the job's node (to)", ErrForbidden, c)
	}
	run, err := s.jobService().Launch(r.Context(), req)
	if err != nil {
		return err
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("%w: cannot switch protocols on this connection: %v", ErrInternal, err)
	}
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + LaunchProtocol + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil
	}
	run(&bufferedConn{Conn: conn, r: brw.Reader})
	return nil
}

// relayLaunch starts, on the agent at req.To, a launch that a local caller asked
// for a job of theirs, and carries it between the two once both are switched.
func (s *Server) relayLaunch(w http.ResponseWriter, r *http.Request, c *Caller, req LaunchRequest) error {
	if _, err := s.ownedJob(r, req.Job); err != nil {
		return err
	}
	if s.cfg.Relay == nil {
		return fmt.Errorf("%w: this agent does not pass launches on", ErrNotAvailable)
	}
	to := req.To
	if err := relayTarget(s.cfg.Node.MembersAt(to), to); err != nil {
		return fmt.Errorf("%w (as node %s sees the cluster)", err, s.cfg.Node.Name())
	}
	req.To = ""
	remote, err := s.cfg.Relay(r.Context(), to, req)
	if err != nil {
		return err
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		remote.Close()
		return fmt.Errorf("%w: cannot switch protocols on this connection: %v", ErrInternal, err)
	}
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + LaunchProtocol + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		remote.Close()
		return nil
	}
	relay(&bufferedConn{Conn: conn, r: brw.Reader}, remote)
	return nil
}

func (s *Server) grant(w http.ResponseWriter, r *http.Request) error {
	var req GrantRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ttl := time.Duration(req.TTL)
	if ttl == 0 {
		ttl = DefaultGrantTTL
	}
	var missing []string
	for _, sum := range req.Files {
		ok, err := s.dataService().HasFile(r.Context(), sum)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, sum)
		}
	}
	g, err := s.grantService().Grant(req.Job, req.Coordinator, req.Ranks, ttl, req.Owner)
	if err != nil {
		return err
	}
	g.Missing = missing
	writeJSON(w, http.StatusOK, g)
	return nil
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("job")
	if !job.ValidID(id) {
		return fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadRequest, id)
	}
	rv, err := s.grantService().Revoke(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rv)
	return nil
}

// bufferedConn reads through the bufio.Reader that may already hold bytes the
// client sent after its request.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite ends the sending half only (for TLS, with close_notify), when the
// connection can: the launch protocol's last frame then reaches the client
// before the connection closes.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func fileSum(r *http.Request) (string, error) {
	sum := r.PathValue("sha256")
	if !job.ValidSHA256(sum) {
		return "", fmt.Errorf("%w: %q is not a lower-case hex SHA-256", ErrBadRequest, sum)
	}
	return sum, nil
}

func (s *Server) hasFile(w http.ResponseWriter, r *http.Request) error {
	sum, err := fileSum(r)
	if err != nil {
		return err
	}
	ok, err := s.dataService().HasFile(r.Context(), sum)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: file %s", ErrNotFound, sum)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) error {
	sum, err := fileSum(r)
	if err != nil {
		return err
	}
	rc, size, err := s.dataService().GetFile(r.Context(), sum)
	if err != nil {
		return err
	}
	return sendBytes(w, r, rc, size, "file "+sum)
}

// sendBytes answers r with 200 and size bytes of rc (closed after), as
// application/octet-stream; what names them in an error.
func sendBytes(w http.ResponseWriter, r *http.Request, rc io.ReadCloser, size int64, what string) error {
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if err := copyOut(gathering(w, r), rc); err != nil {
		return fmt.Errorf("sending %s: %w", what, err)
	}
	return nil
}

func (s *Server) putFile(w http.ResponseWriter, r *http.Request) error {
	sum, err := fileSum(r)
	if err != nil {
		return err
	}
	if got := r.Header.Get(HeaderContentSHA256); got != sum {
		return fmt.Errorf("%w: %s %s differs from the file's address %s", ErrBadRequest, HeaderContentSHA256, got, sum)
	}
	if err := s.dataService().PutFile(r.Context(), sum, r.ContentLength, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func shardRef(r *http.Request) (shard.Ref, error) {
	id, e, rk := r.PathValue("job"), r.PathValue("epoch"), r.PathValue("rank")
	if !job.ValidID(id) {
		return shard.Ref{}, fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadRequest, id)
	}
	epoch, err := strconv.ParseUint(e, 10, 64)
	if err != nil || epoch == 0 {
		return shard.Ref{}, fmt.Errorf("%w: epoch %q: want an integer ≥ 1", ErrBadRequest, e)
	}
	rank, err := strconv.Atoi(rk)
	if err != nil || rank < 0 || rank >= job.MaxRanks {
		return shard.Ref{}, fmt.Errorf("%w: rank %q: want an integer from 0", ErrBadRequest, rk)
	}
	return shard.Ref{Job: id, Epoch: epoch, Rank: rank}, nil
}

// shardAndLink reads the shard a request names and its ?link=, the only
// parameter it may have (0 when not given).
func shardAndLink(r *http.Request) (shard.Ref, float64, error) {
	ref, err := shardRef(r)
	if err != nil {
		return shard.Ref{}, 0, err
	}
	if err := noQuery(r, "link"); err != nil {
		return shard.Ref{}, 0, err
	}
	link, err := shardLink(r)
	return ref, link, err
}

// getShard sends a shard, compressed when the receiver gave its link's
// bandwidth, accepts zstd, and the service predicts that compression pays.
func (s *Server) getShard(w http.ResponseWriter, r *http.Request) error {
	ref, link, err := shardAndLink(r)
	if err != nil {
		return err
	}
	what := "shard " + ref.String()
	svc := s.shardService()
	sender, ok := svc.(ShardSender)
	if ok && link > 0 && headerHasToken(r.Header, "Accept-Encoding", EncodingZstd) {
		rc, size, compress, err := sender.OpenShardToSend(r.Context(), ref, link)
		if err != nil {
			return err
		}
		if compress {
			return sendZstd(w, r, rc, size, what)
		}
		return sendBytes(w, r, rc, size, what)
	}
	rc, size, err := svc.GetShard(r.Context(), ref)
	if err != nil {
		return err
	}
	return sendBytes(w, r, rc, size, what)
}

func (s *Server) putShard(w http.ResponseWriter, r *http.Request) error {
	ref, err := shardRef(r)
	if err != nil {
		return err
	}
	if err := s.shardService().PutShard(r.Context(), ref, r.ContentLength, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pathJob returns the {job} path value, checked.
func pathJob(r *http.Request) (string, error) {
	id := r.PathValue("job")
	if !job.ValidID(id) {
		return "", fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadRequest, id)
	}
	return id, nil
}

// noQuery rejects query parameters a route does not take, so that a typo is
// an error rather than a default.
func noQuery(r *http.Request, allowed ...string) error {
	for k := range r.URL.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			if len(allowed) == 0 {
				return fmt.Errorf("%w: unknown query parameter %q: %s %s takes none", ErrBadRequest, k, r.Method, r.URL.Path)
			}
			return fmt.Errorf("%w: unknown query parameter %q: want %s", ErrBadRequest, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func (s *Server) listShards(w http.ResponseWriter, r *http.Request) error {
	job, err := pathJob(r)
	if err != nil {
		return err
	}
	if err := noQuery(r, "wait", "known"); err != nil {
		return err
	}
	wait, known, err := shardWait(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if wait > 0 && known != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
		// A server shutting down answers at once: its Shutdown waits for
		// requests in progress, and a wait would hold it up to its end.
		defer context.AfterFunc(s.closing, cancel)()
	} else {
		known = "" // nothing to wait for: answer at once
	}
	idx, err := s.shardService().Shards(ctx, job, known)
	if err != nil {
		return err
	}
	idx.Job = job
	if idx.Shards == nil {
		idx.Shards = []shard.Info{}
	}
	if idx.Bad == nil {
		idx.Bad = []shard.Bad{}
	}
	writeJSON(w, http.StatusOK, idx)
	return nil
}

// shardWait reads ?wait=DURATION&known=TAG of GET /v1/shards/{job}: how long
// the answer may wait for the index to change from the one tagged known.
func shardWait(r *http.Request) (time.Duration, string, error) {
	q := r.URL.Query()
	known := q.Get("known")
	if !q.Has("wait") {
		return 0, known, nil
	}
	v := q.Get("wait")
	wait, err := time.ParseDuration(v)
	if err != nil || wait < 0 || wait > MaxShardWait {
		return 0, "", fmt.Errorf("%w: wait=%q: want a duration from 0s to %v (such as 30s)", ErrBadRequest, v, MaxShardWait)
	}
	return wait, known, nil
}

func (s *Server) fetchShard(w http.ResponseWriter, r *http.Request) error {
	ref, err := shardRef(r)
	if err != nil {
		return err
	}
	var req FetchRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	f, err := s.shardService().FetchShard(r.Context(), ref, req.From)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) rebuildShard(w http.ResponseWriter, r *http.Request) error {
	ref, err := shardRef(r)
	if err != nil {
		return err
	}
	var req RebuildRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if err := req.Validate(ref.Rank); err != nil {
		return err
	}
	f, err := s.shardService().RebuildShard(r.Context(), ref, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

// pathEpoch returns the {job} and {epoch} path values, checked.
func pathEpoch(r *http.Request) (string, uint64, error) {
	job, err := pathJob(r)
	if err != nil {
		return "", 0, err
	}
	e := r.PathValue("epoch")
	epoch, err := strconv.ParseUint(e, 10, 64)
	if err != nil || epoch == 0 {
		return "", 0, fmt.Errorf("%w: epoch %q: want an integer ≥ 1", ErrBadRequest, e)
	}
	return job, epoch, nil
}

func (s *Server) encodeParity(w http.ResponseWriter, r *http.Request) error {
	job, epoch, err := pathEpoch(r)
	if err != nil {
		return err
	}
	var req EncodeRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	info, err := s.shardService().EncodeParity(r.Context(), job, epoch, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// parityRef returns the parity row a request's path names, checked.
func parityRef(r *http.Request) (shard.ParityRef, error) {
	id, epoch, err := pathEpoch(r)
	if err != nil {
		return shard.ParityRef{}, err
	}
	g, rw := r.PathValue("group"), r.PathValue("row")
	group, gerr := strconv.Atoi(g)
	row, rerr := strconv.Atoi(rw)
	if gerr != nil || group < 0 || rerr != nil || row < 0 || row >= job.MaxParity {
		return shard.ParityRef{}, fmt.Errorf("%w: parity %s/%s: want a group ≥ 0 and a row from 0 to %d", ErrBadRequest, g, rw, job.MaxParity-1)
	}
	return shard.ParityRef{Job: id, Epoch: epoch, Group: group, Row: row}, nil
}

func (s *Server) putParity(w http.ResponseWriter, r *http.Request) error {
	ref, err := parityRef(r)
	if err != nil {
		return err
	}
	info, err := s.shardService().PutParity(r.Context(), ref, r.ContentLength, r.Body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) getParity(w http.ResponseWriter, r *http.Request) error {
	ref, err := parityRef(r)
	if err != nil {
		return err
	}
	rc, size, err := s.shardService().GetParity(r.Context(), ref)
	if err != nil {
		return err
	}
	return sendBytes(w, r, rc, size, "parity "+ref.String())
}

// removeShards deletes epochs older than ?before=E, or the whole job without it.
func (s *Server) removeShards(w http.ResponseWriter, r *http.Request) error {
	job, err := pathJob(r)
	if err != nil {
		return err
	}
	if err := noQuery(r, "before"); err != nil {
		return err
	}
	var before uint64
	q := r.URL.Query()
	if q.Has("before") {
		v := q.Get("before")
		if before, err = strconv.ParseUint(v, 10, 64); err != nil || before == 0 {
			return fmt.Errorf("%w: before=%q: want an epoch ≥ 1 (omit it to remove every epoch)", ErrBadRequest, v)
		}
	}
	removed, err := s.shardService().RemoveShards(r.Context(), job, before)
	if err != nil {
		return err
	}
	if removed == nil {
		removed = []uint64{}
	}
	writeJSON(w, http.StatusOK, ShardsRemoved{Job: job, Removed: removed})
	return nil
}

func (s *Server) requestCheckpoint(w http.ResponseWriter, r *http.Request) error {
	job, err := pathJob(r)
	if err != nil {
		return err
	}
	var req CheckpointRequest
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	request := s.shardService().RequestCheckpoint
	if req.Hold {
		request = s.shardService().RequestHold
	}
	if err := request(r.Context(), job); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// MaxProbe bounds ProbeRequest.Bytes: 1 GiB.
const MaxProbe = 1 << 30

func (s *Server) probe(w http.ResponseWriter, r *http.Request) error {
	job, err := pathJob(r)
	if err != nil {
		return err
	}
	var req ProbeRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if req.Bytes < 1 || req.Bytes > MaxProbe {
		return fmt.Errorf("%w: bytes = %d: want 1 to %d", ErrBadRequest, req.Bytes, MaxProbe)
	}
	p, err := s.shardService().Probe(r.Context(), job, req.Bytes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) rankStates(w http.ResponseWriter, r *http.Request) error {
	job, err := pathJob(r)
	if err != nil {
		return err
	}
	ranks, err := s.shardService().RankStates(r.Context(), job)
	if err != nil {
		return err
	}
	if ranks == nil {
		ranks = []jobpkg.RankState{}
	}
	writeJSON(w, http.StatusOK, RankStates{Job: job, Ranks: ranks})
	return nil
}
