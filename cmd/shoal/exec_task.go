package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/files"
)

func init() {
	register("exec-task", command{
		summary: "run one task of a farm on this node (used by shoal farm, not by hand)",
		run:     execTask,
		hidden:  true,
	})
}

const execTaskUsage = "usage: shoal exec-task --slots N [--stage NAME=SHA256:MODE]... -- PROGRAM [ARGS]"

// execTask runs one task of a farm, started by the node's agent for the farm's
// coordinator: it places the job's staged files into the node's job directory,
// waits for one of the node's N task slots (a task sent ahead, as prefetch,
// waits here, on the node, for a core), and becomes the program, which keeps
// the slot until it exits. The program's standard output is the task's result.
func execTask(args []string, stdout, stderr io.Writer) int {
	if code, ok := dieWithParent(stderr); !ok {
		return code
	}
	slots := 0
	var stages []files.Stage
	for len(args) > 0 && args[0] != "--" {
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
			stages = append(stages, s)
		default:
			fmt.Fprintln(stderr, execTaskUsage)
			return exitUsage
		}
		args = args[2:]
	}
	if len(args) > 0 {
		args = args[1:]
	}
	node, job := os.Getenv("SHOAL_NODE_DATA"), os.Getenv("SHOAL_JOB")
	if len(args) == 0 || slots == 0 {
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
		if err := cache.Place(work, s); err != nil {
			fmt.Fprintf(stderr, "shoal: stage %s for job %s: %v\n", s.Name, job, err)
			return 127
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil || os.Chdir(work) != nil {
		fmt.Fprintf(stderr, "shoal: job directory %s: %v\n", work, err)
		return 127
	}
	if err := takeSlot(filepath.Join(jobDir, "slots"), slots); err != nil {
		fmt.Fprintf(stderr, "shoal: task slot of job %s: %v\n", job, err)
		return 127
	}
	prog := args[0]
	if !strings.Contains(prog, "/") {
		prog = "./" + prog
	}
	err := syscall.Exec(prog, args, os.Environ())
	fmt.Fprintf(stderr, "shoal: cannot run %s: %v\n", args[0], err)
	return 127
}

// slotPoll is how often a task waiting for a slot tries again.
const slotPoll = 2 * time.Millisecond

// takeSlot locks one of the files dir/0 … dir/(n-1), waiting until one is
// free, and leaves it locked, inherited by the program this process becomes:
// the lock goes when the program exits, however it exits.
func takeSlot(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fds := make([]int, n)
	for i := range fds {
		fd, err := unix.Open(filepath.Join(dir, strconv.Itoa(i)), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		fds[i] = fd
	}
	for {
		for i, fd := range fds {
			if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
				continue
			}
			for j, other := range fds {
				if j != i {
					unix.Close(other)
				}
			}
			_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0) // keep it across exec
			return err
		}
		time.Sleep(slotPoll)
	}
}
