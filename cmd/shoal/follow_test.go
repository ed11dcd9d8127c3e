package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/coord"
	"shoal/internal/job"
	"shoal/internal/pki"
)

func TestJobExit(t *testing.T) {
	tests := []struct {
		name string
		d    job.Done
		want int
	}{
		{"succeeded", job.Done{State: job.Succeeded}, exitOK},
		{"program's own code", job.Done{State: job.Failed, ExitCode: 7}, 7},
		{"program exited 1", job.Done{State: job.Failed, ExitCode: 1}, 1},
		{"restarts exhausted", job.Done{State: job.Failed, ExitCode: 1, Exhausted: true}, exitRestarts},
		{"could not run", job.Done{State: job.Failed}, exitFailure},
		{"cancelled", job.Done{State: job.Cancelled, ExitCode: 130}, exitCancelled},
		{"launcher's status, no rank said why", job.Done{State: job.Failed, ExitCode: 205}, 205},
	}
	for _, tt := range tests {
		if got := jobExit(tt.d); got != tt.want {
			t.Errorf("jobExit(%s %+v) = %d, want %d", tt.name, tt.d, got, tt.want)
		}
	}
}

// The cluster path must give the code the local path gives for the same end.
func TestResultDoneExit(t *testing.T) {
	tests := []struct {
		res  coord.Result
		want int
	}{
		{coord.Result{State: job.Succeeded}, exitOK},
		{coord.Result{State: job.Failed, ExitCode: 7}, 7},
		{coord.Result{State: job.Failed, Exhausted: true}, exitRestarts},
		{coord.Result{State: job.Failed}, exitFailure},
		{coord.Result{State: job.Cancelled, ExitCode: 130}, exitCancelled},
	}
	for _, tt := range tests {
		d := tt.res.Done()
		if got := jobExit(d); got != tt.want {
			t.Errorf("jobExit(%+v.Done() = %+v) = %d, want %d", tt.res, d, got, tt.want)
		}
		b, _ := json.Marshal(d)
		var back job.Done
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Errorf("done data %+v through JSON (%s) = %+v, %v", d, b, back, err)
		}
	}
}

func TestReportEnd(t *testing.T) {
	tests := []struct {
		d    job.Done
		want string
	}{
		{job.Done{State: job.Succeeded}, ""},
		{job.Done{State: job.Cancelled, ExitCode: 130}, "shoal wait: job j cancelled\n"},
		{job.Done{State: job.Failed, ExitCode: 1, Exhausted: true, Reason: "rank 1 killed by signal 9; giving up after 1 restart (--max-restarts)"},
			"shoal wait: job j failed: rank 1 killed by signal 9; giving up after 1 restart (--max-restarts)\n"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		reportEnd("wait", "j", tt.d, &stderr)
		if got := stderr.String(); got != tt.want {
			t.Errorf("reportEnd(%+v) wrote %q, want %q", tt.d, got, tt.want)
		}
	}
}

// sampleEvents is a job's stream as a coordinator writes it: a restart, and
// output lines repeated after it.
func sampleEvents(t *testing.T) []job.Event {
	done, _ := json.Marshal(job.Done{State: job.Succeeded})
	evs := []job.Event{
		{Type: job.EventState, Message: "placing"},
		{Type: job.EventLaunch, Message: "launching 2 ranks on 1 nodes (n1:0-1)"},
		{Type: job.EventOutput, Message: "[0] step 1"},
		{Type: job.EventOutputErr, Message: "[1] warning"},
		{Type: job.EventEpoch, Message: "epoch 1 complete (2 shards)"},
		{Type: job.EventRankLost, Message: "rank 1 killed by signal 9"},
		{Type: job.EventRestart, Message: "rank 1 killed by signal 9; restarting from epoch 1 (0.2 s of work lost)"},
		{Type: job.EventEpochBad, Message: "warning: epoch 2 unusable"},
		{Type: job.EventOutput, Message: "[0] step 1"},
		{Type: job.EventDone, Message: "job j finished in 1 s (1 restart)"},
		{Type: job.EventEnd, Message: "", Data: done},
	}
	for i := range evs {
		evs[i].Seq, evs[i].Job = uint64(i+1), "j"
	}
	return evs
}

func TestJobPrinter(t *testing.T) {
	tests := []struct {
		v              verbosity
		stdout, stderr string
	}{
		{showNone, "", ""},
		{showOutput, "[0] step 1\n" +
			"shoal: rank 1 killed by signal 9; restarting from epoch 1 (0.2 s of work lost)\n" +
			"shoal: warning: epoch 2 unusable\n" +
			"[0] step 1\n", "[1] warning\n"},
		{showAll, "shoal: launching 2 ranks on 1 nodes (n1:0-1)\n" +
			"[0] step 1\n" +
			"shoal: epoch 1 complete (2 shards)\n" +
			"shoal: rank 1 killed by signal 9; restarting from epoch 1 (0.2 s of work lost)\n" +
			"shoal: warning: epoch 2 unusable\n" +
			"[0] step 1\n" +
			"shoal: job j finished in 1 s (1 restart)\n", "[1] warning\n"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		p := jobPrinter{stdout: &stdout, stderr: &stderr, v: tt.v}
		for _, e := range sampleEvents(t) {
			p.print(e)
		}
		if stdout.String() != tt.stdout || stderr.String() != tt.stderr {
			t.Errorf("verbosity %d printed\nstdout %q\nstderr %q\nwant\nstdout %q\nstderr %q", tt.v, &stdout, &stderr, tt.stdout, tt.stderr)
		}
	}
}

// fakeAgent serves a job's event stream the way a test script says, and records
// the from= of every request.
type fakeAgent struct {
	srv *httptest.Server // serving TLS with the certificate of fakeSecret's cluster
	mu  sync.Mutex
	// answer serves the n-th request for the events (0 first).
	answer func(n int, from uint64, w http.ResponseWriter)
	froms  []uint64
}

func newFakeAgent(t *testing.T, answer func(n int, from uint64, w http.ResponseWriter)) *fakeAgent {
	f := &fakeAgent{answer: answer}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/health":
			json.NewEncoder(w).Encode(api.Health{Name: "fake"})
		case "/v1/jobs/j/events":
			var from uint64
			fmt.Sscan(r.URL.Query().Get("from"), &from)
			f.mu.Lock()
			n := len(f.froms)
			f.froms = append(f.froms, from)
			f.mu.Unlock()
			f.answer(n, from, w)
		default:
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": "no job", "code": "not_found"})
		}
	}))
	startFakeAgent(t, f.srv)
	return f
}

