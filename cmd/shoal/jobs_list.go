package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"shoal/internal/api"
	"shoal/internal/job"
)

// jobFilters are the flags of `shoal jobs` that select the jobs listed and the
// page; the agent applies them (GET /v1/jobs's parameters).
type jobFilters struct {
	q     job.Query
	given bool // any of the flags was given
	// limited: --limit was given (0 for all); all: --all.
	limited, all bool
}

// DefaultJobsPage is how many jobs `shoal jobs` lists without --limit or
// --all, the newest: a line after them says how many more there are.
const DefaultJobsPage = 50

// query is the query of the flags: without --limit or --all, a table lists the
// newest DefaultJobsPage jobs; JSON, for scripts, lists every one.
func (f jobFilters) query(asJSON bool) job.Query {
	q := f.q
	if !f.limited && !f.all && !asJSON {
		q.Limit = DefaultJobsPage
	}
	return q
}

func (f *jobFilters) register(fs *flag.FlagSet) {
	fs.Func("state", "list the jobs in these `STATES` only, joined by commas: pending, staging, running, moving, restarting, succeeded, failed, cancelled", func(s string) error {
		f.given = true
		var err error
		f.q.States, err = job.ParseStates(s)
		return err
	})
	fs.Func("owner", "list the jobs that run as `USER` only, a login name or uid (root: also the jobs that run as the agents' user); a user other than root sees only their own jobs whatever this says", func(s string) error {
		if s == "" {
			return errors.New("want a login name or a uid")
		}
		f.given, f.q.Owner = true, s
		return nil
	})
	fs.Func("since", "list the jobs that had not ended by `WHEN`: a duration back from now (2h, 90m, 3d) or a time (15:04, 2025-06-01, '2025-06-01 15:04', RFC 3339)", func(s string) error {
		t, err := parseSince(s, time.Now())
		f.given, f.q.Since = true, t
		return err
	})
	fs.Func("limit", fmt.Sprintf("list at most `N` jobs, the newest; the last line then says how many more there are and how to list the next ones; 0 for all (default: %d in the table, all with --json)", DefaultJobsPage), func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errors.New("want a whole number of jobs, or 0 for all")
		}
		if f.all && n > 0 {
			return errors.New("--all lists every job: give one of them")
		}
		f.given, f.limited, f.q.Limit = true, true, n
		return nil
	})
	fs.BoolFunc("all", "list every job, however many (as --limit 0)", func(s string) error {
		all, err := strconv.ParseBool(s)
		if all && f.q.Limit > 0 {
			return fmt.Errorf("--limit %d lists %d: give one of them", f.q.Limit, f.q.Limit)
		}
		f.given, f.all = true, all
		return err
	})
	fs.Func("before", "list the jobs after `CURSOR` in the list, newest first: the cursor the last page printed", func(s string) error {
		c, err := job.ParseCursor(s)
		f.given, f.q.Before = true, c
		return err
	})
}

// sinceLayouts are the times --since takes besides RFC 3339, in local time.
var sinceLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"}

// parseSince reads --since: a duration back from now (Go's, or whole days
// "3d"), an RFC 3339 time, a local date and time, or a local time of day today
// ("15:04").
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days >= 0 {
			return now.AddDate(0, 0, -days), nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, l := range sinceLayouts {
		if t, err := time.ParseInLocation(l, s, now.Location()); err == nil {
			return t, nil
		}
	}
	for _, l := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(l, s, now.Location()); err == nil {
			y, m, d := now.Date()
			return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), 0, now.Location()), nil
		}
	}
	return time.Time{}, errors.New("want a duration back from now (2h, 90m, 3d) or a time (15:04, 2025-06-01, '2025-06-01 15:04', RFC 3339)")
}

