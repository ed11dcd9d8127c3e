package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/coord"
	"shoal/internal/engine"
	"shoal/internal/job"
	"shoal/internal/localrun"
	"shoal/internal/retention"
)

// runHere runs the job on this machine alone, coordinating it itself. A job
// id an earlier run here kept checkpoints under resumes from them when the
// program and its arguments are the same (localrun.Decide); the data of
// ended runs is collected first, by the agents' retention rules.
func runHere(f runFlags, program string, args []string, stdout, stderr io.Writer) int {
	o, _ := engine.ByName(f.engine)
	if _, err := o.Version(); err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return exitFailure
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: cannot find the shoal executable: %v\n", err)
		return exitFailure
	}
	id := f.jobID
	if id == "" {
		id = job.NewID(jobName(program, args))
	}
	f.jobID = id
	spec := f.jobSpec(append([]string{program}, args...), nil)
	if err := spec.Validate(); err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return exitUsage
	}
	ckptRoot, runRoot, err := localDirs()
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return exitFailure
	}
	store := localrun.Store{CkptRoot: ckptRoot, RunRoot: runRoot}
	lock, err := store.Lock(id, os.Getpid())
	if err != nil {
		if errors.Is(err, localrun.ErrRunning) {
			fmt.Fprintf(stderr, "shoal run: %v; choose another --job-id\n", err)
		} else {
			fmt.Fprintf(stderr, "shoal run: job %s: %v\n", id, err)
		}
		return exitFailure
	}
	defer lock.Release()
	kept, code := prepareHere(store, f, spec, stdout, stderr)
	if code >= 0 {
		return code
	}
	collectHere(store, f.quiet, stdout, stderr)

	cfg := coord.DefaultConfig(ckptRoot, runRoot, self)
	cfg.Engine = o
	cfg.Workdir, _ = os.Getwd()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var mu sync.Mutex // rank output and events share stdout
	level := runVerbosity(f)
	out := coord.Output{
		Stdout: &lockedWriter{mu: &mu, w: stdout},
		Stderr: &lockedWriter{mu: &mu, w: stderr},
		Events: func(e job.Event) {
			if !showEvent(e.Type, level) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stdout, "shoal: %s\n", e.Message)
		},
	}
	if !f.quiet {
		where := "checkpoints in " + filepath.Join(ckptRoot, id)
		if note := checkpointsNote(program, args); note != "" {
			where = note
		}
		fmt.Fprintf(stdout, "shoal: job %s: %s of %s on this node; %s\n",
			id, f.ranksWords(), jobWhat(program, args), where)
	}
	var res coord.Result
	if kept != nil {
		res = coord.RunKept(ctx, cfg, spec, out, *kept)
	} else {
		res = coord.Run(ctx, cfg, spec, out)
	}
	ended := res.Done()
	rec, _ := store.Read(id)
	if rec != nil {
		rec.State, rec.Reason, rec.Ended = ended.State, ended.Reason, time.Now()
		if err := store.Write(*rec); err != nil {
			fmt.Fprintf(stderr, "shoal run: warning: %v: its data stays until 'shoal gc --job %s' removes it\n", err, id)
		}
	}
	switch res.State {
	case job.Succeeded:
		if f.keep || f.keepFor > 0 {
			break // collected by the retention rules, as the flags ask
		}
		os.RemoveAll(filepath.Join(ckptRoot, id))
		os.RemoveAll(filepath.Join(runRoot, id))
	case job.Cancelled:
		fmt.Fprintf(stderr, "shoal run: job %s cancelled; %s\n", id, keptLine(store, f, id))
		return jobExit(ended)
	default:
		code := reportEnd("run", id, ended, stderr)
		if store.Held(id) {
			fmt.Fprintf(stderr, "shoal run: %s\n", keptLine(store, f, id))
		}
		return code
	}
	return reportEnd("run", id, ended, stderr)
}