// startFakeAgent starts srv serving TLS with the certificate of fakeSecret's
// cluster, as an agent does, until the test ends.
func startFakeAgent(t *testing.T, srv *httptest.Server) {
	t.Helper()
	ca, err := pki.NewCA(fakeSecret)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("fake", []net.IP{net.IPv4(127, 0, 0, 1)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
}

// fakeSecret is the cluster secret of fake agents (writeSecret writes it).
var fakeSecret = []byte(strings.Repeat("ab", 32))

func (f *fakeAgent) client() *api.Client { return api.NewClient(f.srv.URL, fakeSecret) }

func (f *fakeAgent) requests() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.froms...)
}

// send writes the events of evs with seq ≥ from and below until.
func send(w http.ResponseWriter, evs []job.Event, from, until uint64) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, e := range evs {
		if e.Seq >= from && e.Seq < until {
			enc.Encode(e)
		}
	}
	w.(http.Flusher).Flush()
}

func fastStream(c *api.Client, follow bool, notes *bytes.Buffer) *jobStream {
	s := newJobStream(c, "j", follow, notes)
	s.retryFor, s.backoff, s.maxBackoff = time.Second, 10*time.Millisecond, 50*time.Millisecond
	return s
}

// A stream that breaks mid-job is resumed from the event after the last one
// read: every line once, in order, and one note each way.
func TestJobStreamReattaches(t *testing.T) {
	evs := sampleEvents(t)
	for _, brk := range []struct {
		name string
		end  func(w http.ResponseWriter)
	}{
		{"connection cut", func(w http.ResponseWriter) { panic(http.ErrAbortHandler) }},
		{"stream ended early", func(w http.ResponseWriter) {}},
		{"error line", func(w http.ResponseWriter) {
			json.NewEncoder(w).Encode(map[string]string{"error": "coordinator n1 lost", "code": "bad_gateway"})
		}},
	} {
		t.Run(brk.name, func(t *testing.T) {
			agent := newFakeAgent(t, func(n int, from uint64, w http.ResponseWriter) {
				switch n {
				case 0:
					send(w, evs, from, 5)
					brk.end(w)
				case 1, 2: // the coordinator is not back yet
					w.WriteHeader(http.StatusServiceUnavailable)
					json.NewEncoder(w).Encode(map[string]string{"error": "no coordinator", "code": "not_available"})
				default:
					send(w, evs, 1, 100) // more than asked: the stream must skip what it has
				}
			})
			var stdout, stderr, notes bytes.Buffer
			p := jobPrinter{stdout: &stdout, stderr: &stderr, v: showOutput}
			d, err := fastStream(agent.client(), true, &notes).each(p.print)
			if err != nil || d == nil || d.State != job.Succeeded {
				t.Fatalf("each = %+v, %v; want the job's end, succeeded", d, err)
			}
			if got, want := fmt.Sprint(agent.requests()), "[1 5 5 5]"; got != want {
				t.Errorf("asked for events from %s, want %s", got, want)
			}
			want := "[0] step 1\nshoal: rank 1 killed by signal 9; restarting from epoch 1 (0.2 s of work lost)\nshoal: warning: epoch 2 unusable\n[0] step 1\n"
			if stdout.String() != want || stderr.String() != "[1] warning\n" {
				t.Errorf("printed\n%q\n%q\nwant\n%q\n%q", &stdout, &stderr, want, "[1] warning\n")
			}
			if got, want := notes.String(), "shoal: lost contact with the job's coordinator; re-attaching\nshoal: re-attached\n"; got != want {
				t.Errorf("notes %q, want %q", got, want)
			}
		})
	}
}

