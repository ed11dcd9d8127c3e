package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/errkind"
	"shoal/internal/job"
	jobpkg "shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
	"shoal/test/poll"
)

type fakeNode struct {
	mu     sync.Mutex
	leaves int
}

func (f *fakeNode) Name() string { return "n1" }
func (f *fakeNode) Nodes(context.Context) ([]node.Node, error) {
	return []node.Node{
		{Name: "n1", API: "127.0.0.1:7947", Cores: 4, State: "alive", Local: true, Ranks: 3, Role: node.RoleLeader},
		{Name: "n2", API: "127.0.0.2:7947", Cores: 2, State: "dead"},
	}, nil
}
func (f *fakeNode) Voters(ctx context.Context) ([]node.Node, error) {
	nodes, _ := f.Nodes(ctx)
	return nodes[:1], nil
}
func (f *fakeNode) MembersAt(api string) []node.Node {
	nodes, _ := f.Nodes(context.Background())
	return slices.DeleteFunc(nodes, func(n node.Node) bool { return n.API != api })
}
func (f *fakeNode) Leave(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaves++
	return nil
}

// fakeJobs knows one job, "j1", with three events.
type fakeJobs struct{ Unavailable }

func (fakeJobs) Submit(_ context.Context, spec job.Spec) (job.Job, error) {
	return job.Job{ID: "j2", State: job.Pending, Spec: spec}, nil
}
func (fakeJobs) Job(_ context.Context, id string) (job.Job, error) {
	if id != "j1" {
		return job.Job{}, fmt.Errorf("%w: job %s", ErrNotFound, id)
	}
	return job.Job{ID: "j1", State: job.Running}, nil
}
func (fakeJobs) Cancel(_ context.Context, id string) (job.Job, error) {
	return job.Job{}, fmt.Errorf("%w: job %s has already ended", ErrConflict, id)
}
func (fakeJobs) Events(_ context.Context, id string, from uint64, follow bool, send func(job.Event) error) error {
	for seq := max(from, 1); seq <= 3; seq++ {
		if err := send(job.Event{Seq: seq, Job: id, Type: "state"}); err != nil {
			return err
		}
	}
	if follow {
		return errors.New("coordinator lost its state")
	}
	return nil
}
func (fakeJobs) Launch(_ context.Context, req LaunchRequest) (func(io.ReadWriteCloser), error) {
	if req.Job != "j1" {
		return nil, fmt.Errorf("%w: job %s was not created by a coordinator", ErrNotFound, req.Job)
	}
	return func(conn io.ReadWriteCloser) { // echo one line in upper case
		defer conn.Close()
		line, _ := bufio.NewReader(conn).ReadString('\n')
		io.WriteString(conn, strings.ToUpper(line))
	}, nil
}

// fakeData is both the file store and the checkpoint store; it records the
// arguments of the shard primitives.
type fakeData struct {
	Unavailable
	mu     sync.Mutex
	files  map[string][]byte
	shards map[shard.Ref][]byte
	calls  []string
	// index is what Shards lists; changed is closed when it changes.
	index   shard.Index
	changed chan struct{}
}

// setIndex replaces the shard index and wakes the Shards calls waiting for a change.
func (f *fakeData) setIndex(idx shard.Index) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index = idx
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeData) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}
func (f *fakeData) Shards(ctx context.Context, job, known string) (shard.Index, error) {
	f.record("index %s known=%q", job, known)
	for {
		f.mu.Lock()
		idx, changed := f.index, f.changed
		f.mu.Unlock()
		idx.Tag = idx.ComputeTag()
		if known == "" || idx.Tag != known {
			return idx, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			f.record("index %s: wait ended", job)
			return idx, nil
		}
	}
}
func (f *fakeData) FetchShard(_ context.Context, ref shard.Ref, from string) (Fetched, error) {
	f.record("fetch %s from %s", ref, from)
	if from == "10.9.9.9:7947" {
		return Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: connection refused", ErrBadGateway, ref, from)
	}
	return Fetched{Shard: shard.Info{Epoch: ref.Epoch, Rank: ref.Rank}, Copied: true}, nil
}
func (f *fakeData) RemoveShards(_ context.Context, job string, before uint64) ([]uint64, error) {
	f.record("remove %s before %d", job, before)
	return []uint64{1, 2}, nil
}
func (f *fakeData) RequestHold(ctx context.Context, job string) error {
	return f.RequestCheckpoint(ctx, job)
}

func (f *fakeData) RequestCheckpoint(_ context.Context, job string) error {
	f.record("request %s", job)
	return nil
}
func (f *fakeData) RankStates(_ context.Context, job string) ([]jobpkg.RankState, error) {
	f.record("ranks %s", job)
	return []jobpkg.RankState{{Rank: 0, PID: 10, State: "running"}, {Rank: 1, PID: 11, State: "signaled", Signal: 9, TimeNs: 5}}, nil
}

