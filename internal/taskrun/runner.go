// Package taskrun is the node's side of a task farm: the task runner that a
// farm's coordinator starts on each node it uses (`shoal exec-task`, launched
// by the node's agent). It reads task requests, runs up to Slots tasks at once
// in the job's directory, and answers with each task's exit status and output
// (the protocol is internal/farm's), keeping a copy of every result in the
// node's result store.
package taskrun

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/farm"
	"shoal/internal/results"
)

// Runner runs a farm's tasks on one node. Set its fields, then call Serve.
type Runner struct {
	Job   string
	Slots int    // tasks run at once; at least 1
	Dir   string // the tasks' working directory, where the staged program is
	// Store, when set, keeps a copy of every successful task's output.
	Store *results.Store
	// Env is added to every task's environment (after the runner's own).
	Env []string
}

// Serve runs the tasks requested on in, replying on out, until in ends and the
// tasks it asked for have ended; the tasks' standard error goes to errOut,
// each line prefixed with its task. It returns an error only for a broken
// protocol or a failed write of a reply.
func (r *Runner) Serve(in io.Reader, out, errOut io.Writer) error {
	queue := make(chan farm.Request, 1024)
	var readErr error
	go func() {
		defer close(queue)
		br := bufio.NewReader(in)
		for {
			req, err := farm.ReadRequest(br)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
			queue <- req
		}
	}()
	var (
		outMu    sync.Mutex
		writeErr error
		wg       sync.WaitGroup
	)
	errs := &prefixer{w: errOut}
	for i := 0; i < max(r.Slots, 1); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := range queue {
				rep, output := r.run(req, errs)
				outMu.Lock()
				if writeErr == nil {
					writeErr = farm.WriteReply(out, rep, output)
				}
				outMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if readErr != nil {
		return readErr
	}
	return writeErr
}

// run runs one task and returns its reply and output.
func (r *Runner) run(req farm.Request, errs *prefixer) (farm.Reply, []byte) {
	rep := farm.Reply{Task: req.Task}
	prog := req.Argv[0]
	if !strings.Contains(prog, "/") {
		prog = "./" + prog
	}
	cmd := exec.Command(prog, req.Argv[1:]...)
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), r.Env...)
	cmd.Env = append(cmd.Env, "SHOAL_TASK="+strconv.Itoa(req.Task))
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+req.Env[k])
	}
	// A task dies with its runner, however the runner dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout bytes.Buffer
	cmd.Stdout = &capped{w: &stdout, n: results.MaxSize + 1}
	lines := errs.task(req.Task)
	cmd.Stderr = lines
	started := time.Now()
	err := cmd.Run()
	lines.Close()
	rep.Seconds = time.Since(started).Seconds()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			rep.Signal = int(ws.Signal())
			rep.ExitCode = 128 + rep.Signal
		} else {
			rep.ExitCode = ee.ExitCode()
		}
	default:
		rep.ExitCode, rep.Error = 127, err.Error()
		fmt.Fprintf(lines, "shoal: cannot run %s: %v\n", req.Argv[0], err)
		lines.Close()
	}
	output := stdout.Bytes()
	if rep.ExitCode == 0 && len(output) > results.MaxSize {
		rep.ExitCode = 1
		fmt.Fprintf(lines, "shoal: the output is over the %d MiB a result may have\n", results.MaxSize>>20)
		lines.Close()
	}
	if rep.ExitCode != 0 {
		output = nil
	}
	sum := sha256.Sum256(output)
	rep.Size, rep.SHA256 = int64(len(output)), hex.EncodeToString(sum[:])
	if rep.ExitCode == 0 && r.Store != nil {
		rep.Stored = r.Store.Put(r.Job, req.Task, rep.SHA256, bytes.NewReader(output)) == nil
	}
	return rep, output
}

// capped keeps the first n bytes written and drops the rest.
type capped struct {
	w io.Writer
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.n > 0 {
		k := min(len(p), c.n)
		c.w.Write(p[:k])
		c.n -= k
	}
	return len(p), nil
}

// prefixer writes whole lines of several tasks' standard error to w, each
// prefixed "[task N] ", never two lines interleaved.
type prefixer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *prefixer) task(n int) *taskLines {
	return &taskLines{p: p, prefix: fmt.Sprintf("[task %d] ", n)}
}

type taskLines struct {
	p      *prefixer
	prefix string
	buf    []byte
}

func (t *taskLines) Write(b []byte) (int, error) {
	t.buf = append(t.buf, b...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		t.emit(t.buf[:i+1])
		t.buf = t.buf[i+1:]
	}
}

// Close writes an unfinished last line.
func (t *taskLines) Close() error {
	if len(t.buf) > 0 {
		t.emit(append(t.buf, '\n'))
		t.buf = nil
	}
	return nil
}

func (t *taskLines) emit(line []byte) {
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	t.p.w.Write(append([]byte(t.prefix), line...))
}
