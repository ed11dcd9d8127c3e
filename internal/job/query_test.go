package job

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// listed is a list of jobs for the query tests: a submitted at t0, b at t0+1m,
// and so on; c and d at the same time.
func listed() []Job {
	alice := &Owner{UID: 1001, GID: 1001, Name: "alice"}
	return []Job{
		{ID: "a", State: Succeeded, Submitted: t0, Ended: t0.Add(30 * time.Minute)},
		{ID: "b", State: Failed, Submitted: t0.Add(time.Minute), Ended: t0.Add(2 * time.Hour), Spec: Spec{Owner: alice}},
		{ID: "d", State: Running, Submitted: t0.Add(2 * time.Minute), Spec: Spec{Owner: alice}},
		{ID: "c", State: Running, Submitted: t0.Add(2 * time.Minute)},
		{ID: "e", State: Pending, Submitted: t0.Add(3 * time.Minute), Spec: Spec{Owner: &Owner{UID: 1002}}},
	}
}

func ids(jobs []Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestQuerySelect(t *testing.T) {
	for _, tt := range []struct {
		name string
		q    Query
		want []string
		next Cursor
	}{
		{"everything, newest first, ties by id", Query{}, []string{"e", "d", "c", "b", "a"}, Cursor{}},
		{"states", Query{States: []State{Running, Failed}}, []string{"d", "c", "b"}, Cursor{}},
		{"owner by name", Query{Owner: "alice"}, []string{"d", "b"}, Cursor{}},
		{"owner by uid", Query{Owner: "1002"}, []string{"e"}, Cursor{}},
		{"root owns the jobs without an owner", Query{Owner: "root"}, []string{"c", "a"}, Cursor{}},
		{"since: not ended by then", Query{Since: t0.Add(time.Hour)}, []string{"e", "d", "c", "b"}, Cursor{}},
		{"since: ended at that instant counts", Query{Since: t0.Add(30 * time.Minute), Owner: "root"}, []string{"c", "a"}, Cursor{}},
		{"a first page", Query{Limit: 2}, []string{"e", "d"}, Cursor{t0.Add(2 * time.Minute), "d"}},
		{"the next page", Query{Limit: 2, Before: Cursor{t0.Add(2 * time.Minute), "d"}}, []string{"c", "b"}, Cursor{t0.Add(time.Minute), "b"}},
		{"the last page has no next", Query{Limit: 2, Before: Cursor{t0.Add(time.Minute), "b"}}, []string{"a"}, Cursor{}},
		{"a page that ends at the last job has no next", Query{Limit: 5}, []string{"e", "d", "c", "b", "a"}, Cursor{}},
		{"filters and pages together", Query{States: []State{Running, Failed}, Limit: 1, Before: Cursor{t0.Add(2 * time.Minute), "d"}}, []string{"c"}, Cursor{t0.Add(2 * time.Minute), "c"}},
	} {
		page, next := tt.q.Select(listed())
		if got := ids(page); !slices.Equal(got, tt.want) || next != tt.next {
			t.Errorf("%s: got %v, next %v; want %v, next %v", tt.name, got, next, tt.want, tt.next)
		}
	}
}

// TestCursorStaysRight: jobs submitted between two pages, and a job of the
// first page dropped, neither repeat nor skip a job of the second page.
func TestCursorStaysRight(t *testing.T) {
	jobs := listed()
	q := Query{Limit: 2}
	first, next := q.Select(jobs)
	jobs = append(jobs, Job{ID: "f", Submitted: t0.Add(time.Hour)}, Job{ID: "g", Submitted: t0.Add(time.Hour)})
	jobs = slices.DeleteFunc(jobs, func(j Job) bool { return j.ID == "d" })
	q.Before = next
	second, _ := q.Select(jobs)
	if got, want := ids(append(first, second...)), []string{"e", "d", "c", "b"}; !slices.Equal(got, want) {
		t.Errorf("two pages: got %v, want %v", got, want)
	}
}

func TestCursorString(t *testing.T) {
	c := Cursor{Submitted: time.Unix(0, 1748779200123456789), ID: "sim.v2-x"}
	if got, want := c.String(), "1748779200123456789.sim.v2-x"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	back, err := ParseCursor(c.String())
	if err != nil || !back.Submitted.Equal(c.Submitted) || back.ID != c.ID {
		t.Errorf("ParseCursor(%q) = %v, %v; want %v", c.String(), back, err, c)
	}
	for _, bad := range []string{"", "12", "x.job", "12.", "12.a/b"} {
		if _, err := ParseCursor(bad); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParseCursor(%q): got %v, want ErrBadCursor", bad, err)
		}
	}
}

func TestParseStates(t *testing.T) {
	got, err := ParseStates("running,failed")
	if want := []State{Running, Failed}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseStates(running,failed) = %v, %v; want %v", got, err, want)
	}
	_, err = ParseStates("running,runing")
	want := `state "runing": want pending, staging, running, moving, restarting, succeeded, failed, cancelled, or several joined by commas`
	if !errors.Is(err, ErrInvalid) || err.Error() != want {
		t.Errorf("ParseStates(running,runing): got %v, want ErrInvalid: %s", err, want)
	}
}

// TestApply: the job's record follows its transitions; it first ran at the
// first transition to running, which a restart does not move.
func TestApply(t *testing.T) {
	var j Job
	l := NewLifecycle("j", j.Apply)
	at := func(m int) Event { return Event{Time: t0.Add(time.Duration(m) * time.Minute)} }
	steps := []struct {
		to      State
		e       Event
		started time.Time
	}{
		{Staging, at(1), time.Time{}},
		{Running, at(2), t0.Add(2 * time.Minute)},
		{Restarting, Event{Time: t0.Add(3 * time.Minute), Restarts: 1}, t0.Add(2 * time.Minute)},
		{Staging, at(4), t0.Add(2 * time.Minute)},
		{Running, at(5), t0.Add(2 * time.Minute)},
	}
	for _, s := range steps {
		if err := l.UpdateState(s.to, s.e); err != nil {
			t.Fatal(err)
		}
		if j.State != s.to || !j.Started.Equal(s.started) {
			t.Errorf("after %s: got state %s, started %v; want %s, %v", s.to, j.State, j.Started, s.to, s.started)
		}
	}
	if j.Restarts != 1 {
		t.Errorf("restarts %d, want 1", j.Restarts)
	}
	j.Apply(Event{Type: EventEpoch, Epoch: 7})
	if j.Epoch != 7 || j.State != Running {
		t.Errorf("after epoch 7: epoch %d, state %s; want 7, running", j.Epoch, j.State)
	}
}