// Without --follow, the end of what is recorded is the end: no re-attach.
func TestJobStreamWithoutFollow(t *testing.T) {
	evs := sampleEvents(t)
	agent := newFakeAgent(t, func(n int, from uint64, w http.ResponseWriter) { send(w, evs, from, 5) })
	var got []uint64
	var notes bytes.Buffer
	d, err := fastStream(agent.client(), false, &notes).each(func(e job.Event) { got = append(got, e.Seq) })
	if d != nil || err != nil || fmt.Sprint(got) != "[1 2 3 4]" || notes.Len() != 0 {
		t.Errorf("each = %+v, %v, events %v, notes %q; want nil, nil, [1 2 3 4], none", d, err, got, &notes)
	}
}

func TestJobStreamGivesUp(t *testing.T) {
	evs := sampleEvents(t)
	agent := newFakeAgent(t, func(n int, from uint64, w http.ResponseWriter) {
		if n == 0 {
			send(w, evs, from, 3)
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusBadGateway)
		json.NewEncoder(w).Encode(map[string]string{"error": "coordinator n1 does not answer", "code": "bad_gateway"})
	})
	var notes, stderr bytes.Buffer
	start := time.Now()
	_, err := fastStream(agent.client(), true, &notes).each(func(job.Event) {})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("each = %v after %v, want an error within the 1 s bound", err, time.Since(start))
	}
	if code := followFailed("run", "j", agent.client(), err, &stderr); code != exitFailure ||
		stderr.String() != "shoal run: job j: could not re-attach within 1 s: coordinator n1 does not answer\n" {
		t.Errorf("followFailed: exit %d, %q", code, &stderr)
	}
	if n := len(agent.requests()); n < 3 {
		t.Errorf("%d requests, want the first and at least two tries", n)
	}
	if notes.String() != "shoal: lost contact with the job's coordinator; re-attaching\n" {
		t.Errorf("notes %q", &notes)
	}
}

// When the agent itself stops answering there is no one to re-attach through:
// say so at once, without the re-attach note.
func TestJobStreamAgentGone(t *testing.T) {
	evs := sampleEvents(t)
	var agent *fakeAgent
	agent = newFakeAgent(t, func(n int, from uint64, w http.ResponseWriter) {
		send(w, evs, from, 3)
		agent.srv.Listener.Close()
		panic(http.ErrAbortHandler)
	})
	var notes, stderr bytes.Buffer
	_, err := fastStream(agent.client(), true, &notes).each(func(job.Event) {})
	code := followFailed("run", "j", agent.client(), err, &stderr)
	want := fmt.Sprintf("shoal run: the agent at %s stopped answering: cannot follow job j any more (another node's agent may: shoal wait j)\n", agent.client().Addr())
	if code != exitFailure || stderr.String() != want || notes.Len() != 0 {
		t.Errorf("exit %d, stderr %q, notes %q; want 1, %q, none", code, &stderr, &notes, want)
	}
}

func TestFollowUnknownJob(t *testing.T) {
	agent := newFakeAgent(t, nil)
	for _, cmd := range []string{"wait", "logs", "events"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{cmd, "--agent", agent.srv.Listener.Addr().String(), "--secret-file", writeSecret(t), "nosuch"}, &stdout, &stderr)
		want := fmt.Sprintf("shoal %s: no job \"nosuch\" known to the agent at %s\n", cmd, agent.srv.Listener.Addr())
		if code != exitNoJob || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("shoal %s nosuch: exit %d, stderr %q, stdout %q; want %d and %q", cmd, code, &stderr, &stdout, exitNoJob, want)
		}
	}
}

func writeSecret(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, append(fakeSecret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
