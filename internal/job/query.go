package job

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrBadCursor: a page cursor ([Query.Before]) that [ParseCursor] cannot read.
var ErrBadCursor = errors.New("job: bad cursor")

// Query selects jobs from a list and cuts it into pages, newest first: the
// parameters of GET /v1/jobs and the filters of `shoal jobs`. The zero Query
// selects every job, in one page.
type Query struct {
	// States keeps the jobs in one of these states; empty: any state.
	States []State
	// Owner keeps the jobs that run as this user, a login name or a uid, as
	// `shoal jobs` names owners: "root" (or "0") is also a job without an
	// owner, which runs as the agents' user. "": anyone's.
	Owner string
	// Since keeps the jobs that had not ended by then: submitted since, or
	// running then, or ended since (as sacct's --starttime). Zero: any.
	Since time.Time
	// Limit is the most jobs in one page; 0: no bound.
	Limit int
	// Before starts the page after this job, in the list's order: the Next of
	// the page before. Zero: at the newest job.
	Before Cursor
}

// Cursor is where a page of jobs starts: after the job submitted at Submitted
// with id ID. Jobs are ordered newest first, ties by id, so a cursor stays
// right while jobs are submitted (they come before it) or dropped.
type Cursor struct {
	Submitted time.Time
	ID        string
}

// IsZero reports whether c is no cursor: the first page.
func (c Cursor) IsZero() bool { return c.ID == "" && c.Submitted.IsZero() }

// String is the cursor as GET /v1/jobs takes it: "UNIXNANO.ID". A job id
// holds no character a shell or a URL treats specially, nor does the number.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.Submitted.UnixNano(), 10) + "." + c.ID
}

// ParseCursor reads a cursor [Cursor.String] wrote.
func ParseCursor(s string) (Cursor, error) {
	n, id, ok := strings.Cut(s, ".")
	ns, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || !ValidID(id) {
		return Cursor{}, fmt.Errorf("%w: %q: want the next of a page (a number, a dot and a job id)", ErrBadCursor, s)
	}
	return Cursor{Submitted: time.Unix(0, ns), ID: id}, nil
}

// CursorOf is the cursor just past j.
func CursorOf(j Job) Cursor { return Cursor{Submitted: j.Submitted, ID: j.ID} }

// newer reports whether a comes before b in a list of jobs: submitted later,
// or at the same time with a greater id.
func newer(a, b Cursor) bool {
	if !a.Submitted.Equal(b.Submitted) {
		return a.Submitted.After(b.Submitted)
	}
	return a.ID > b.ID
}

// Match reports whether j passes the query's filters (States, Owner, Since).
func (q Query) Match(j Job) bool {
	if len(q.States) > 0 && !slices.Contains(q.States, j.State) {
		return false
	}
	if q.Owner != "" && !ownedBy(j.Spec.Owner, q.Owner) {
		return false
	}
	return q.Since.IsZero() || j.Ended.IsZero() || !j.Ended.Before(q.Since)
}

// ownedBy reports whether a job of owner o runs as user, a login name or a uid.
func ownedBy(o *Owner, user string) bool {
	if o == nil {
		return user == "root" || user == "0"
	}
	return user == o.Name || user == strconv.Itoa(o.UID)
}

// Select returns the page of jobs the query asks for, newest first, and the
// cursor of the next page: zero when this page holds the last of them.
func (q Query) Select(jobs []Job) (page []Job, next Cursor) {
	for _, j := range jobs {
		if q.Match(j) && (q.Before.IsZero() || newer(q.Before, CursorOf(j))) {
			page = append(page, j)
		}
	}
	slices.SortFunc(page, func(a, b Job) int {
		switch {
		case newer(CursorOf(a), CursorOf(b)):
			return -1
		case newer(CursorOf(b), CursorOf(a)):
			return 1
		}
		return 0
	})
	if q.Limit > 0 && len(page) > q.Limit {
		page = page[:q.Limit]
		next = CursorOf(page[len(page)-1])
	}
	return page, next
}

// Count returns how many of jobs the query matches from its cursor on, all
// its pages together.
func (q Query) Count(jobs []Job) int {
	n := 0
	for _, j := range jobs {
		if q.Match(j) && (q.Before.IsZero() || newer(q.Before, CursorOf(j))) {
			n++
		}
	}
	return n
}

// ParseStates reads a comma-separated list of job states ("running,failed").
func ParseStates(s string) ([]State, error) {
	var out []State
	for _, w := range strings.Split(s, ",") {
		st := State(strings.TrimSpace(w))
		if !slices.Contains(States, st) {
			names := make([]string, len(States))
			for i, s := range States {
				names[i] = string(s)
			}
			return nil, &Error{ErrInvalid, fmt.Sprintf("state %q: want %s, or several joined by commas", st, strings.Join(names, ", "))}
		}
		out = append(out, st)
	}
	return out, nil
}