// printJobs prints a page of jobs as the table of `shoal jobs`, with now the
// time durations run to; next, when there are more, says how to list them:
// args is the command line of this page.
func printJobs(w io.Writer, l api.JobList, args []string, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOWNER\tSTATE\tSUBMITTED\tDURATION\tRANKS\tEPOCH\tRESTARTS\tPLACEMENT")
	for _, j := range l.Jobs {
		var nodes []string
		for n, ranks := range j.Placement {
			nodes = append(nodes, fmt.Sprintf("%s:%d", n, len(ranks)))
		}
		sort.Strings(nodes)
		ranks, where := rankCount(j), strings.Join(nodes, " ")
		if f := j.Spec.Farm; f != nil {
			ranks, where = "-", fmt.Sprintf("farm: %d tasks", len(f.Tasks))
			if p := j.Farm; p != nil {
				where = fmt.Sprintf("farm: %d/%d tasks done", p.Done, p.Total)
				if p.Failed > 0 {
					where += fmt.Sprintf(", %d failed", p.Failed)
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", j.ID, ownerName(j.Spec.Owner), j.State,
			elapsed(now.Sub(j.Submitted))+" ago", runTime(j, now), ranks, j.Epoch, j.Restarts, where)
	}
	tw.Flush()
	if l.Next != "" {
		fmt.Fprintln(w, moreLine(l, args))
	}
}

// moreLine says, after a page, how many older jobs there are and how to list
// them: "70 older jobs; the next 50: shoal jobs --before C; all: shoal jobs
// --all".
func moreLine(l api.JobList, args []string) string {
	older := "older jobs" // an agent that does not count them
	if l.More > 0 {
		older = job.Plural(l.More, "older job")
	}
	next := nextPage(args, l.Next)
	var all []string
	for _, w := range strings.Fields(next) {
		if w == "--before" {
			break
		}
		all = append(all, w)
	}
	n := len(l.Jobs)
	if l.More > 0 {
		n = min(n, l.More)
	}
	return fmt.Sprintf("%s; the next %d: %s; all: %s --all", older, n, next, strings.Join(withoutLimit(all), " "))
}

// withoutLimit drops --limit N (or --limit=N) from a command line.
func withoutLimit(words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(words[i], "-"), "=")
		if strings.HasPrefix(words[i], "-") && name == "limit" {
			if !hasValue {
				i++
			}
			continue
		}
		out = append(out, words[i])
	}
	return out
}

// nextPage is the command line that lists the page after the one args
// listed: args with --before CURSOR.
func nextPage(args []string, cursor string) string {
	words := []string{"shoal", "jobs"}
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if strings.HasPrefix(args[i], "-") && name == "before" {
			if !hasValue {
				i++
			}
			continue
		}
		words = append(words, shellWord(args[i]))
	}
	return strings.Join(append(words, "--before", cursor), " ")
}

// shellWord quotes s for a shell when it holds anything but plain characters.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runTime is how long j has run: from its first start to its end, or to now
// while it runs; "-" when it has not started.
func runTime(j job.Job, now time.Time) string {
	switch {
	case j.Started.IsZero():
		return "-"
	case j.Ended.IsZero():
		return elapsed(now.Sub(j.Started))
	}
	return elapsed(j.Ended.Sub(j.Started))
}

// elapsed prints d in its two largest units, rounded down: 45s, 12m30s,
// 3h05m, 2d04h.
func elapsed(d time.Duration) string {
	s := int64(max(d, 0) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

// jobTimes is the line of `shoal jobs JOB` that says when the job was
// submitted, started and ended, with now the time it is read.
func jobTimes(j job.Job, now time.Time) string {
	const full, day = "2006-01-02 15:04:05", "15:04:05"
	submitted := j.Submitted.In(now.Location())
	at := func(t time.Time) string {
		t = t.In(now.Location())
		if y, m, d := t.Date(); y == submitted.Year() && m == submitted.Month() && d == submitted.Day() {
			return t.Format(day)
		}
		return t.Format(full)
	}
	s := fmt.Sprintf("submitted %s (%s ago)", submitted.Format(full), elapsed(now.Sub(j.Submitted)))
	switch {
	case j.Started.IsZero() && j.Ended.IsZero():
		return s + "; not started"
	case j.Started.IsZero():
		return fmt.Sprintf("%s; ended %s without starting", s, at(j.Ended))
	case j.Ended.IsZero():
		return fmt.Sprintf("%s; started %s, running for %s", s, at(j.Started), runTime(j, now))
	}
	return fmt.Sprintf("%s; started %s; ended %s, after %s", s, at(j.Started), at(j.Ended), runTime(j, now))
}
