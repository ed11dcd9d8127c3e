package api

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
)

// listedJobs is a job service that holds jobs, for GET /v1/jobs.
type listedJobs struct {
	Unavailable
	jobs []job.Job
}

func (l *listedJobs) Jobs(context.Context) ([]job.Job, error) { return l.jobs, nil }

// TestListJobsQuery: GET /v1/jobs filters and pages on the agent, newest
// first; a bad parameter is a one-line 400 naming it.
func TestListJobsQuery(t *testing.T) {
	t0 := time.Now().Add(-3 * time.Hour)
	alice := &job.Owner{UID: 1001, GID: 1001, Name: "alice"}
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret})
	s.SetJobService(&listedJobs{jobs: []job.Job{
		{ID: "old", State: job.Succeeded, Submitted: t0, Ended: t0.Add(time.Minute)},
		{ID: "hers", State: job.Failed, Submitted: t0.Add(time.Hour), Ended: t0.Add(2 * time.Hour), Spec: job.Spec{Owner: alice}},
		{ID: "run1", State: job.Running, Submitted: t0.Add(2 * time.Hour)},
		{ID: "run2", State: job.Running, Submitted: t0.Add(150 * time.Minute), Spec: job.Spec{Owner: alice}},
	}})
	root := &Caller{UID: 0, GID: 0, Name: "root"}
	aliceCaller := &Caller{UID: 1001, GID: 1001, Name: "alice"}
	next := job.Cursor{Submitted: t0.Add(2 * time.Hour), ID: "run1"}.String()
	tests := []struct {
		name   string
		c      *Caller
		query  string
		status int
		want   []string // ids, or the error line
		next   string
	}{
		{"all, newest first", root, "", 200, []string{"run2", "run1", "hers", "old"}, ""},
		{"states", root, "state=running,failed", 200, []string{"run2", "run1", "hers"}, ""},
		{"owner", root, "owner=alice", 200, []string{"run2", "hers"}, ""},
		{"since a duration", root, "since=90m", 200, []string{"run2", "run1", "hers"}, ""},
		{"since a time", root, "since=" + url.QueryEscape(t0.Add(30*time.Second).Format(time.RFC3339Nano)), 200, []string{"run2", "run1", "hers", "old"}, ""},
		{"a page", root, "limit=2", 200, []string{"run2", "run1"}, next},
		{"the next page", root, "limit=2&before=" + next, 200, []string{"hers", "old"}, ""},
		{"a user sees their own", aliceCaller, "", 200, []string{"run2", "hers"}, ""},
		{"a user asking for another's sees none", aliceCaller, "owner=root", 200, []string{}, ""},
		{"bad state", root, "state=running,runing", 400, []string{`state "runing": want pending, staging, running, moving, restarting, succeeded, failed, cancelled, or several joined by commas`}, ""},
		{"bad limit", root, "limit=0", 400, []string{`api: bad request: limit "0": want a whole number of jobs, at least 1`}, ""},
		{"bad since", root, "since=yesterday", 400, []string{`api: bad request: since "yesterday": want a time (RFC 3339: 2025-06-01T09:00:00Z) or a duration back from now (2h, 90m)`}, ""},
		{"bad before", root, "before=run1", 400, []string{`api: bad request: before: job: bad cursor: "run1": want the next of a page (a number, a dot and a job id)`}, ""},
		{"empty owner", root, "owner=", 400, []string{`api: bad request: owner "": want a login name or a uid`}, ""},
		{"a parameter twice", root, "limit=1&limit=2", 400, []string{`api: bad request: limit given 2 times: want it once (state takes a comma-separated list)`}, ""},
		{"unknown parameter", root, "status=running", 400, []string{`api: bad request: unknown query parameter "status": want state, owner, since, limit, before`}, ""},
	}
	for _, tt := range tests {
		status, body := asCaller(t, s, tt.c, "GET", "/v1/jobs?"+tt.query, "")
		if status != tt.status {
			t.Errorf("%s: GET /v1/jobs?%s: status %d, want %d (%s)", tt.name, tt.query, status, tt.status, body)
			continue
		}
		if status != 200 {
			var e errorBody
			json.Unmarshal([]byte(body), &e)
			if e.Error != tt.want[0] || e.Code != "bad_request" || strings.Contains(e.Error, "\n") {
				t.Errorf("%s: GET /v1/jobs?%s: got %q (%s), want %q (bad_request)", tt.name, tt.query, e.Error, e.Code, tt.want[0])
			}
			continue
		}
		var l JobList
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, j := range l.Jobs {
			got = append(got, j.ID)
		}
		if !slices.Equal(got, tt.want) || l.Next != tt.next {
			t.Errorf("%s: GET /v1/jobs?%s: got %v, next %q; want %v, next %q", tt.name, tt.query, got, l.Next, tt.want, tt.next)
		}
	}
	// more counts the jobs the query matches after the page.
	for query, want := range map[string]int{"limit=1": 3, "limit=1&state=running,failed": 2, "limit=2&before=" + next: 0, "": 0} {
		_, body := asCaller(t, s, root, "GET", "/v1/jobs?"+query, "")
		var l JobList
		if err := json.Unmarshal([]byte(body), &l); err != nil || l.More != want {
			t.Errorf("GET /v1/jobs?%s: more %d, %v; want %d", query, l.More, err, want)
		}
	}
}

// TestJobQueryValues: what ListJobs sends is what the agent reads.
func TestJobQueryValues(t *testing.T) {
	q := job.Query{States: []job.State{job.Running, job.Failed}, Owner: "alice", Since: time.Date(2025, 6, 1, 9, 0, 0, 5, time.UTC),
		Limit: 20, Before: job.Cursor{Submitted: time.Unix(0, 42), ID: "j1"}}
	got, err := ParseJobQuery(jobQueryValues(q), time.Now())
	if err != nil || !slices.Equal(got.States, q.States) || got.Owner != q.Owner || !got.Since.Equal(q.Since) || got.Limit != q.Limit ||
		got.Before.String() != q.Before.String() {
		t.Errorf("ParseJobQuery(jobQueryValues(%+v)) = %+v, %v", q, got, err)
	}
}
