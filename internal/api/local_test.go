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
	"strings"
	"sync"
	"testing"
)

// ownedJobs is a job service whose job "mine" belongs to uid 1001 and "theirs"
// to uid 1002; it records the spec of every submission.
type ownedJobs struct {
	Unavailable
	mu        sync.Mutex
	submitted []JobSpec
}

var ownedByUID = map[string]*Owner{"mine": {UID: 1001, GID: 1001, Name: "alice"}, "theirs": {UID: 1002, GID: 1002, Name: "bob"}, "roots": nil}

func (o *ownedJobs) Submit(_ context.Context, spec JobSpec) (Job, error) {
	o.mu.Lock()
	o.submitted = append(o.submitted, spec)
	o.mu.Unlock()
	return Job{ID: "new", Spec: spec}, nil
}
func (o *ownedJobs) Jobs(context.Context) ([]Job, error) {
	var out []Job
	for _, id := range []string{"mine", "roots", "theirs"} {
		out = append(out, Job{ID: id, Spec: JobSpec{Owner: ownedByUID[id]}})
	}
	return out, nil
}
func (o *ownedJobs) Job(_ context.Context, id string) (Job, error) {
	owner, ok := ownedByUID[id]
	if !ok {
		// Worded otherwise than NoSuchJob, as a replica still waiting for
		// a job may word it: the server answers in NoSuchJob's words.
		return Job{}, fmt.Errorf("%w: %q (not replicated here yet)", ErrNotFound, id)
	}
	return Job{ID: id, Spec: JobSpec{Owner: owner}}, nil
}
func (o *ownedJobs) Cancel(_ context.Context, id string) (Job, error) {
	return Job{ID: id, State: JobCancelled}, nil
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

	// A submission is the caller's, whatever owner the body names; root's runs
	// as the agents' user.
	asCaller(t, s, alice, "POST", "/v1/jobs", `{"ranks":1,"argv":["x"],"owner":{"uid":1002,"gid":1002}}`)
	asCaller(t, s, root, "POST", "/v1/jobs", `{"ranks":1,"argv":["x"],"owner":{"uid":1002,"gid":1002}}`)
	if len(jobs.submitted) != 2 || jobs.submitted[0].Owner == nil || jobs.submitted[0].Owner.UID != 1001 || jobs.submitted[1].Owner != nil {
		t.Errorf("submitted owners: %+v, want alice's then none", jobs.submitted)
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
		if want := `{"error":"api: not found: no job \"ID\"","code":"not_found"}` + "\n"; wantStatus != http.StatusNotFound || wantBody != want {
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
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret,
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
