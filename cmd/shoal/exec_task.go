package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"shoal/internal/files"
	"shoal/internal/results"
	"shoal/internal/taskrun"
)

func init() {
	register("exec-task", command{
		summary: "run one task of a farm on this node (used by shoal farm, not by hand)",
		run:     execTask,
		hidden:  true,
	})
}

const execTaskUsage = "usage: shoal exec-task --slots N [--stage NAME=SHA256:MODE]..."

// execTask is a farm's task runner on this node, started by the node's agent
// for the farm's coordinator: it places the job's staged files into the node's
// job directory, then runs the tasks the coordinator sends on standard input,
// N at a time, and answers on standard output (internal/taskrun). The tasks
// waiting in its queue are the node's prefetch: each starts the moment a slot
// is free, with no round trip to the coordinator.
func execTask(args []string, stdout, stderr io.Writer) int {
	if code, ok := dieWithParent(stderr); !ok {
		return code
	}
	slots := 0
	var stages []files.Stage
	for len(args) > 0 {
		if len(args) < 2 {
			fmt.Fprintln(stderr, execTaskUsage)
			return exitUsage
		}
		switch args[0] {
		case "--slots":
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "shoal exec-task: --slots %q: want a whole number ≥ 1\n", args[1])
				return exitUsage
			}
			slots = n
		case "--stage":
			s, err := files.ParseStage(args[1])
			if err != nil {
				fmt.Fprintf(stderr, "shoal exec-task: %v\n", err)
				return exitUsage
			}
			if s.For(runtime.GOARCH) {
				stages = append(stages, s)
			}
		default:
			fmt.Fprintln(stderr, execTaskUsage)
			return exitUsage
		}
		args = args[2:]
	}
	node, job := os.Getenv("SHOAL_NODE_DATA"), os.Getenv("SHOAL_JOB")
	if slots == 0 {
		fmt.Fprintln(stderr, execTaskUsage)
		return exitUsage
	}
	if node == "" || job == "" {
		fmt.Fprintln(stderr, "shoal exec-task: not started by a node's agent (SHOAL_NODE_DATA or SHOAL_JOB is not set)")
		return 127
	}
	jobDir := filepath.Join(node, "jobs", job)
	work := filepath.Join(jobDir, "work")
	os.Mkdir(jobDir, 0o700)
	cache := files.Cache{Dir: filepath.Join(node, "files")}
	for _, s := range stages {
		if err := cache.Place(work, filepath.Join(jobDir, "staged"), s); err != nil {
			fmt.Fprintf(stderr, "shoal: stage %s for job %s: %v\n", s.Name, job, err)
			return 127
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		fmt.Fprintf(stderr, "shoal: job directory %s: %v\n", work, err)
		return 127
	}
	r := taskrun.Runner{Job: job, Slots: slots, Dir: work, Store: &results.Store{Dir: filepath.Join(node, "results"), NoSync: true}}
	if err := r.Serve(os.Stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "shoal exec-task: %v\n", err)
		return 1
	}
	return 0
}
