package ui

import (
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/job"
	"shoal/internal/node"
)

const testToken = "0123456789abcdef0123456789abcdef"

func testServer() (*Server, *MemSource) {
	src := &MemSource{
		Members: []node.Node{{Name: "n1", State: "alive"}},
		Jobs:    []job.Job{{ID: "j1", State: job.Running}},
		Evs: []job.Event{
			{Seq: 1, Job: "j1", Type: job.EventLaunch, Time: time.Unix(1, 0)},
			{Seq: 2, Job: "j1", Type: job.EventEpoch, Epoch: 1, Time: time.Unix(2, 0)},
		},
	}
	return New(src, testToken, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 8080}, nil), src
}

// TestRefuse: only a GET or HEAD naming the loopback address and port the
// dashboard listens on, with its token or its cookie, is let through.
func TestRefuse(t *testing.T) {
	s, _ := testServer()
	good := &http.Cookie{Name: "shoal-ui-8080", Value: testToken}
	tests := []struct {
		name, method, host, target string
		cookie                     *http.Cookie
		want                       int // 0: let through
	}{
		{"cookie", "GET", "127.0.0.1:8080", "/jobs", good, 0},
		{"HEAD with cookie", "HEAD", "127.0.0.1:8080", "/jobs", good, 0},
		{"localhost", "GET", "localhost:8080", "/", good, 0},
		{"ipv6 loopback", "GET", "[::1]:8080", "/", good, 0},
		{"the address it listens on", "GET", "127.0.0.2:8080", "/", good, 0},
		{"another loopback address", "GET", "127.0.0.3:8080", "/", good, http.StatusForbidden},
		{"token", "GET", "127.0.0.1:8080", "/?token=" + testToken, nil, 0},
		{"nothing", "GET", "127.0.0.1:8080", "/api/jobs", nil, http.StatusForbidden},
		{"wrong token", "GET", "127.0.0.1:8080", "/?token=00", nil, http.StatusForbidden},
		{"wrong token, good cookie", "GET", "127.0.0.1:8080", "/?token=00", good, http.StatusForbidden},
		{"wrong cookie", "GET", "127.0.0.1:8080", "/", &http.Cookie{Name: "shoal-ui-8080", Value: "x"}, http.StatusForbidden},
		{"another port's cookie", "GET", "127.0.0.1:8080", "/", &http.Cookie{Name: "shoal-ui-8081", Value: testToken}, http.StatusForbidden},
		{"rebinding host", "GET", "evil.example:8080", "/", good, http.StatusForbidden},
		{"other port", "GET", "127.0.0.1:9090", "/", good, http.StatusForbidden},
		{"no port", "GET", "127.0.0.1", "/", good, http.StatusForbidden},
		{"POST", "POST", "127.0.0.1:8080", "/api/jobs", good, http.StatusMethodNotAllowed},
		{"DELETE", "DELETE", "127.0.0.1:8080", "/api/jobs/j1", good, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.target, nil)
		r.Host = tt.host
		if tt.cookie != nil {
			r.AddCookie(tt.cookie)
		}
		got := 0
		if d := s.refuse(r); d != nil {
			got = d.status
		}
		if got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

func get(s *Server, target string, cookie bool) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", target, nil)
	r.Host = "127.0.0.1:8080"
	if cookie {
		r.AddCookie(&http.Cookie{Name: "shoal-ui-8080", Value: testToken})
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// TestTokenBecomesCookie: the token in the URL is answered with an HttpOnly,
// SameSite=Strict cookie and a redirect to the same page without it.
func TestTokenBecomesCookie(t *testing.T) {
	s, _ := testServer()
	w := get(s, "/jobs?token="+testToken, false)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/jobs" {
		t.Fatalf("got %d to %q, want 303 to /jobs", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || c[0].Name != "shoal-ui-8080" || c[0].Value != testToken || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("got cookies %v, want shoal-ui-8080=TOKEN HttpOnly SameSite=Strict", c)
	}
}

// TestHeaders: every answer, a refusal included, carries the strict CSP.
func TestHeaders(t *testing.T) {
	s, _ := testServer()
	for _, cookie := range []bool{true, false} {
		w := get(s, "/", cookie)
		if got := w.Header().Get("Content-Security-Policy"); !strings.HasPrefix(got, "default-src 'none'") {
			t.Errorf("cookie %t: got CSP %q, want default-src 'none' …", cookie, got)
		}
	}
}

// TestPages: the pages, their files and the JSON they read.
func TestPages(t *testing.T) {
	s, _ := testServer()
	tests := []struct {
		target   string
		want     int
		contains string
	}{
		{"/", 200, `<script src="/static/app.js"`},
		{"/nodes", 200, `<main id="main">`},
		{"/jobs/j1", 200, `<main id="main">`},
		{"/static/app.js", 200, "function nodesPage"},
		{"/static/style.css", 200, ".bar"},
		{"/api/nodes", 200, `"name":"n1"`},
		{"/api/agent", 200, `"version":"test"`},
		{"/api/jobs", 200, `"id":"j1"`},
		{"/api/jobs/j1", 200, `"state":"running"`},
		{"/api/jobs/nope", 404, `no job`},
		{"/static/nope.js", 404, ""},
	}
	for _, tt := range tests {
		w := get(s, tt.target, true)
		if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.contains) {
			t.Errorf("GET %s: got %d %.80q, want %d containing %q", tt.target, w.Code, w.Body.String(), tt.want, tt.contains)
		}
	}
}

// TestEvents: a job's events as server-sent events, each with its seq as id,
// from the one after Last-Event-ID.
func TestEvents(t *testing.T) {
	s, _ := testServer()
	for _, tt := range []struct {
		last string
		want []uint64
	}{{"", []uint64{1, 2}}, {"1", []uint64{2}}, {"2", nil}} {
		r := httptest.NewRequest("GET", "/api/jobs/j1/events", nil)
		r.Host = "127.0.0.1:8080"
		r.AddCookie(&http.Cookie{Name: "shoal-ui-8080", Value: testToken})
		if tt.last != "" {
			r.Header.Set("Last-Event-ID", tt.last)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("Last-Event-ID %q: got Content-Type %q, want text/event-stream", tt.last, ct)
		}
		var got []uint64
		for _, block := range strings.Split(w.Body.String(), "\n\n") {
			var id, data string
			for _, line := range strings.Split(block, "\n") {
				if v, ok := strings.CutPrefix(line, "id: "); ok {
					id = v
				}
				if v, ok := strings.CutPrefix(line, "data: "); ok {
					data = v
				}
			}
			if data == "" {
				continue
			}
			var e job.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if id != strconv.FormatUint(e.Seq, 10) {
				t.Errorf("event %d: got id %q, want its seq", e.Seq, id)
			}
			got = append(got, e.Seq)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Last-Event-ID %q: got seqs %v, want %v", tt.last, got, tt.want)
		}
	}
	w := get(s, "/api/jobs/nope/events", true)
	if b, _ := io.ReadAll(w.Body); w.Code != 404 {
		t.Errorf("events of an unknown job: got %d %s, want 404", w.Code, b)
	}
}

func TestCheckListen(t *testing.T) {
	for _, tt := range []struct {
		addr string
		ok   bool
	}{{"127.0.0.1:0", true}, {"127.0.0.2:80", true}, {"[::1]:8080", true}, {"localhost:1", true},
		{"0.0.0.0:8080", false}, {":8080", false}, {"10.0.0.1:80", false}, {"127.0.0.1", false}} {
		if err := CheckListen(tt.addr); (err == nil) != tt.ok {
			t.Errorf("CheckListen(%q): got %v, want ok %t", tt.addr, err, tt.ok)
		}
	}
}

// TestJobsProgress: an MPI job's progress on the jobs page is what its newest
// progress event reports, read from the events not read before; a farm's is
// its record's; a job that succeeded is done.
func TestJobsProgress(t *testing.T) {
	s, src := testServer()
	src.Jobs = []job.Job{
		{ID: "j1", State: job.Running},
		{ID: "j2", State: job.Succeeded},
		{ID: "f1", State: job.Running, Progress: 0.25, Farm: &job.FarmProgress{Total: 4, Done: 1}},
	}
	src.Evs = append(src.Evs,
		job.Event{Seq: 3, Job: "j1", Type: job.EventProgress, Message: "progress 10%"},
		job.Event{Seq: 4, Job: "j1", Type: job.EventProgress, Message: "progress 30%"},
		job.Event{Seq: 5, Job: "j1", Type: job.EventOutput, Message: "progress 90%"},
	)
	progress := func() map[string]float64 {
		var l api.JobList
		if err := json.NewDecoder(get(s, "/api/jobs", true).Body).Decode(&l); err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, j := range l.Jobs {
			m[j.ID] = j.Progress
		}
		return m
	}
	want := map[string]float64{"j1": 0.3, "j2": 1, "f1": 0.25}
	if got := progress(); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	src.mu.Lock()
	src.Evs = append(src.Evs, job.Event{Seq: 6, Job: "j1", Type: job.EventProgress, Message: "progress 50%"})
	src.mu.Unlock()
	want["j1"] = 0.5
	if got := progress(); !maps.Equal(got, want) {
		t.Errorf("after another progress event: got %v, want %v", got, want)
	}
	if m := s.seen.jobs["j1"]; m.next != 7 {
		t.Errorf("the book read j1 up to seq %d, want 7", m.next-1)
	}
}

// TestLinksRead: the nodes page, read every second, asks the agent for the
// links (which asks every node) once in linkAge.
func TestLinksRead(t *testing.T) {
	s, src := testServer()
	for range 3 {
		if w := get(s, "/api/nodes", true); !strings.Contains(w.Body.String(), `"to":"n2"`) {
			t.Fatalf("GET /api/nodes: got %s, want the link n1 to n2", w.Body)
		}
	}
	if src.LinkReads != 1 {
		t.Errorf("got %d reads of the links for 3 of the page, want 1", src.LinkReads)
	}
}
