package main

import (
	"errors"
	"fmt"
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
		{"rebalance", refused, running, "shoal rebalance: conflict: not rebalancing job j: no faster layout", exitFailure},
		{"cancel", conflict, nil, "shoal cancel: conflict: job j has already ended", exitFailure}, // the job could not be read again
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
