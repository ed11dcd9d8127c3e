package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"shoal/internal/engine"
	"shoal/internal/files"
)

// startPPID is the parent's pid as early as the process can read it: exec-rank
// compares it after asking to die with its parent.
var startPPID = os.Getppid()

func init() {
	register("exec-rank", command{
		summary: "run one rank under the launcher (used by shoal run, not by hand)",
		run:     execRank,
		hidden:  true,
	})
}

// execRank runs one rank. On a node of a cluster job (SHOAL_NODE_DATA set by the
// node's agent), it first places the job's staged files into the node's job
// directory, points the rank's checkpoints at the node's own store, and runs the
// program there.
func execRank(args []string, stdout, stderr io.Writer) int {
	if code, ok := dieWithParent(stderr); !ok {
		return code
	}
	var stages []files.Stage
	for len(args) > 0 && args[0] != "--" {
		if args[0] != "--stage" || len(args) < 2 {
			fmt.Fprintln(stderr, "usage: shoal exec-rank [--stage NAME=SHA256:MODE[:ARCH]]... -- PROGRAM [ARGS]")
			return exitUsage
		}
		s, err := files.ParseStage(args[1])
		if err != nil {
			fmt.Fprintf(stderr, "shoal exec-rank: %v\n", err)
			return exitUsage
		}
		if s.For(runtime.GOARCH) { // a build for another instruction set is another rank's
			stages = append(stages, s)
		}
		args = args[2:]
	}
	if len(args) > 0 {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: shoal exec-rank [--stage NAME=SHA256:MODE[:ARCH]]... -- PROGRAM [ARGS]")
		return exitUsage
	}
	if node := os.Getenv("SHOAL_NODE_DATA"); node != "" {
		job := os.Getenv("SHOAL_JOB")
		jobDir := filepath.Join(node, "jobs", job)
		work := filepath.Join(jobDir, "work")
		cache := files.Cache{Dir: filepath.Join(node, "files")}
		// The job's directory is its owner's alone: its output and files.
		os.Mkdir(jobDir, 0o700)
		for _, s := range stages {
			if err := cache.Place(work, filepath.Join(jobDir, "staged"), s); err != nil {
				fmt.Fprintf(stderr, "shoal: stage %s for job %s: %v\n", s.Name, job, err)
				return 127
			}
		}
		if err := os.MkdirAll(work, 0o755); err != nil || os.Chdir(work) != nil {
			fmt.Fprintf(stderr, "shoal: job directory %s: %v\n", work, err)
			return 127
		}
		os.Setenv("SHOAL_DIR", filepath.Join(node, "ckpt"))
		os.Setenv(engine.EnvRanksDir, filepath.Join(jobDir, "ranks"))
		os.MkdirAll(filepath.Join(jobDir, "ranks"), 0o755)
		if !strings.Contains(args[0], "/") {
			args[0] = "./" + args[0]
		}
	}
	return engine.RunWrapped(args, stderr)
}

// dieWithParent makes the kernel SIGKILL this wrapper when its parent (mpirun or
// orted) dies, so that a SIGKILLed launcher never leaves ranks running (the
// wrapper's own child, the program, dies with the wrapper in turn). The setting
// belongs to the calling thread, which is locked for the rest of the process:
// RunWrapped keeps the main goroutine on it. A parent that died between the
// start of the process and the setting is caught by the ppid check (not one that
// died before the runtime read startPPID; ppid 1 proves nothing, as the launcher
// may be PID 1 in a container). ok false means exit with code.
func dieWithParent(stderr io.Writer) (code int, ok bool) {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(stderr, "shoal: cannot ask to die with the launcher: %v\n", err)
		return 127, false
	}
	if os.Getppid() != startPPID {
		fmt.Fprintln(stderr, "shoal: the launcher is gone; not starting")
		return 128 + int(unix.SIGKILL), false
	}
	return 0, true
}
