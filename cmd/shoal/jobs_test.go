package main

import (
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/job"
)

func TestDescribeRedundancy(t *testing.T) {
	for _, tt := range []struct {
		spec job.Spec
		want string
	}{
		{job.Spec{}, "copy (each shard on 2 nodes)"},
		{job.Spec{Redundancy: 3}, "copy:3 (each shard on 3 nodes)"},
		{job.Spec{Parity: &job.Parity{K: 3, M: 2}}, "rs:3+2 (one copy of each shard, Reed–Solomon parity over groups of 3 on 2 other nodes)"},
	} {
		if got := describeRedundancy(tt.spec); got != tt.want {
			t.Errorf("describeRedundancy(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.Local)

func TestElapsed(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {59*time.Second + 900*time.Millisecond, "59s"}, {time.Minute, "1m00s"},
		{12*time.Minute + 5*time.Second, "12m05s"}, {3*time.Hour + 5*time.Minute + 59*time.Second, "3h05m"},
		{52 * time.Hour, "2d04h"},
	} {
		if got := elapsed(tt.d); got != tt.want {
			t.Errorf("elapsed(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2025, 6, 3, 16, 30, 0, 0, time.Local)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"2h", now.Add(-2 * time.Hour)},
		{"90m", now.Add(-90 * time.Minute)},
		{"3d", time.Date(2025, 5, 31, 16, 30, 0, 0, time.Local)},
		{"15:04", time.Date(2025, 6, 3, 15, 4, 0, 0, time.Local)},
		{"2025-06-01", time.Date(2025, 6, 1, 0, 0, 0, 0, time.Local)},
		{"2025-06-01 09:30", time.Date(2025, 6, 1, 9, 30, 0, 0, time.Local)},
		{"2025-06-01T09:30:00Z", time.Date(2025, 6, 1, 9, 30, 0, 0, time.UTC)},
	} {
		if got, err := parseSince(tt.in, now); err != nil || !got.Equal(tt.want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-2h", "2025-13-01", "25:00"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("parseSince(%q): no error", bad)
		}
	}
}

// TestPrintJobs: the table says when each job was submitted and how long it
// ran, and how to list the next page.
func TestPrintJobs(t *testing.T) {
	now := t0.Add(3 * time.Hour)
	l := api.JobList{Jobs: []job.Job{
		{ID: "waits", State: job.Pending, Submitted: now.Add(-5 * time.Second), Spec: job.Spec{Ranks: 2}},
		{ID: "runs", State: job.Running, Submitted: t0.Add(time.Hour), Started: t0.Add(time.Hour + 3*time.Second), Spec: job.Spec{Ranks: 4},
			Placement: map[string][]int{"n1": {0, 1}, "n2": {2, 3}}, Epoch: 12, Restarts: 1},
		{ID: "done", State: job.Succeeded, Submitted: t0, Started: t0.Add(2 * time.Second), Ended: t0.Add(12*time.Minute + 32*time.Second),
			Spec: job.Spec{Ranks: 1, Owner: &job.Owner{UID: 1001, Name: "alice"}}},
	}, Next: "1748772000000000000.done", More: 70}
	var b strings.Builder
	printJobs(&b, l, []string{"--state", "running,succeeded", "--limit", "3", "--agent", "10.0.0.1:7947"}, now)
	want := `ID     OWNER  STATE      SUBMITTED  DURATION  RANKS  EPOCH  RESTARTS  PLACEMENT
waits  root   pending    5s ago     -         2      0      0         
runs   root   running    2h00m ago  1h59m     4      12     1         n1:2 n2:2
done   alice  succeeded  3h00m ago  12m30s    1      0      0         
70 older jobs; the next 3: shoal jobs --state running,succeeded --limit 3 --agent 10.0.0.1:7947 --before 1748772000000000000.done; all: shoal jobs --state running,succeeded --agent 10.0.0.1:7947 --all
`
	if got := b.String(); got != want {
		t.Errorf("printJobs:\n%s\nwant:\n%s", got, want)
	}
}

// TestJobsPage: the table lists the newest 50 jobs unless --limit or --all
// says otherwise; --json lists every one; the line after a page counts the
// older jobs, and the next page is no larger than what is left.
func TestJobsPage(t *testing.T) {
	for _, tt := range []struct {
		name   string
		f      jobFilters
		asJSON bool
		want   int
	}{
		{"no flag", jobFilters{}, false, 50},
		{"--json", jobFilters{}, true, 0},
		{"--limit 7", jobFilters{limited: true, q: job.Query{Limit: 7}}, false, 7},
		{"--limit 0", jobFilters{limited: true}, false, 0},
		{"--all", jobFilters{all: true}, false, 0},
		{"--json --limit 7", jobFilters{limited: true, q: job.Query{Limit: 7}}, true, 7},
	} {
		if got := tt.f.query(tt.asJSON).Limit; got != tt.want {
			t.Errorf("%s: limit %d, want %d", tt.name, got, tt.want)
		}
	}
	page := make([]job.Job, 50)
	for _, tt := range []struct {
		l    api.JobList
		args []string
		want string
	}{
		{api.JobList{Jobs: page, Next: "C", More: 12}, nil, "12 older jobs; the next 12: shoal jobs --before C; all: shoal jobs --all"},
		{api.JobList{Jobs: page, Next: "C", More: 1}, []string{"--owner", "bob"}, "1 older job; the next 1: shoal jobs --owner bob --before C; all: shoal jobs --owner bob --all"},
		{api.JobList{Jobs: page[:2], Next: "C", More: 90}, []string{"--limit=2", "--before", "B"}, "90 older jobs; the next 2: shoal jobs --limit=2 --before C; all: shoal jobs --all"},
		{api.JobList{Jobs: page[:2], Next: "C"}, []string{"--limit", "2"}, "older jobs; the next 2: shoal jobs --limit 2 --before C; all: shoal jobs --all"},
	} {
		if got := moreLine(tt.l, tt.args); got != tt.want {
			t.Errorf("moreLine(%d jobs, more %d, %q):\n got %s\nwant %s", len(tt.l.Jobs), tt.l.More, tt.args, got, tt.want)
		}
	}
}

func TestNextPage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--limit", "2"}, "shoal jobs --limit 2 --before C"},
		{[]string{"--limit=2", "--before", "X", "--owner", "o'brien"}, `shoal jobs --limit=2 --owner 'o'\''brien' --before C`},
		{[]string{"-before=X", "--since", "2025-06-01 10:00"}, "shoal jobs --since '2025-06-01 10:00' --before C"},
	} {
		if got := nextPage(tt.args, "C"); got != tt.want {
			t.Errorf("nextPage(%q) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

func TestJobTimes(t *testing.T) {
	now := t0.Add(26 * time.Hour)
	for _, tt := range []struct {
		j    job.Job
		want string
	}{
		{job.Job{Submitted: now.Add(-time.Minute)}, "submitted 2025-06-02 13:59:00 (1m00s ago); not started"},
		{job.Job{Submitted: t0, Ended: t0.Add(4 * time.Second)}, "submitted 2025-06-01 12:00:00 (1d02h ago); ended 12:00:04 without starting"},
		{job.Job{Submitted: now.Add(-time.Hour), Started: now.Add(-59 * time.Minute)}, "submitted 2025-06-02 13:00:00 (1h00m ago); started 13:01:00, running for 59m00s"},
		{job.Job{Submitted: t0, Started: t0.Add(time.Second), Ended: t0.Add(13 * time.Hour)}, "submitted 2025-06-01 12:00:00 (1d02h ago); started 12:00:01; ended 2025-06-02 01:00:00, after 12h59m"},
	} {
		if got := jobTimes(tt.j, now); got != tt.want {
			t.Errorf("jobTimes(%v, %v, %v):\n got %s\nwant %s", tt.j.Submitted, tt.j.Started, tt.j.Ended, got, tt.want)
		}
	}
}

// TestJobsFlags: a bad filter is a usage error in one line naming the flag,
// before any agent is asked.
func TestJobsFlags(t *testing.T) {
	t.Setenv("SHOAL_DATA_DIR", t.TempDir())
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "runing"}, `shoal jobs: invalid value "runing" for flag -state: state "runing": want pending, staging, running, moving, restarting, succeeded, failed, cancelled, or several joined by commas (see 'shoal jobs --help')` + "\n"},
		{[]string{"--limit", "-1"}, `shoal jobs: invalid value "-1" for flag -limit: want a whole number of jobs, or 0 for all (see 'shoal jobs --help')` + "\n"},
		{[]string{"--all", "--limit", "3"}, `shoal jobs: invalid value "3" for flag -limit: --all lists every job: give one of them (see 'shoal jobs --help')` + "\n"},
		{[]string{"--limit", "3", "--all"}, `shoal jobs: invalid boolean flag all: --limit 3 lists 3: give one of them (see 'shoal jobs --help')` + "\n"},
		{[]string{"--since", "soon"}, `shoal jobs: invalid value "soon" for flag -since: want a duration back from now (2h, 90m, 3d) or a time (15:04, 2025-06-01, '2025-06-01 15:04', RFC 3339) (see 'shoal jobs --help')` + "\n"},
		{[]string{"--before", "x"}, `shoal jobs: invalid value "x" for flag -before: job: bad cursor: "x": want the next of a page (a number, a dot and a job id) (see 'shoal jobs --help')` + "\n"},
	} {
		if code, stdout, stderr := runOut(append([]string{"jobs"}, tt.args...)...); code != exitUsage || stdout != "" || stderr != tt.want {
			t.Errorf("shoal jobs %q: exit %d, stdout %q, stderr\n%s\nwant %d and\n%s", tt.args, code, stdout, stderr, exitUsage, tt.want)
		}
	}
}
