package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"shoal/internal/job"
	"shoal/internal/localfarm"
	"shoal/internal/localrun"
)

// runFarmHere runs the farm on this machine alone, with the task runner a
// cluster's node runs: the same tasks, results, lines and exit codes. Its
// data is kept as `shoal run` keeps a local job's (localrun.Store), in the
// job's run directory, and collected by the same retention rules; run again
// under the same id, it runs only the tasks without a result (localfarm.Admit).
func runFarmHere(f farmFlags, program string, args, tasks []string, stdout, stderr io.Writer) int {
	switch {
	case f.detach:
		fmt.Fprintln(stderr, "shoal farm: --detach needs an agent, and none runs on this machine (or --local was given)")
		return exitUsage
	case f.dispatch != "":
		fmt.Fprintln(stderr, "shoal farm: --dispatch needs an agent, and none runs on this machine (or --local was given)")
		return exitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shoal farm: cannot find the shoal executable: %v\n", err)
		return exitFailure
	}
	name := filepath.Base(program)
	id := f.jobID
	if id == "" {
		id = job.NewID(name)
	}
	ckptRoot, runRoot, err := localDirs()
	if err != nil {
		fmt.Fprintf(stderr, "shoal farm: %v\n", err)
		return exitFailure
	}
	store := localrun.Store{CkptRoot: ckptRoot, RunRoot: runRoot}
	lock, err := store.Lock(id, os.Getpid())
	if err != nil {
		fmt.Fprintf(stderr, "shoal farm: %v\n", err)
		return exitFailure
	}
	defer lock.Release()
	collectHere(store, f.quiet, stderr, stderr)

	host, _ := os.Hostname()
	cfg := localfarm.Config{DataDir: filepath.Join(runRoot, id), Node: host, Slots: runtime.NumCPU(), ShoalBin: self}
	spec := job.Spec{ID: id, Argv: append([]string{name}, args...), Env: envMap(f.env),
		Farm: &job.FarmSpec{Tasks: tasks, Prefetch: f.prefetch, Retries: f.retries, Rerun: f.rerun}}
	for i, in := range append([]string{program}, f.files...) {
		file, err := cacheFile(cfg, in)
		if err != nil {
			fmt.Fprintf(stderr, "shoal farm: %s: %v\n", in, err)
			return exitUsage
		}
		file.Mode = 0o644
		if i == 0 {
			file.Name, file.Mode = name, 0o755
		}
		spec.Files = append(spec.Files, file)
	}
	old, err := store.Read(id)
	if err != nil {
		fmt.Fprintf(stderr, "shoal farm: %v\n", err)
		return exitFailure
	}
	if _, err := localfarm.Admit(id, old, spec, time.Now()); err != nil {
		fmt.Fprintf(stderr, "shoal farm: %v\n", err)
		return exitFailure
	}
	rec := localrun.Record{Job: id, State: job.Running, Started: time.Now(), Farm: &spec}
	if err := store.Write(rec); err != nil {
		fmt.Fprintf(stderr, "shoal farm: %v\n", err)
		return exitFailure
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "shoal: farm %s: %s of %s on this machine (no agent), %s at once\n", id, taskCount(len(tasks)), name, taskCount(cfg.Slots))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	local := cfg.Results()
	col := &collector{local: &local, job: id, out: f.out, total: len(tasks), stdout: stdout, stderr: stderr,
		quiet: f.quiet, done: map[int]bool{}, skip: map[int]bool{}}
	cfg.Spec, cfg.Events = spec, col.event
	d := localfarm.Run(ctx, cfg)
	if col.err == nil && d.State != job.Cancelled {
		col.collectRest()
	}
	rec.State, rec.Reason, rec.Ended = d.State, d.Reason, time.Now()
	if err := store.Write(rec); err != nil {
		fmt.Fprintf(stderr, "shoal farm: warning: %v: its data stays until 'shoal gc --job %s' removes it\n", err, id)
	}
	if col.err != nil {
		fmt.Fprintf(stderr, "shoal farm: %v\n", col.err)
		return exitFailure
	}
	code := reportEnd("farm", id, d, stderr)
	if d.State != job.Succeeded {
		fmt.Fprintf(stderr, "shoal farm: its results are kept in %s %s: 'shoal farm --job-id %s' with the same tasks runs the tasks without one\n",
			filepath.Join(cfg.DataDir, "results"), keptFor(runFlags{}, id, ""), id)
	}
	return code
}

// cacheFile puts the file at path in the farm's file cache and describes it
// as a staged file of the job, named by its base name.
func cacheFile(cfg localfarm.Config, path string) (job.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return job.File{}, err
	}
	sum, err := cfg.Cache().PutFile(path)
	if err != nil {
		return job.File{}, err
	}
	return job.File{Name: filepath.Base(path), SHA256: sum, Size: st.Size()}, nil
}
