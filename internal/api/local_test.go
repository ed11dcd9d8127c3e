package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"shoal/internal/job"
	"shoal/internal/node"
)

// ownedJobs is a job service whose job "mine" belongs to uid 1001 and "theirs"
// to uid 1002; it records the spec of every submission.
type ownedJobs struct {
	Unavailable
	mu        sync.Mutex
	submitted []job.Spec
}

var ownedByUID = map[string]*job.Owner{"mine": {UID: 1001, GID: 1001, Name: "alice"}, "theirs": {UID: 1002, GID: 1002, Name: "bob"}, "roots": nil}

func (o *ownedJobs) Submit(_ context.Context, spec job.Spec) (job.Job, error) {
	o.mu.Lock()
	o.submitted = append(o.submitted, spec)
	o.mu.Unlock()
	return job.Job{ID: "new", Spec: spec}, nil
}
func (o *ownedJobs) Jobs(context.Context) ([]job.Job, error) {
	var out []job.Job
	for _, id := range []string{"mine", "roots", "theirs"} {
		out = append(out, job.Job{ID: id, Spec: job.Spec{Owner: ownedByUID[id]}})
	}
	return out, nil
}
func (o *ownedJobs) Job(_ context.Context, id string) (job.Job, error) {
	owner, ok := ownedByUID[id]
	if !ok {
		// Worded otherwise than NoSuchJob, as a replica still waiting for
		// a job may word it: the server answers in NoSuchJob's words.
		return job.Job{}, fmt.Errorf("%w: %q (not replicated here yet)", ErrNotFound, id)
	}
	return job.Job{ID: id, Spec: job.Spec{Owner: owner}}, nil
}
func (o *ownedJobs) Cancel(_ context.Context, id string) (job.Job, error) {
	return job.Job{ID: id, State: job.Cancelled}, nil
}

// asCaller sends a request to s as if from its local socket, by caller.
func asCaller(t *testing.T, s *Server, c *Caller, method, path, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if path == "/v1/launch" {
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", LaunchProtocol)
	}
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestLocalCallers: on the local socket a user other than root may submit jobs,
// which are theirs whatever the body says, and see and cancel only their own;
// everything else is refused with 403. Root may do anything, unsigned.
func TestLocalCallers(t *testing.T) {
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret})
	jobs := &ownedJobs{}
	s.SetJobService(jobs)
	alice := &Caller{UID: 1001, GID: 1001, Name: "alice"}
	root := &Caller{UID: 0, GID: 0, Name: "root"}
	nobody := &Caller{UID: -1, GID: -1}
	tests := []struct {
		name         string
		c            *Caller
		method, path string
		body         string
		status       int
		has          string // in the body
	}{
		{"a user sees the nodes", alice, "GET", "/v1/nodes", "", 200, ""},
		{"a user lists only their own jobs", alice, "GET", "/v1/jobs", "", 200, `"id":"mine"`},
		{"a user gets their job", alice, "GET", "/v1/jobs/mine", "", 200, `"uid":1001`},
		{"another's job is not found", alice, "GET", "/v1/jobs/theirs", "", 404, `no job \"theirs\"`},
		{"root's job is not found", alice, "GET", "/v1/jobs/roots", "", 404, `no job \"roots\"`},
		{"a user cancels their job", alice, "DELETE", "/v1/jobs/mine", "", 200, "cancelled"},
		{"nor cancels another's", alice, "DELETE", "/v1/jobs/theirs", "", 404, ""},
		{"nor follows another's", alice, "GET", "/v1/jobs/theirs/events", "", 404, ""},
		{"a user may not make the node leave", alice, "POST", "/v1/leave", "", 403, "POST /v1/leave is for root; alice (uid 1001) may submit jobs"},
		{"nor read shards", alice, "GET", "/v1/shards/mine", "", 403, "forbidden"},
		{"nor grant", alice, "POST", "/v1/grants", `{"job":"mine","coordinator":"n1","ranks":1}`, 403, ""},
		{"nor launch on this node directly", alice, "POST", "/v1/launch", `{"job":"mine","argv":["orted"]}`, 403, "only through the agent"},
		{"nor launch for another's job", alice, "POST", "/v1/launch", `{"job":"theirs","argv":["orted"],"to":"10.0.0.2:7947"}`, 404, ""},
		{"a caller without credentials may do nothing", nobody, "GET", "/v1/nodes", "", 403, ""},
		{"root lists every job", root, "GET", "/v1/jobs", "", 200, `"id":"theirs"`},
		{"root gets another's job", root, "GET", "/v1/jobs/theirs", "", 200, ""},
		{"root reads shards (unplugged here)", root, "GET", "/v1/shards/mine", "", 503, ""},
	}
	for _, tt := range tests {
		status, body := asCaller(t, s, tt.c, tt.method, tt.path, tt.body)
		if status != tt.status || !strings.Contains(body, tt.has) {
			t.Errorf("%s: %s %s = %d %s, want %d containing %q", tt.name, tt.method, tt.path, status, body, tt.status, tt.has)
		}
	}
	if _, body := asCaller(t, s, alice, "GET", "/v1/jobs", ""); strings.Contains(body, "theirs") || strings.Contains(body, "roots") {
		t.Errorf("alice's job list shows others' jobs: %s", body)
	}
}