// prepareHere decides what the run of spec does with what an earlier run of
// the job kept, says so, and records the run as running. It returns the
// checkpoints to resume from (nil: a fresh start), or an exit code.
func prepareHere(store localrun.Store, f runFlags, spec job.Spec, stdout, stderr io.Writer) (*coord.Kept, int) {
	id := spec.ID
	ident, err := localrun.IdentityOf(spec)
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return nil, exitFailure
	}
	old, err := store.Read(id)
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %v; give --fresh to remove what is kept and start from the beginning\n", err)
		return nil, exitFailure
	}
	held := store.Held(id)
	now := time.Now()
	d := localrun.Decide(id, old, held, f.fresh, ident, now)
	var kept *coord.Kept
	switch d.Action {
	case localrun.Refuse:
		fmt.Fprintf(stderr, "shoal run: %v\n", d.Err)
		return nil, exitFailure
	case localrun.Resume:
		kept = &coord.Kept{Why: d.Why}
	case localrun.Fresh:
		if err := store.Clear(id); err != nil {
			fmt.Fprintf(stderr, "shoal run: job %s: removing what an earlier run kept: %v\n", id, err)
			return nil, exitFailure
		}
		if (old != nil || held) && !f.quiet {
			fmt.Fprintf(stdout, "shoal: job %s: --fresh: removed what an earlier run kept; starting from the beginning\n", id)
		}
	}
	rec := localrun.Record{Job: id, Identity: ident, State: job.Running, Started: now, Keep: f.keepSpec()}
	if err := store.Write(rec); err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return nil, exitFailure
	}
	return kept, -1
}

// collectHere removes the data of ended runs on this machine that the
// retention rules let go, and says so in one line.
func collectHere(store localrun.Store, quiet bool, stdout, stderr io.Writer) {
	removed, err := store.Collect(retention.DefaultPolicy(), time.Now(), "", false)
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: warning: collecting the data of ended runs: %v\n", err)
		return
	}
	var jobs []string
	var bytes int64
	for _, r := range removed {
		if r.Err != nil {
			fmt.Fprintf(stderr, "shoal run: warning: removing %s: %v\n", r.Path, r.Err)
		}
		if r.Remove && r.Err == nil {
			bytes += r.Bytes
			if len(jobs) == 0 || jobs[len(jobs)-1] != r.Job {
				jobs = append(jobs, r.Job)
			}
		}
	}
	if len(jobs) > 0 && !quiet {
		fmt.Fprintf(stdout, "shoal: removed %s of ended runs past their retention (docs/retention.md): %s %s\n",
			job.Bytes(bytes), plural(len(jobs), "job"), strings.Join(jobs, ", "))
	}
}

// plural is "job" or "jobs".
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// keptLine says where a job that did not succeed keeps its checkpoints, for
// how long, and how to resume from them.
func keptLine(store localrun.Store, f runFlags, id string) string {
	dir := filepath.Join(store.CkptRoot, id)
	if !store.Held(id) {
		return fmt.Sprintf("it kept no complete checkpoint; %s", keptFor(f, id, "its data"))
	}
	return fmt.Sprintf("its checkpoints are kept in %s %s: 'shoal run --job-id %s' with the same program and arguments resumes from them",
		dir, keptFor(f, id, ""), id)
}

// keptFor says how long the data of an ended run stays, by the retention rules.
func keptFor(f runFlags, id, what string) string {
	if what != "" {
		what += " stays "
	}
	switch {
	case f.keep:
		return fmt.Sprintf("%suntil 'shoal gc --job %s' removes it (--keep)", what, id)
	case f.keepFor > 0:
		return fmt.Sprintf("%sfor %s (--keep-for)", what, durationWords(f.keepFor))
	}
	return fmt.Sprintf("%sfor %s (docs/retention.md)", what, durationWords(retention.DefaultFailed))
}

// durationWords is a duration as a user writes it: 24h, 90m, 1h30m, 45s.
func durationWords(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
