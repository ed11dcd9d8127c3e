package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
)

// A refused cancel or rebalance exits with the code that says why: 4 for a job
// the agent does not know, 5 for one that has ended, 1 otherwise.
func TestRefusal(t *testing.T) {
	ended := &job.Job{ID: "j", State: job.Succeeded, Ended: time.Now()}
	running := &job.Job{ID: "j", State: job.Running}
	notFound := &api.Error{Status: 404, Code: "not_found", Message: `api: not found: no job "j"`}
	conflict := &api.Error{Status: 409, Code: "conflict", Message: "api: conflict: job j has already ended"}
	refused := &api.Error{Status: 409, Code: "conflict", Message: "api: conflict: not rebalancing job j: no faster layout"}
	for _, c := range []struct {
		cmd  string
		err  error
		now  *job.Job
		line string
		code int
	}{
		{"cancel", notFound, nil, `shoal cancel: no job "j" known to the agent at A`, exitNoJob},
		{"rebalance", notFound, nil, `shoal rebalance: no job "j" known to the agent at A`, exitNoJob},
		{"cancel", conflict, ended, "shoal cancel: job j has already ended: succeeded", exitEnded},
		{"rebalance", conflict, &job.Job{State: job.Cancelled, Ended: time.Now()}, "shoal rebalance: job j has already ended: cancelled", exitEnded},
		{"rebalance", refused, running, "shoal rebalance: not rebalancing job j: no faster layout", exitFailure},
		{"cancel", conflict, nil, "shoal cancel: job j has already ended", exitFailure}, // the job could not be read again
		{"cancel", fmt.Errorf("%w: dial: refused", errkind.Unreachable), nil, "shoal cancel: agent unreachable: dial: refused (is the agent running?)", exitFailure},
		{"cancel", errors.New("api: internal error: boom"), nil, "shoal cancel: internal error: boom", exitFailure},
	} {
		line, code := refusal(c.cmd, "j", "A", c.err, c.now)
		if line != c.line || code != c.code {
			t.Errorf("refusal(%s, %v): got %q, exit %d; want %q, exit %d", c.cmd, c.err, line, code, c.line, c.code)
		}
	}
}

// shoal rebalance and cancel of a job the agent does not know exit 4, as shoal
// wait, logs and events do.
func TestRebalanceUnknownJob(t *testing.T) {
	agent := newFakeAgent(t, nil)
	for _, cmd := range []string{"rebalance", "cancel"} {
		code, stdout, stderr := runOut(cmd, "--agent", agent.srv.Listener.Addr().String(), "--secret-file", writeSecret(t), "nosuch")
		want := fmt.Sprintf("shoal %s: no job \"nosuch\" known to the agent at %s\n", cmd, agent.srv.Listener.Addr())
		if code != exitNoJob || stderr != want || stdout != "" {
			t.Errorf("shoal %s nosuch: exit %d, stderr %q, stdout %q; want %d and %q", cmd, code, stderr, stdout, exitNoJob, want)
		}
	}
}

// An agent's refusal is printed as its reason alone: the exit code, not the
// words of the status, tells its kind.
func TestErrorLine(t *testing.T) {
	quorum := &api.Error{Status: 409, Code: "conflict", Message: "api: conflict: the cluster has a quorum (3 of 3 voters alive; n1 leads): nothing to recover"}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{quorum, "the cluster has a quorum (3 of 3 voters alive; n1 leads): nothing to recover"},
		{fmt.Errorf("agent at A: %w", quorum), "agent at A: the cluster has a quorum (3 of 3 voters alive; n1 leads): nothing to recover"},
		{&api.Error{Status: 503, Code: "not_available", Message: "api: not available: the cluster has no quorum: 1 of 3 voters alive"}, "the cluster has no quorum: 1 of 3 voters alive"},
		{&api.Error{Status: 403, Code: "forbidden", Message: "api: forbidden: bob (uid 1002) may submit jobs as themself only"}, "bob (uid 1002) may submit jobs as themself only"},
		{&api.Error{Status: 401, Code: "unauthorized", Message: "api: unauthorized: bad signature"}, "the agent refused the request: bad signature"},
		{&api.Error{Status: 409, Code: "conflict", Message: `job id "j" is taken; choose another id`}, `job id "j" is taken; choose another id`},
		{&api.Error{Status: 500, Code: "internal", Message: "open x: permission denied"}, "open x: permission denied"},
		{&api.Error{Status: 404, Message: "Not Found (status 404)"}, "Not Found (status 404)"}, // an answer without a body
		{fmt.Errorf("%w: dial: refused", errkind.Unreachable), "agent unreachable: dial: refused (is the agent running?)"},
	} {
		if got := errorLine(tt.err); got != tt.want {
			t.Errorf("errorLine(%q): got %q, want %q", tt.err, got, tt.want)
		}
	}
}

// shoal rebalance refused by the agent prints the agent's reason and exits 1.
func TestRebalanceRefused(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/health":
			json.NewEncoder(w).Encode(api.Health{Name: "fake"})
		case "POST /v1/jobs/j/rebalance":
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]string{"error": "api: conflict: not rebalancing job j: no faster layout", "code": "conflict"})
		case "GET /v1/jobs/j":
			json.NewEncoder(w).Encode(job.Job{ID: "j", State: job.Running})
		default:
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": "api: not found: no route", "code": "not_found"})
		}
	}))
	startFakeAgent(t, srv)
	code, stdout, stderr := runOut("rebalance", "--agent", srv.Listener.Addr().String(), "--secret-file", writeSecret(t), "j")
	if want := "shoal rebalance: not rebalancing job j: no faster layout\n"; code != exitFailure || stderr != want || stdout != "" {
		t.Errorf("shoal rebalance j: exit %d, stderr %q, stdout %q; want %d and %q", code, stderr, stdout, exitFailure, want)
	}
}