// TestLocalSubmitOwner: a user's job on the local socket is theirs, and naming
// another user is refused; root's runs as the user it names (shoal run --user),
// anyone but root, or as the agents' user when it names none.
func TestLocalSubmitOwner(t *testing.T) {
	alice := &Caller{UID: 1001, GID: 1001, Name: "alice"}
	root := &Caller{UID: 0, GID: 0, Name: "root"}
	tests := []struct {
		name   string
		c      *Caller
		owner  string // the body's "owner", JSON; "" for none
		status int
		has    string     // in the answer
		want   *job.Owner // the submitted job's owner, when status is 201
	}{
		{"a user's job is theirs", alice, "", 201, "", &job.Owner{UID: 1001, GID: 1001, Name: "alice"}},
		{"a user may name themself", alice, `{"uid":1001,"gid":7,"name":"mallory"}`, 201, "", &job.Owner{UID: 1001, GID: 1001, Name: "alice"}},
		{"a user may not name another", alice, `{"uid":1002,"gid":1002,"name":"bob"}`, 403,
			"alice (uid 1001) may submit jobs as themself only, not as bob (uid 1002)", nil},
		{"root's job runs as the agents' user", root, "", 201, "", nil},
		{"root's job runs as the user it names", root, `{"uid":1002,"gid":1003,"name":"bob"}`, 201, "", &job.Owner{UID: 1002, GID: 1003, Name: "bob"}},
		{"root may not name root", root, `{"uid":0,"gid":0,"name":"root"}`, 400, "owner uid 0 gid 0: want a user other than root", nil},
		{"nor a name with a newline", root, `{"uid":1002,"gid":1002,"name":"bob\nUSER=root"}`, 400, "owner.name", nil},
	}
	for _, tt := range tests {
		s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret})
		jobs := &ownedJobs{}
		s.SetJobService(jobs)
		body := `{"ranks":1,"argv":["x"]}`
		if tt.owner != "" {
			body = `{"ranks":1,"argv":["x"],"owner":` + tt.owner + `}`
		}
		status, answer := asCaller(t, s, tt.c, "POST", "/v1/jobs", body)
		if status != tt.status || !strings.Contains(answer, tt.has) {
			t.Errorf("%s: POST /v1/jobs = %d %s, want %d containing %q", tt.name, status, answer, tt.status, tt.has)
			continue
		}
		if status != 201 {
			if len(jobs.submitted) != 0 {
				t.Errorf("%s: refused, yet submitted %+v", tt.name, jobs.submitted)
			}
			continue
		}
		if got := jobs.submitted[0].Owner; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: owner %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestAnotherUsersJobReadsAsNone: on the local socket, every route that names