func (f *fakeData) HasFile(_ context.Context, sum string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.files[sum]
	return ok, nil
}
func (f *fakeData) GetFile(_ context.Context, sum string) (io.ReadCloser, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[sum]
	if !ok {
		return nil, 0, fmt.Errorf("%w: file %s", ErrNotFound, sum)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}
func (f *fakeData) PutFile(_ context.Context, sum string, size int64, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[sum] = b
	return nil
}
func (f *fakeData) GetShard(_ context.Context, ref shard.Ref) (io.ReadCloser, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.shards[ref]
	if !ok {
		return nil, 0, fmt.Errorf("%w: shard %s", ErrNotFound, ref)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}
func (f *fakeData) PutShard(_ context.Context, ref shard.Ref, size int64, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards[ref] = b
	return nil
}

// fakeGrants records grants and revokes.
type fakeGrants struct {
	mu     sync.Mutex
	grants map[string]time.Duration
}

func (f *fakeGrants) Grant(job, coordinator string, ranks int, ttl time.Duration, owner *job.Owner) (Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants[job] = ttl
	return Grant{Job: job, Coordinator: coordinator, Ranks: ranks, Expires: time.Unix(1700000000, 0).UTC().Add(ttl)}, nil
}

func (f *fakeGrants) Revoke(job string) (Revoked, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.grants[job]
	delete(f.grants, job)
	if ok {
		return Revoked{Job: job, Killed: 2}, nil
	}
	return Revoked{Job: job}, nil
}

// newTestServer runs a server on loopback; plug says whether the fake job and
// data services are plugged in.
func newTestServer(t *testing.T, plug bool) (*Server, *httptest.Server, *fakeNode) {
	t.Helper()
	node := &fakeNode{}
	s := NewServer(ServerConfig{Node: node, Secret: testSecret, Version: "test", MaxBody: 4096})
	if plug {
		s.SetJobService(fakeJobs{})
		data := &fakeData{files: map[string][]byte{}, shards: map[shard.Ref][]byte{}, changed: make(chan struct{}),
			index: shard.Index{Shards: []shard.Info{{Epoch: 3, Rank: 5, NRanks: 8, Size: 5, CreatedNs: 7, Checksum: 1<<63 + 1}}}}
		s.SetDataService(data)
		s.SetShardService(data)
		s.SetGrantService(&fakeGrants{grants: map[string]time.Duration{}})
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts, node
}

// TestRequestsBoundToAgentRun: a request signed for one run of an agent is
// refused, 421, by its next run (and so by any other agent), even unused; a
// client whose agent restarted learns the new run and sends its request again.
func TestRequestsBoundToAgentRun(t *testing.T) {
	_, ts, _ := newTestServer(t, true)
	ctx := context.Background()
	c := NewClient(ts.URL, testSecret)
	if _, err := c.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	old := nodeOf(t, ts)
	captured, _ := http.NewRequest("GET", ts.URL+"/v1/nodes", nil)
	Sign(captured, DeriveAuthKey(testSecret), old, EmptySHA256, time.Now())

	restarted, _, _ := newTestServer(t, true) // the same node, started again
	ts.Config.Handler = restarted
	resp, err := http.DefaultClient.Do(captured)
	if err != nil {
		t.Fatal(err)
	}
	var eb errorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || eb.Code != "misdirected" || !strings.Contains(eb.Error, old) {
		t.Errorf("a request signed for the agent's earlier run: %d %+v, want 421 misdirected naming %s", resp.StatusCode, eb, old)
	}
	if _, err := c.Nodes(ctx); err != nil {
		t.Errorf("Nodes after the agent restarted: %v, want the request signed again and answered", err)
	}
	again, _, _ := newTestServer(t, true)
	ts.Config.Handler = again
	if _, err := c.Grant(ctx, GrantRequest{Job: "j", Coordinator: "n1", Ranks: 1, TTL: job.Duration(time.Minute)}); err != nil {
		t.Errorf("Grant (a request with a body) after the agent restarted again: %v", err)
	}
	if now := nodeOf(t, ts); now == old {
		t.Errorf("the restarted agent kept its run %s", old)
	}
}

// nodeOf asks the agent at ts who it is, as a client does first.
func nodeOf(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	h, err := NewClient(ts.URL, testSecret).Health(context.Background())
	if err != nil || h.Node == "" {
		t.Fatalf("health: %+v, %v", h, err)
	}
	return h.Node
}

// raw sends a request signed with secret (nil: unsigned) and returns the status
// and the decoded error body.
func raw(t *testing.T, ts *httptest.Server, secret []byte, method, path, body string) (int, errorBody) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != nil {
		h := sha256.Sum256([]byte(body))
		Sign(req, DeriveAuthKey(secret), nodeOf(t, ts), hex.EncodeToString(h[:]), time.Now())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb errorBody
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 && method != "HEAD" {
		if err := json.Unmarshal(b, &eb); err != nil || eb.Error == "" || eb.Code == "" {
			t.Errorf("%s %s: status %d body %q is not {\"error\": ..., \"code\": ...}", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, eb
}

func TestErrors(t *testing.T) {
	_, ts, _ := newTestServer(t, false)
	big := `{"ranks": 1, "argv": ["x"], "env": {"A": "` + strings.Repeat("x", 5000) + `"}}`
	tests := []struct {
		name         string
		secret       []byte
		method, path string
		body         string
		status       int
		want         string // substring of the error message
	}{
		{"unsigned", nil, "GET", "/v1/nodes", "", 401, "must be signed"},
		{"wrong secret", wrongSecret, "GET", "/v1/nodes", "", 401, "wrong cluster secret?"},
		{"unsigned unknown route", nil, "GET", "/v1/secret-things", "", 401, "must be signed"},
		{"unknown route", testSecret, "GET", "/v1/nope", "", 404, "no route GET /v1/nope"},
		{"unknown version", testSecret, "GET", "/v2/nodes", "", 404, "no route"},
		{"wrong method", testSecret, "PUT", "/v1/nodes", "", 405, "allowed: GET"},
		{"malformed JSON", testSecret, "POST", "/v1/jobs", `{"ranks": 2,`, 400, "malformed JSON"},
		{"bad syntax", testSecret, "POST", "/v1/jobs", `{"ranks": x}`, 400, "malformed JSON at byte"},
		{"unknown field", testSecret, "POST", "/v1/jobs", `{"rank": 2}`, 400, `unknown field "rank"`},
		{"wrong type", testSecret, "POST", "/v1/jobs", `{"ranks": "2"}`, 400, `field "ranks": want int`},
		{"empty body", testSecret, "POST", "/v1/jobs", ``, 400, "empty body"},
		{"trailing data", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"]} {}`, 400, "data after the object"},
		{"bad duration", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"], "wait_for_nodes": "soon"}`, 400, `"30s", got "soon"`},
		{"invalid spec", testSecret, "POST", "/v1/jobs", `{"ranks": 0, "argv": ["x"], "engine": "lam"}`, 400, "ranks 0"},
		{"invalid spec lists all", testSecret, "POST", "/v1/jobs", `{"ranks": 0, "argv": ["x"], "engine": "lam"}`, 400, `engine "lam"`},
		{"too many ranks", testSecret, "POST", "/v1/jobs", `{"ranks": 65537, "argv": ["x"]}`, 400, "ranks 65537: want 1 to 65536"},
		{"the old bound of ranks", testSecret, "POST", "/v1/jobs", `{"ranks": 1048576, "argv": ["x"]}`, 400, "ranks 1048576: want 1 to 65536"},
		{"oversubscription too high", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"], "max_oversubscribe": 65}`, 400, "max_oversubscribe 65: want 0 (the default, 1) or more, up to 64 ranks per core"},
		{"oversubscription negative", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"], "max_oversubscribe": -0.5}`, 400, "max_oversubscribe -0.5"},
		{"ranks per node negative", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"], "ranks_per_node": -1}`, 400, "ranks_per_node -1: want 0 (no bound) to 65536"},
		{"oversubscription huge", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"], "max_oversubscribe": 1e300}`, 400, "max_oversubscribe 1e+300"},
		{"unknown engine", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"], "engine": "lam"}`, 400, `engine "lam": want openmpi or mpich`},
		{"job id with a slash", testSecret, "POST", "/v1/jobs", `{"id": "a/b", "ranks": 1, "argv": ["x"]}`, 400, `id "a/b"`},
		{"bad file name", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"], "files": [{"name": "../etc/passwd", "sha256": "` + EmptySHA256 + `"}]}`, 400, "files[0].name"},
		{"too large", testSecret, "POST", "/v1/jobs", big, 413, "larger than 4096 bytes"},
		{"no coordinator", testSecret, "POST", "/v1/jobs", `{"ranks": 1, "argv": ["x"]}`, 503, "no job coordinator"},
		{"bad job id", testSecret, "GET", "/v1/jobs/a%20b", "", 400, "job id"},
		{"bad leave body", testSecret, "POST", "/v1/leave", `{"timeout": 5}`, 400, "duration"},
		{"bad file hash", testSecret, "PUT", "/v1/files/abc", "x", 400, "not a lower-case hex SHA-256"},
		{"no file store", testSecret, "HEAD", "/v1/files/" + EmptySHA256, "", 503, ""},
		{"bad shard epoch", testSecret, "GET", "/v1/shards/j1/0/1", "", 400, "epoch"},
		{"bad shard rank", testSecret, "GET", "/v1/shards/j1/1/-1", "", 400, "rank"},
		{"no shard store", testSecret, "GET", "/v1/shards/j1/1/0", "", 503, "no checkpoint store"},
		{"index bad job", testSecret, "GET", "/v1/shards/a%20b", "", 400, "job id"},
		{"index query", testSecret, "GET", "/v1/shards/j1?epoch=3", "", 400, `unknown query parameter "epoch"`},
		{"index wait too long", testSecret, "GET", "/v1/shards/j1?wait=2m&known=x", "", 400, "want a duration from 0s to 1m0s"},
		{"index wait negative", testSecret, "GET", "/v1/shards/j1?wait=-1s&known=x", "", 400, `wait="-1s"`},
		{"index wait junk", testSecret, "GET", "/v1/shards/j1?wait=soon&known=x", "", 400, `wait="soon"`},
		{"index unplugged", testSecret, "GET", "/v1/shards/j1", "", 503, "no checkpoint store"},
		{"fetch no body", testSecret, "POST", "/v1/shards/j1/1/0/fetch", "", 400, "empty body"},
		{"fetch bad from", testSecret, "POST", "/v1/shards/j1/1/0/fetch", `{"from": "n2"}`, 400, `from "n2": want`},
		{"fetch bad port", testSecret, "POST", "/v1/shards/j1/1/0/fetch", `{"from": "10.0.0.2:0"}`, 400, "HOST:PORT"},
		{"fetch unknown field", testSecret, "POST", "/v1/shards/j1/1/0/fetch", `{"source": "10.0.0.2:7947"}`, 400, `unknown field "source"`},
		{"fetch bad epoch", testSecret, "POST", "/v1/shards/j1/x/0/fetch", `{"from": "10.0.0.2:7947"}`, 400, "epoch"},
		{"fetch wrong method", testSecret, "GET", "/v1/shards/j1/1/0/fetch", "", 405, "allowed: POST"},
		{"changes no body", testSecret, "POST", "/v1/shards/j1/1/0/changes", "", 400, "empty body"},
		{"changes block size", testSecret, "POST", "/v1/shards/j1/1/0/changes", `{"block_size": 4096, "sums": []}`, 400, "blocks of 262144 bytes"},
		{"changes bad sum", testSecret, "POST", "/v1/shards/j1/1/0/changes", `{"block_size": 262144, "sums": ["12ab"]}`, 400, `sum 0 is "12ab": want 16 hex digits`},
		{"changes bad link", testSecret, "POST", "/v1/shards/j1/1/0/changes?link=0", `{"block_size": 262144, "sums": []}`, 400, "link=\"0\""},
		{"changes unknown query", testSecret, "POST", "/v1/shards/j1/1/0/changes?base=3", `{"block_size": 262144, "sums": []}`, 400, `unknown query parameter "base"`},
		{"remove before 0", testSecret, "DELETE", "/v1/shards/j1?before=0", "", 400, "before=\"0\""},
		{"remove before junk", testSecret, "DELETE", "/v1/shards/j1?before=new", "", 400, "want an epoch"},
		{"remove typo", testSecret, "DELETE", "/v1/shards/j1?befor=3", "", 400, `unknown query parameter "befor"`},
		{"remove bad job", testSecret, "DELETE", "/v1/shards/a%20b", "", 400, "job id"},
		{"request body", testSecret, "POST", "/v1/shards/j1/request-checkpoint", `{"now": true}`, 400, `unknown field "now"`},
		{"request unplugged", testSecret, "POST", "/v1/shards/j1/request-checkpoint", "", 503, "no checkpoint store"},
		{"probe of nothing", testSecret, "POST", "/v1/shards/j1/probe", `{"bytes": 0}`, 400, "bytes = 0: want 1 to 1073741824"},
		{"probe too large", testSecret, "POST", "/v1/shards/j1/probe", `{"bytes": 1073741825}`, 400, "bytes = 1073741825"},
		{"probe without a body", testSecret, "POST", "/v1/shards/j1/probe", ``, 400, "empty body"},
		{"probe unplugged", testSecret, "POST", "/v1/shards/j1/probe", `{"bytes": 1}`, 503, "no checkpoint store"},
		{"ranks bad job", testSecret, "GET", "/v1/grants/a%2Fb/ranks", "", 400, "job id"},
		{"ranks unplugged", testSecret, "GET", "/v1/grants/j1/ranks", "", 503, "no checkpoint store"},
		{"unsigned index", nil, "GET", "/v1/shards/j1", "", 401, "must be signed"},
		{"unsigned fetch", nil, "POST", "/v1/shards/j1/1/0/fetch", `{"from": "10.0.0.2:7947"}`, 401, "must be signed"},
		{"unsigned remove", nil, "DELETE", "/v1/shards/j1", "", 401, "must be signed"},
		{"unsigned request", nil, "POST", "/v1/shards/j1/request-checkpoint", "", 401, "must be signed"},
		{"unsigned ranks", nil, "GET", "/v1/grants/j1/ranks", "", 401, "must be signed"},
		{"wrong secret fetch", wrongSecret, "POST", "/v1/shards/j1/1/0/fetch", `{"from": "10.0.0.2:7947"}`, 401, "wrong cluster secret?"},
		{"events bad from", testSecret, "GET", "/v1/jobs/j1/events?from=x", "", 400, "from="},
		{"no launch service", testSecret, "POST", "/v1/grants", `{"job": "j1", "coordinator": "n1", "ranks": 1}`, 503, "no launch service"},
		{"grant bad fields", testSecret, "POST", "/v1/grants", `{"job": "a/b", "coordinator": "", "ttl": "-1s"}`, 400, `job "a/b"`},
		{"grant lists all", testSecret, "POST", "/v1/grants", `{"job": "a/b", "coordinator": "", "ttl": "-1s"}`, 400, `ttl -1s`},
		{"grant unknown field", testSecret, "POST", "/v1/grants", `{"job": "j1", "coordinator": "n1", "tll": "1m"}`, 400, `unknown field "tll"`},
		{"grant bad ttl", testSecret, "POST", "/v1/grants", `{"job": "j1", "coordinator": "n1", "ttl": 60}`, 400, "duration"},
		{"revoke bad job", testSecret, "DELETE", "/v1/grants/a%20b", "", 400, "job id"},
		{"revoke unplugged", testSecret, "DELETE", "/v1/grants/j1", "", 503, "no launch service"},
		{"grant wrong method", testSecret, "GET", "/v1/grants", "", 405, "allowed: POST"},
	}
	for _, tt := range tests {
		status, eb := raw(t, ts, tt.secret, tt.method, tt.path, tt.body)
		if status != tt.status || !strings.Contains(eb.Error, tt.want) {
			t.Errorf("%s: %s %s = %d %q, want %d containing %q", tt.name, tt.method, tt.path, status, eb.Error, tt.status, tt.want)
		}
	}
}

func TestTamperedBodyRejected(t *testing.T) {
	_, ts, _ := newTestServer(t, true)
	req, _ := http.NewRequest("POST", ts.URL+"/v1/jobs", strings.NewReader(`{"ranks": 64, "argv": ["rm"]}`))
	h := sha256.Sum256([]byte(`{"ranks": 1, "argv": ["ok"]}`))
	Sign(req, DeriveAuthKey(testSecret), nodeOf(t, ts), hex.EncodeToString(h[:]), time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("tampered body: status %d, want 401", resp.StatusCode)
	}
	// Streamed uploads are checked as they are read: the store sees an error.
	c := NewClient(ts.URL, testSecret)
	good := []byte("program bytes")
	sum := sha256.Sum256(good)
	err = c.PutFile(context.Background(), hex.EncodeToString(sum[:]), strings.NewReader("program bytez"), int64(len(good)))
	if !errors.Is(err, ErrUnauthorized) {
		t.Errorf("PutFile with tampered content: error = %v, want ErrUnauthorized", err)
	}
}

func TestClient(t *testing.T) {
	_, ts, node := newTestServer(t, true)
	ctx := context.Background()
	c := NewClient(ts.URL, testSecret)

	h, err := c.Health(ctx)
	if err != nil || h.Name != "n1" || h.Version != "test" || !regexp.MustCompile(`^n1/[0-9a-f]{16}$`).MatchString(h.Node) {
		t.Errorf("Health = %+v, %v; want n1, test, n1/ and 16 hex digits", h, err)
	}
	if h.User == nil || h.User.UID != os.Getuid() || h.User.GID != os.Getgid() {
		t.Errorf("Health.User = %+v, want the agent's user, uid %d gid %d", h.User, os.Getuid(), os.Getgid())
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 2 || nodes[0].Ranks != 3 || nodes[1].State != "dead" {
		t.Errorf("Nodes = %+v, %v; want n1 with 3 ranks and n2 dead", nodes, err)
	}
	if voters, err := c.Voters(ctx); err != nil || len(voters) != 1 || voters[0].Name != "n1" {
		t.Errorf("Voters = %+v, %v; want n1, the leader, alone", voters, err)
	}
	var e *Error
	if err := c.call(ctx, "GET", "/v1/nodes?voters=yes", nil, nil); !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(err.Error(), `voters="yes"`) {
		t.Errorf("GET /v1/nodes?voters=yes: %v, want 400 naming the value", err)
	}
	if lr, err := c.Leave(ctx, 0); err != nil || lr.State != "left" || node.leaves != 1 {
		t.Errorf("Leave = %+v, %v (leaves %d)", lr, err, node.leaves)
	}
	submitted, err := c.Submit(ctx, job.Spec{Ranks: 2, Argv: []string{"./heat"}, CheckpointInterval: job.Duration(30 * time.Second)})
	if err != nil || submitted.ID != "j2" || submitted.Spec.CheckpointInterval != job.Duration(30*time.Second) {
		t.Errorf("Submit = %+v, %v", submitted, err)
	}
	if _, err := c.Job(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Job(nope) error = %v, want ErrNotFound", err)
	}
	if _, err := c.Cancel(ctx, "j1"); !errors.Is(err, ErrConflict) {
		t.Errorf("Cancel error = %v, want ErrConflict", err)
	}

	// Events: from 2 without follow gives 2 and 3; with follow, the error line.
	es, err := c.Events(ctx, "j1", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for {
		ev, err := es.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ev.Seq)
	}
	es.Close()
	if fmt.Sprint(seqs) != "[2 3]" {
		t.Errorf("events from 2 = %v, want [2 3]", seqs)
	}
	es, _ = c.Events(ctx, "j1", 3, true)
	if ev, err := es.Next(); err != nil || ev.Seq != 3 {
		t.Errorf("first followed event = %+v, %v", ev, err)
	}
	if _, err := es.Next(); !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "lost its state") {
		t.Errorf("stream end = %v, want the server's error", err)
	}
	es.Close()
	if _, err := c.Events(ctx, "j9", 0, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("events of unknown job: error = %v, want ErrNotFound before streaming", err)
	}

	// Launch switches protocols and hands the connection over.
	conn, err := c.Launch(ctx, LaunchRequest{Job: "j1", Argv: []string{"orted"}})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "hello\n")
	got, _ := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if got != "HELLO\n" {
		t.Errorf("launch echo = %q, want HELLO", got)
	}
	if _, err := c.Launch(ctx, LaunchRequest{Job: "j7", Argv: []string{"orted"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("launch for an unknown job: error = %v, want ErrNotFound", err)
	}

	// Files and shards.
	content := []byte("#!/bin/sh\necho hi\n")
	sum := sha256.Sum256(content)
	hexSum := hex.EncodeToString(sum[:])
	if ok, err := c.HasFile(ctx, hexSum); ok || err != nil {
		t.Errorf("HasFile before upload = %v, %v", ok, err)
	}
	if err := c.PutFile(ctx, hexSum, bytes.NewReader(content), int64(len(content))); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.HasFile(ctx, hexSum); !ok || err != nil {
		t.Errorf("HasFile after upload = %v, %v", ok, err)
	}
	if rc, size, err := c.GetFile(ctx, hexSum); err != nil {
		t.Errorf("GetFile after upload: %v", err)
	} else {
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, content) || size != int64(len(content)) {
			t.Errorf("GetFile = %q (%d bytes), want the uploaded content", got, size)
		}
	}
	if _, _, err := c.GetFile(ctx, strings.Repeat("0", 64)); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile of a missing file: %v, want ErrNotFound", err)
	}
	ref := shard.Ref{Job: "j1", Epoch: 3, Rank: 5}
	if err := c.PutShard(ctx, ref, bytes.NewReader([]byte("shard"))); err != nil {
		t.Fatal(err)
	}
	rc, size, err := c.GetShard(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "shard" || size != 5 {
		t.Errorf("GetShard = %q (%d bytes), want shard", b, size)
	}
	if _, _, err := c.GetShard(ctx, shard.Ref{Job: "j1", Epoch: 1, Rank: 0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetShard of a missing shard: %v, want ErrNotFound", err)
	}
}

// TestShardRoutes checks that the shard primitives reach the service with their
// arguments and that the client decodes the answers.
func TestShardRoutes(t *testing.T) {
	s, ts, _ := newTestServer(t, true)
	data := s.shardService().(*fakeData)
	ctx := context.Background()
	c := NewClient(ts.URL, testSecret)

	idx, err := c.Shards(ctx, "j1")
	want := shard.Info{Epoch: 3, Rank: 5, NRanks: 8, Size: 5, CreatedNs: 7, Checksum: 1<<63 + 1}
	if err != nil || idx.Job != "j1" || len(idx.Shards) != 1 || !reflect.DeepEqual(idx.Shards[0], want) || idx.Bad == nil {
		t.Errorf("Shards = %+v, %v", idx, err)
	}
	ref := shard.Ref{Job: "j1", Epoch: 4, Rank: 2}
	if f, err := c.FetchShard(ctx, ref, "10.0.0.2:7947"); err != nil || !f.Copied || f.Shard.Epoch != 4 || f.Shard.Rank != 2 {
		t.Errorf("FetchShard = %+v, %v", f, err)
	}
	_, err = c.FetchShard(ctx, ref, "10.9.9.9:7947")
	var e *Error
	if !errors.As(err, &e) || e.Status != 502 || e.Code != "bad_gateway" || !errors.Is(err, ErrBadGateway) || !strings.Contains(err.Error(), "10.9.9.9") {
		t.Errorf("FetchShard from a dead node: %#v, want a 502 bad_gateway naming it", err)
	}
	if removed, err := c.RemoveShardsBefore(ctx, "j1", 7); err != nil || fmt.Sprint(removed) != "[1 2]" {
		t.Errorf("RemoveShardsBefore = %v, %v", removed, err)
	}
	if _, err := c.RemoveJobShards(ctx, "j1"); err != nil {
		t.Errorf("RemoveJobShards: %v", err)
	}
	if _, err := c.RemoveShardsBefore(ctx, "j1", 0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("RemoveShardsBefore(0): %v, want ErrBadRequest", err)
	}
	if err := c.RequestCheckpoint(ctx, "j1"); err != nil {
		t.Errorf("RequestCheckpoint: %v", err)
	}
	ranks, err := c.RankStates(ctx, "j1")
	if err != nil || len(ranks) != 2 || ranks[1] != (jobpkg.RankState{Rank: 1, PID: 11, State: "signaled", Signal: 9, TimeNs: 5}) {
		t.Errorf("RankStates = %+v, %v", ranks, err)
	}
	wantCalls := []string{`index j1 known=""`, "fetch j1/4/2 from 10.0.0.2:7947", "fetch j1/4/2 from 10.9.9.9:7947",
		"remove j1 before 7", "remove j1 before 0", "request j1", "ranks j1"}
	if fmt.Sprint(data.calls) != fmt.Sprint(wantCalls) {
		t.Errorf("service calls:\n got %q\nwant %q", data.calls, wantCalls)
	}
}

// TestShardsLongPoll: GET /v1/shards/{job}?wait=&known= answers at once when the
// index is not the one tagged known, and otherwise once it changes or the wait
// has passed; without both parameters it never waits.
func TestShardsLongPoll(t *testing.T) {
	s, ts, _ := newTestServer(t, true)
	data := s.shardService().(*fakeData)
	ctx := context.Background()
	c := NewClient(ts.URL, testSecret)

	first, err := c.Shards(ctx, "j1")
	if err != nil || first.Tag == "" || first.Tag != first.ComputeTag() {
		t.Fatalf("Shards = %+v, %v; want the index with its tag", first, err)
	}
	tests := []struct {
		name   string
		known  string
		wait   time.Duration
		change time.Duration // when the index changes (0: never)
		min    time.Duration // the answer comes after at least
		max    time.Duration // and at most
		same   bool          // with the tag known
	}{
		{"another tag: at once", "0", 10 * time.Second, 0, 0, 2 * time.Second, true},
		{"no change: after the wait", first.Tag, 300 * time.Millisecond, 0, 300 * time.Millisecond, 5 * time.Second, true},
		{"a change: at once", first.Tag, 30 * time.Second, 200 * time.Millisecond, 200 * time.Millisecond, 5 * time.Second, false},
		{"no wait: at once", first.Tag, 0, 0, 0, 2 * time.Second, true},
		{"no tag: at once", "", 30 * time.Second, 0, 0, 2 * time.Second, true},
	}
	for _, tt := range tests {
		data.setIndex(first)
		if tt.change > 0 {
			time.AfterFunc(tt.change, func() {
				idx := first
				idx.Shards = append(idx.Shards, shard.Info{Epoch: 4, Rank: 5, NRanks: 8, Size: 5, Checksum: 9})
				data.setIndex(idx)
			})
		}
		start := time.Now()
		idx, err := c.WaitShards(ctx, "j1", tt.known, tt.wait)
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if took < tt.min || took > tt.max {
			t.Errorf("%s: answered after %v, want between %v and %v", tt.name, took, tt.min, tt.max)
		}
		if got := idx.Tag == first.Tag; got != tt.same {
			t.Errorf("%s: tag %s, first %s: same = %v, want %v", tt.name, idx.Tag, first.Tag, got, tt.same)
		}
		if tt.change > 0 && len(idx.Shards) != 2 {
			t.Errorf("%s: %d shards, want the changed index's 2", tt.name, len(idx.Shards))
		}
	}

	for _, q := range []string{"?known=" + first.Tag, "?wait=30s", "?wait=0s&known=" + first.Tag} {
		start := time.Now()
		if status, _ := raw(t, ts, testSecret, "GET", "/v1/shards/j1"+q, ""); status != 200 || time.Since(start) > 2*time.Second {
			t.Errorf("GET /v1/shards/j1%s: status %d after %v, want 200 at once", q, status, time.Since(start))
		}
	}

	// A client that gives up ends the wait on the node.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.WaitShards(cctx, "j1", first.Tag, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitShards past the client's deadline: %v, want a deadline error", err)
	}
	called := func(call string) func() string {
		return func() string {
			data.mu.Lock()
			defer data.mu.Unlock()
			if !slices.Contains(data.calls, call) {
				return fmt.Sprintf("no call %q in %q", call, data.calls)
			}
			return ""
		}
	}
	poll.Until(t, 5*time.Second, called("index j1: wait ended"))

	// A server shutting down answers a long poll at once, with the index as
	// it is, instead of holding its shutdown up to the poll's end.
	data.mu.Lock()
	data.calls = nil
	data.mu.Unlock()
	answered := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		idx, err := c.WaitShards(cctx, "j1", first.Tag, time.Minute)
		if err == nil && idx.Tag != first.Tag {
			err = fmt.Errorf("tag %s, want the unchanged %s", idx.Tag, first.Tag)
		}
		answered <- err
	}()
	poll.Until(t, 5*time.Second, called(fmt.Sprintf("index j1 known=%q", first.Tag)))
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Errorf("a long poll during the server's shutdown: %v, want the index", err)
	}
}

func TestShardIndexTag(t *testing.T) {
	base := shard.Index{
		Shards:   []shard.Info{{Epoch: 3, Rank: 0, Size: 10, Checksum: 1}, {Epoch: 3, Rank: 1, Size: 10, Checksum: 2}},
		Bad:      []shard.Bad{{Epoch: 3, Rank: 2, Error: "truncated", Detail: "/a/r000002.shard: truncated"}},
		Progress: &job.Progress{Fraction: 0.421, At: time.Unix(100, 0)},
		Silent:   []job.Silent{{Rank: 1, Calls: 40, For: job.Duration(2 * time.Second), Busy: 0.5}},
	}
	tests := []struct {
		name   string
		change func(*shard.Index)
		same   bool
	}{
		{"progress within the percent", func(i *shard.Index) { i.Progress = &job.Progress{Fraction: 0.4299, At: time.Unix(200, 0)} }, true},
		{"bad shard detail", func(i *shard.Index) { i.Bad[0].Detail = "other words" }, true},
		{"job name", func(i *shard.Index) { i.Job = "j2" }, true},
		{"a silence grown longer", func(i *shard.Index) { i.Silent[0].For, i.Silent[0].Busy = job.Duration(3*time.Second), 0.4 }, true},
		{"a rank silent since a later call", func(i *shard.Index) { i.Silent[0].Calls = 60 }, false},
		{"another rank silent", func(i *shard.Index) { i.Silent = append(i.Silent, job.Silent{Rank: 2, Calls: 40}) }, false},
		{"no rank silent", func(i *shard.Index) { i.Silent = nil }, false},
		{"progress to the next percent", func(i *shard.Index) { i.Progress = &job.Progress{Fraction: 0.43} }, false},
		{"progress gone", func(i *shard.Index) { i.Progress = nil }, false},
		{"a shard more", func(i *shard.Index) { i.Shards = append(i.Shards, shard.Info{Epoch: 4, Checksum: 3}) }, false},
		{"a shard rewritten", func(i *shard.Index) { i.Shards[1].Checksum = 7 }, false},
		{"a bad shard's check", func(i *shard.Index) { i.Bad[0].Error = "checksum mismatch" }, false},
		{"the bad shard repaired", func(i *shard.Index) {
			i.Bad = nil
			i.Shards = append(i.Shards, shard.Info{Epoch: 3, Rank: 2, Size: 10, Checksum: 4})
		}, false},
	}
	want := base.ComputeTag()
	for _, tt := range tests {
		idx := base
		idx.Shards = slices.Clone(base.Shards)
		idx.Bad = slices.Clone(base.Bad)
		idx.Silent = slices.Clone(base.Silent)
		tt.change(&idx)
		if got := idx.ComputeTag(); (got == want) != tt.same {
			t.Errorf("%s: tag %s, before %s: same = %v, want %v", tt.name, got, want, got == want, tt.same)
		}
	}
}

// TestCorruptStatus: a corrupt stored shard is a 422 "corrupt" that clients
// recognise.
func TestCorruptStatus(t *testing.T) {
	e := &Error{Status: 422, Code: "corrupt", Message: "x"}
	if !errors.Is(e, ErrCorrupt) {
		t.Errorf("422 does not unwrap to ErrCorrupt")
	}
	if st, code := statusOf(fmt.Errorf("%w: shard j/1/0 fails verification", ErrCorrupt)); st != 422 || code != "corrupt" {
		t.Errorf("statusOf(ErrCorrupt) = %d %s", st, code)
	}
}

func TestGrants(t *testing.T) {
	_, ts, _ := newTestServer(t, true)
	ctx := context.Background()
	c := NewClient(ts.URL, testSecret)
	g, err := c.Grant(ctx, GrantRequest{Job: "j1", Coordinator: "n2", Ranks: 2, TTL: job.Duration(0)})
	if want := time.Unix(1700000000, 0).UTC().Add(DefaultGrantTTL); err != nil || g.Job != "j1" || g.Coordinator != "n2" || g.Ranks != 2 || !g.Expires.Equal(want) {
		t.Errorf("Grant with no TTL = %+v, %v; want j1 from n2, 2 ranks, with the default TTL (expires %v)", g, err, want)
	}
	if g, err := c.Grant(ctx, GrantRequest{Job: "j2", Coordinator: "n2", Ranks: 1, TTL: job.Duration(90 * time.Second)}); err != nil || !g.Expires.Equal(time.Unix(1700000090, 0)) {
		t.Errorf("Grant 90s = %+v, %v", g, err)
	}
	if rv, err := c.Revoke(ctx, "j1"); err != nil || rv != (Revoked{Job: "j1", Killed: 2}) {
		t.Errorf("Revoke j1 = %+v, %v; want 2 killed", rv, err)
	}
	if rv, err := c.Revoke(ctx, "j1"); err != nil || rv != (Revoked{Job: "j1"}) {
		t.Errorf("Revoke j1 again = %+v, %v; want 0 killed and no error", rv, err)
	}
	if _, err := c.Grant(ctx, GrantRequest{Job: "j1", Coordinator: "", Ranks: 1, TTL: job.Duration(time.Minute)}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Grant without a coordinator: error %v, want ErrBadRequest", err)
	}
	if _, err := c.Grant(ctx, GrantRequest{Job: "j1", Coordinator: "n2", Ranks: -1, TTL: job.Duration(time.Minute)}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "ranks -1") {
		t.Errorf("Grant of -1 ranks: error %v, want ErrBadRequest naming ranks", err)
	}
	for _, ranks := range []int{0, job.MaxRanks + 1} {
		if _, err := c.Grant(ctx, GrantRequest{Job: "j1", Coordinator: "n2", Ranks: ranks, TTL: job.Duration(time.Minute)}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), fmt.Sprintf("ranks %d: want 1 to %d", ranks, job.MaxRanks)) {
			t.Errorf("Grant of %d ranks: error %v, want ErrBadRequest naming ranks and the bound", ranks, err)
		}
	}
	// A grant that names the job's files says which the node lacks.
	held := []byte("held")
	heldSum := fmt.Sprintf("%x", sha256.Sum256(held))
	if err := c.PutFile(ctx, heldSum, bytes.NewReader(held), int64(len(held))); err != nil {
		t.Fatal(err)
	}
	lacked := strings.Repeat("ab", 32)
	g, err = c.Grant(ctx, GrantRequest{Job: "j3", Coordinator: "n2", Ranks: 1, Files: []string{lacked, heldSum}})
	if err != nil || !slices.Equal(g.Missing, []string{lacked}) {
		t.Errorf("Grant naming a held and a lacked file = %+v, %v; want the lacked one missing", g, err)
	}
	if g, err := c.Grant(ctx, GrantRequest{Job: "j3", Coordinator: "n2", Ranks: 1, Files: []string{heldSum}}); err != nil || g.Missing != nil {
		t.Errorf("Grant naming a held file = %+v, %v; want nothing missing", g, err)
	}
	if _, err := c.Grant(ctx, GrantRequest{Job: "j3", Coordinator: "n2", Ranks: 1, Files: []string{"XYZ"}}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `files[0] "XYZ"`) {
		t.Errorf("Grant naming a file by a malformed sum: error %v, want ErrBadRequest naming it", err)
	}
	_, err = c.Launch(ctx, LaunchRequest{Job: "j1", Argv: []string{"orted"}, Env: map[string]string{"A=B": "c"}})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "env key") {
		t.Errorf("Launch with env key A=B: error %v, want ErrBadRequest naming the env key", err)
	}
}

func TestClientErrors(t *testing.T) {
	_, ts, _ := newTestServer(t, false)
	ctx := context.Background()
	_, err := NewClient(ts.URL, wrongSecret).Nodes(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Status != 401 || !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Nodes with wrong secret: error = %#v, want *Error 401 unwrapping to ErrUnauthorized", err)
	}
	if _, err := NewClient(ts.URL, testSecret).Jobs(ctx); !errors.Is(err, ErrNotAvailable) {
		t.Errorf("Jobs without coordinator: error = %v, want ErrNotAvailable", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	addr := closed.Listener.Addr().String()
	closed.Close()
	_, err = NewClient(addr, testSecret).Nodes(ctx)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Nodes of a stopped agent: error = %v, want ErrUnreachable naming %s", err, addr)
	}
}

// TestClientsShareConnections: calls through Clients reuse one kept-alive
// connection per agent, whoever makes them; a client made per call dialled for
// each.
func TestClientsShareConnections(t *testing.T) {
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, Version: "test"})
	ts := httptest.NewUnstartedServer(s)
	var mu sync.Mutex
	conns := 0
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	cs := NewClients(testSecret)
	for i := 0; i < 10; i++ {
		if _, err := cs.Get(ts.URL).Nodes(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := conns
	mu.Unlock()
	if got != 1 {
		t.Errorf("10 calls in turn through Clients opened %d connections, want 1", got)
	}
	if a, b := cs.Get(ts.URL), cs.Get(ts.URL); a != b {
		t.Errorf("Get twice for one address gave two clients")
	}
	old := cs.Get(ts.URL)
	cs.Forget(ts.URL)
	if cs.Get(ts.URL) == old {
		t.Errorf("Get after Forget gave the forgotten client")
	}
}

// TestHealthTellsOnlySignedCallers: anyone may poll /v1/health, but only a request
// signed with the cluster secret learns the node's name and version.
func TestHealthTellsOnlySignedCallers(t *testing.T) {
	_, ts, _ := newTestServer(t, true)
	user, _ := json.Marshal(agentUser())
	signed := `{"name":"n1","version":"test","node":"` + nodeOf(t, ts) + `","user":` + string(user) + `}`
	tests := []struct {
		name   string
		secret []byte
		want   string
	}{
		{"unsigned", nil, `{}`},
		{"wrong secret", wrongSecret, `{}`},
		{"signed", testSecret, signed},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/health", nil)
		if tt.secret != nil {
			Sign(req, DeriveAuthKey(tt.secret), AnyNode, EmptySHA256, time.Now())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := strings.TrimSpace(string(b)); resp.StatusCode != 200 || got != tt.want {
			t.Errorf("%s: GET /v1/health = %d %s, want 200 %s", tt.name, resp.StatusCode, got, tt.want)
		}
	}
	// A replayed signature is no authentication either.
	req, _ := http.NewRequest("GET", ts.URL+"/v1/health", nil)
	Sign(req, DeriveAuthKey(testSecret), AnyNode, EmptySHA256, time.Now())
	for i, want := range []string{signed, `{}`} {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("signed request sent %d times: %s, want %s", i+1, got, want)
		}
	}
}

// A link probe reads back the bytes it asked for and the round trip the kernel
// measured on its TCP connection: positive, and within the whole request's time.
func TestProbeLinkKernelRTT(t *testing.T) {
	_, ts, _ := newTestServer(t, false)
	took, rtt, err := NewClient(ts.URL, testSecret).ProbeLink(context.Background(), 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && (rtt <= 0 || rtt > took) {
		t.Errorf("kernel round trip %v of a probe that took %v: want a positive one within it", rtt, took)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := kernelRTT(a); got != 0 {
		t.Errorf("kernelRTT of a pipe = %v, want 0 (no TCP)", got)
	}
}

func (f *fakeData) PutParity(_ context.Context, ref shard.ParityRef, size int64, r io.Reader) (shard.ParityInfo, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return shard.ParityInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("put %s %q", ref, b))
	return shard.ParityInfo{Epoch: ref.Epoch, Group: ref.Group, Row: ref.Row, Size: int64(len(b))}, nil
}

func (f *fakeData) EncodeParity(_ context.Context, job string, epoch uint64, req EncodeRequest) (EncodeResult, error) {
	res := EncodeResult{ParityInfo: shard.ParityInfo{Epoch: epoch, Group: req.Group, Row: req.Row, M: req.M}}
	for _, p := range req.Push {
		res.Pushed = append(res.Pushed, Pushed{Row: p.Row, To: p.To, Error: "refused"})
	}
	return res, nil
}

// RebuildShard fails as a node does whose pieces' holders did not answer:
// those of the request's parity rows.
func (f *fakeData) RebuildShard(_ context.Context, ref shard.Ref, req RebuildRequest) (Fetched, error) {
	var silent []string
	for _, p := range req.Parity {
		silent = append(silent, p.From)
	}
	return Fetched{}, &errkind.NoAnswer{Addrs: silent, Err: fmt.Errorf("%w: rebuild shard %s: read 1 of the 2 pieces it needs", ErrBadGateway, ref)}
}

// TestParityRoutes sends a parity row over the signed streaming PUT, and an
// encode request with a push: the answer carries each push's outcome, and a
// push to no address, or of the row kept, is refused before the service.
func TestParityRoutes(t *testing.T) {
	s, ts, _ := newTestServer(t, true)
	data := s.shardService().(*fakeData)
	ctx := context.Background()
	c := NewClient(ts.URL, testSecret)

	ref := shard.ParityRef{Job: "j1", Epoch: 4, Group: 2, Row: 1}
	info, err := c.PutParity(ctx, ref, bytes.NewReader([]byte("row")))
	if err != nil || info.Group != 2 || info.Row != 1 || info.Size != 3 {
		t.Errorf("PutParity = %+v, %v", info, err)
	}
	if want := `put j1/4/parity/2/1 "row"`; len(data.calls) == 0 || data.calls[len(data.calls)-1] != want {
		t.Errorf("service saw %q, want %q last", data.calls, want)
	}
	members := []Member{{Rank: 0, Bytes: 200, Sum: 1, From: "10.0.0.1:7947"}, {Rank: 1, Bytes: 300, Sum: 2, From: "10.0.0.2:7947"}}
	req := EncodeRequest{Group: 2, Row: 0, M: 2, Data: members, Push: []ParityPush{{Row: 1, To: "10.0.0.5:7947"}}}
	res, err := c.EncodeParity(ctx, "j1", 4, req)
	if err != nil || res.Row != 0 || len(res.Pushed) != 1 || res.Pushed[0] != (Pushed{Row: 1, To: "10.0.0.5:7947", Error: "refused"}) {
		t.Errorf("EncodeParity = %+v, %v", res, err)
	}
	// A rebuild that failed for nodes that gave no answer names them: the
	// coordinator counts them lost.
	rb := RebuildRequest{Group: 2, M: 2, Data: members, Parity: []ParitySource{{Row: 0, From: "10.0.0.4:7947"}, {Row: 1, From: "10.0.0.5:7947"}}}
	_, err = c.RebuildShard(ctx, shard.Ref{Job: "j1", Epoch: 4, Rank: 0}, rb)
	if !errors.Is(err, ErrBadGateway) || !slices.Equal(errkind.NoAnswerFrom(err), []string{"10.0.0.4:7947", "10.0.0.5:7947"}) {
		t.Errorf("RebuildShard: %v (no answer from %q), want a bad gateway naming both rows' nodes", err, errkind.NoAnswerFrom(err))
	}
	for _, push := range [][]ParityPush{{{Row: 0, To: "10.0.0.5:7947"}}, {{Row: 1, To: "n5"}}, {{Row: 2, To: "10.0.0.5:7947"}}, {{Row: 1, To: "10.0.0.5:7947"}, {Row: 1, To: "10.0.0.6:7947"}}} {
		req.Push = push
		if _, err := c.EncodeParity(ctx, "j1", 4, req); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "push[") {
			t.Errorf("EncodeParity pushing %+v: %v, want a bad request naming the push", push, err)
		}
	}
}
