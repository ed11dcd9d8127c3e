package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/internal/job"
)

// jobListParams are the query parameters GET /v1/jobs takes.
var jobListParams = []string{"state", "owner", "since", "limit", "before"}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	q, err := ParseJobQuery(r.URL.Query(), time.Now())
	if err != nil {
		return err
	}
	jobs, err := s.jobService().Jobs(r.Context())
	if err != nil {
		return err
	}
	if c := CallerOf(r.Context()); c != nil {
		// A new slice: the service's may be its own.
		var own []job.Job
		for _, j := range jobs {
			if c.Owns(j) {
				own = append(own, j)
			}
		}
		jobs = own
	}
	page, next := q.Select(jobs)
	if page == nil {
		page = []job.Job{}
	}
	l := JobList{Jobs: page, Next: next.String()}
	if !next.IsZero() {
		l.More = q.Count(jobs) - len(page)
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

// ParseJobQuery reads the query parameters of GET /v1/jobs, with now the time
// a since= duration counts back from. An error is a 400 naming the parameter.
func ParseJobQuery(v url.Values, now time.Time) (job.Query, error) {
	var q job.Query
	for k, vs := range v {
		if !slices.Contains(jobListParams, k) {
			return q, fmt.Errorf("%w: unknown query parameter %q: want %s", ErrBadRequest, k, strings.Join(jobListParams, ", "))
		}
		if len(vs) > 1 {
			return q, fmt.Errorf("%w: %s given %d times: want it once (state takes a comma-separated list)", ErrBadRequest, k, len(vs))
		}
	}
	var err error
	if s := v.Get("state"); v.Has("state") {
		if q.States, err = job.ParseStates(s); err != nil {
			return q, err
		}
	}
	if q.Owner = v.Get("owner"); v.Has("owner") && q.Owner == "" {
		return q, fmt.Errorf("%w: owner \"\": want a login name or a uid", ErrBadRequest)
	}
	if s := v.Get("since"); v.Has("since") {
		if q.Since, err = ParseSince(s, now); err != nil {
			return q, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
	}
	if s := v.Get("limit"); v.Has("limit") {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 1 {
			return q, fmt.Errorf("%w: limit %q: want a whole number of jobs, at least 1", ErrBadRequest, s)
		}
	}
	if s := v.Get("before"); v.Has("before") {
		if q.Before, err = job.ParseCursor(s); err != nil {
			return q, fmt.Errorf("%w: before: %v", ErrBadRequest, err)
		}
	}
	return q, nil
}

// ParseSince reads since=: an RFC 3339 time (2025-06-01T09:00:00Z), or a Go
// duration (2h, 90m) counted back from now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q: want a time (RFC 3339: 2025-06-01T09:00:00Z) or a duration back from now (2h, 90m)", s)
}

// jobQueryValues is q as the query parameters of GET /v1/jobs.
func jobQueryValues(q job.Query) url.Values {
	v := url.Values{}
	if len(q.States) > 0 {
		states := make([]string, len(q.States))
		for i, st := range q.States {
			states[i] = string(st)
		}
		v.Set("state", strings.Join(states, ","))
	}
	if q.Owner != "" {
		v.Set("owner", q.Owner)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if !q.Before.IsZero() {
		v.Set("before", q.Before.String())
	}
	return v
}

// ListJobs calls GET /v1/jobs with the query's filters and page: the agent
// selects the jobs, so that only the page travels.
func (c *Client) ListJobs(ctx context.Context, q job.Query) (JobList, error) {
	var l JobList
	path := "/v1/jobs"
	if v := jobQueryValues(q); len(v) > 0 {
		path += "?" + v.Encode()
	}
	err := c.call(ctx, "GET", path, nil, &l)
	return l, err
}