// a job answers for another user's job (or root's) exactly as for an id no job
// has: the same status, headers and body, but for the id, so that no answer
// tells a user which ids exist.
func TestAnotherUsersJobReadsAsNone(t *testing.T) {
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret,
		Relay: func(context.Context, string, LaunchRequest) (io.ReadWriteCloser, error) {
			return nil, errors.New("relayed a launch for a job the caller does not own")
		}})
	s.SetJobService(&ownedJobs{})
	alice := &Caller{UID: 1001, GID: 1001, Name: "alice"}
	routes := []struct {
		method, path, body string // ID stands for the job id
	}{
		{"GET", "/v1/jobs/ID", ""},
		{"DELETE", "/v1/jobs/ID", ""},
		{"GET", "/v1/jobs/ID/events", ""},
		{"GET", "/v1/jobs/ID/events?from=3&follow=true", ""},
		{"GET", "/v1/results/ID/0", ""},
		{"POST", "/v1/launch", `{"job":"ID","argv":["orted"],"to":"10.0.0.2:7947"}`},
	}
	ask := func(method, path, body, id string) (int, http.Header, string) {
		r := httptest.NewRequest(method, strings.ReplaceAll(path, "ID", id), strings.NewReader(strings.ReplaceAll(body, "ID", id)))
		if path == "/v1/launch" {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", LaunchProtocol)
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, alice))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code, w.Header(), strings.ReplaceAll(w.Body.String(), id, "ID")
	}
	for _, rt := range routes {
		wantStatus, wantHeader, wantBody := ask(rt.method, rt.path, rt.body, "nosuch")
		if want := `{"error":"no job \"ID\"","code":"not_found"}` + "\n"; wantStatus != http.StatusNotFound || wantBody != want {
			t.Errorf("%s %s of a job that does not exist: %d %q, want 404 %q", rt.method, rt.path, wantStatus, wantBody, want)
		}
		for _, id := range []string{"theirs", "roots"} {
			status, header, body := ask(rt.method, rt.path, rt.body, id)
			if status != wantStatus || body != wantBody || !reflect.DeepEqual(header, wantHeader) {
				t.Errorf("%s %s of %s's job: %d %v %q, want what an id no job has gets: %d %v %q",
					rt.method, rt.path, ownedByUID[id], status, header, body, wantStatus, wantHeader, wantBody)
			}
		}
	}
}

// TestLocalSocket: over a real unix socket the agent learns the caller from the
// kernel; the tests run as root, which may do anything unsigned, and a launch
// for another agent (to) is relayed to it.
func TestLocalSocket(t *testing.T) {
	relayed := make(chan LaunchRequest, 1)
	cn := &clusterNode{nodes: []node.Node{{Name: "n1", API: "10.0.0.1:7947", State: "alive", Local: true}, {Name: "n2", API: "10.0.0.2:7947", State: "alive"}}}
	s := NewServer(ServerConfig{Node: cn, Secret: testSecret,
		Relay: func(ctx context.Context, to string, req LaunchRequest) (io.ReadWriteCloser, error) {
			req.To = to
			relayed <- req
			a, b := net.Pipe()
			go func() { // the other agent: echo one line in upper case
				defer b.Close()
				line, _ := bufio.NewReader(b).ReadString('\n')
				io.WriteString(b, strings.ToUpper(line))
			}()
			return a, nil
		}})
	s.SetJobService(&ownedJobs{})
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeLocal(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	c := NewLocalClient(path)
	ctx := context.Background()
	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("jobs over the socket as uid %d: %v, %v", 0, jobs, err)
	}
	conn, err := c.Launch(ctx, LaunchRequest{Job: "theirs", Argv: []string{"orted"}, To: "10.0.0.2:7947"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "hello\n")
	got, _ := bufio.NewReader(conn).ReadString('\n')
	if got != "HELLO\n" {
		t.Errorf("through the relay: %q, want HELLO", got)
	}
	if r := <-relayed; r.To != "10.0.0.2:7947" || r.Job != "theirs" {
		t.Errorf("relayed %+v", r)
	}
	// A launch relays once per node of its run: finding the node must not
	// check every node's reach (a launch over n nodes would dial n² times).
	cn.mu.Lock()
	if cn.checks != 0 {
		t.Errorf("the relay read the nodes with their reach checked %d times, want membership's view only", cn.checks)
	}
	cn.mu.Unlock()
	// A launch naming another agent from the network is refused.
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	_, err = NewClient(ts.URL, testSecret).Launch(ctx, LaunchRequest{Job: "mine", Argv: []string{"orted"}, To: "10.0.0.2:7947"})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "only on the local socket") {
		t.Errorf("a launch with to from the network: %v, want refused", err)
	}
	var h Health
	resp, err := c.hc.Get("http://agent/v1/health")
	if err == nil {
		json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
	}
	if h.Node == "" {
		t.Errorf("health over the socket: %+v, %v; want it to name the node", h, err)
	}
}

