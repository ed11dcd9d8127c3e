// Package watch runs a command for the end-to-end tests and watches its combined
// output line by line: wait for a line, wait for the exit, read a result field.
package watch

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proc is a started command whose stdout and stderr are read as one stream.
type Proc struct {
	t     testing.TB
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer
	lines chan string
	done  chan struct{}
	err   error
}

// Start starts cmd (its Stdout and Stderr are replaced). At the end of the test the
// process is killed if still running, and its output logged if the test failed.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{t: t, cmd: cmd, lines: make(chan string, 100000), done: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		p.err = cmd.Wait()
		close(p.lines)
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", strings.Join(cmd.Args, " "), p.Output())
		}
	})
	return p
}

// Spawn starts name with args as Start does, in a new temporary directory of t's
// and with env added to this process's environment.
func Spawn(t testing.TB, env []string, name string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	return Start(t, cmd)
}

// Output is everything the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// WaitLine waits for the next line matching re and returns its submatches; the
// test fails if the process ends or the timeout passes first.
func (p *Proc) WaitLine(re string, timeout time.Duration) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("process ended before a line matching %q", re)
			}
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			p.t.Fatalf("no line matching %q within %v", re, timeout)
		}
	}
}

// Wait waits for the process to end and returns its exit code.
func (p *Proc) Wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("still running after %v", timeout)
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

// Field returns the value after "key: " on the last line of out that has it.
func Field(out, key string) string {
	v := ""
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, key+": "); i >= 0 {
			v = strings.TrimSpace(l[i+len(key)+2:])
		}
	}
	return v
}