// clusterNode is a node whose view of the cluster a test sets.
type clusterNode struct {
	fakeNode
	mu     sync.Mutex
	nodes  []node.Node
	checks int // calls of Nodes, which checks every node's reach
}

func (c *clusterNode) Nodes(context.Context) ([]node.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks++
	return slices.Clone(c.nodes), nil
}

func (c *clusterNode) Voters(ctx context.Context) ([]node.Node, error) {
	return c.Nodes(ctx)
}

func (c *clusterNode) MembersAt(api string) []node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(c.nodes), func(n node.Node) bool { return n.API != api })
}

func (c *clusterNode) set(nodes ...node.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = nodes
}

func TestRelayTarget(t *testing.T) {
	nodes := []node.Node{
		{Name: "n1", API: "10.0.0.1:7947", State: "alive", Local: true},
		{Name: "n2", API: "10.0.0.2:7947", State: "suspect"},
		{Name: "n3", API: "10.0.0.3:7947", State: "dead"},
		{Name: "n4", API: "10.0.0.4:7947", State: "left"},
	}
	for _, tt := range []struct {
		to string
		ok bool
	}{
		{"10.0.0.1:7947", true}, // this node itself
		{"10.0.0.2:7947", true}, // suspect is still a member
		{"10.0.0.3:7947", false},
		{"10.0.0.4:7947", false},
		{"10.0.0.1:22", false},
		{"10.0.0.9:7947", false},
		{"localhost:7947", false},
	} {
		err := relayTarget(nodes, tt.to)
		if tt.ok != (err == nil) || err != nil && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.to)) {
			t.Errorf("relayTarget(%s) = %v; want ok %v (else ErrBadRequest naming it)", tt.to, err, tt.ok)
		}
	}
}

// TestRelayOnlyToMembers: the local agent passes a launch on only to the API
// address of a live member of the cluster, and refuses any other address
// without dialing it: a local user cannot use the agent to reach what the
// address names (a port scanner, as it once was).
func TestRelayOnlyToMembers(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	var accepts atomic.Int32
	go func() {
		for {
			conn, err := target.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			go func() { // the other agent: echo one line in upper case
				defer conn.Close()
				line, _ := bufio.NewReader(conn).ReadString('\n')
				io.WriteString(conn, strings.ToUpper(line))
			}()
		}
	}()
	addr := target.Addr().String()
	cn := &clusterNode{}
	s := NewServer(ServerConfig{Node: cn, Secret: testSecret,
		Relay: func(ctx context.Context, to string, req LaunchRequest) (io.ReadWriteCloser, error) {
			var d net.Dialer // as the agent's peers client does, without its TLS
			return d.DialContext(ctx, "tcp", to)
		}})
	s.SetJobService(&ownedJobs{})
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeLocal(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	c := NewLocalClient(sock)
	ctx := context.Background()
	self := node.Node{Name: "n1", API: "127.0.0.1:1", State: "alive", Local: true}
	for _, tt := range []struct {
		name  string
		nodes []node.Node
	}{
		{"an address no node has", []node.Node{self}},
		{"a dead node's", []node.Node{self, {Name: "n2", API: addr, State: "dead"}}},
		{"a node's that left", []node.Node{self, {Name: "n2", API: addr, State: "left"}}},
	} {
		cn.set(tt.nodes...)
		conn, err := c.Launch(ctx, LaunchRequest{Job: "mine", Argv: []string{"orted"}, To: addr})
		if err == nil {
			conn.Close()
		}
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "\n") {
			t.Errorf("relay to %s: %v; want a one-line ErrBadRequest naming %s", tt.name, err, addr)
		}
	}
	// A live member's address is dialed: the one connection the target sees,
	// after any the refused launches would have made.
	cn.set(self, node.Node{Name: "n2", API: addr, State: "alive"})
	conn, err := c.Launch(ctx, LaunchRequest{Job: "mine", Argv: []string{"orted"}, To: addr})
	if err != nil {
		t.Fatalf("relay to a live member: %v", err)
	}
	defer conn.Close()
	io.WriteString(conn, "hello\n")
	if got, _ := bufio.NewReader(conn).ReadString('\n'); got != "HELLO\n" {
		t.Errorf("through the relay: %q, want HELLO", got)
	}
	if n := accepts.Load(); n != 1 {
		t.Errorf("the target accepted %d connections; want 1, the live member's relay alone", n)
	}
}
