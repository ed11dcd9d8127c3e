// Package e2e runs shoal, libshoal and the examples the way users run them: the built
// binaries, the real Open MPI, real processes killed with real signals.
package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var root = func() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}()

// artifact returns the path of a built file, failing (under make test) or skipping
// (a bare go test without a build) when it is missing.
func artifact(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%s missing: make build did not produce it", rel)
		}
		t.Skipf("%s not built (run make build first)", rel)
	}
	return p
}

func requireMPI(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it)")
	}
}

// proc is a running command whose combined output is watched line by line.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer
	lines chan string
	done  chan struct{}
	err   error
}

func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: exec.Command(name, args...), lines: make(chan string, 10000), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Dir = t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
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
		p.err = p.cmd.Wait()
		close(p.lines)
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine waits for a line matching re and returns its submatches.
func (p *proc) waitLine(re string, timeout time.Duration) []string {
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

// wait waits for the process to end and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("still running after %v", timeout)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatal(p.err)
	return -1
}

// field returns the value after "key: " on the last line that has it.
func field(out, key string) string {
	v := ""
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, key+": "); i >= 0 {
			v = strings.TrimSpace(l[i+len(key)+2:])
		}
	}
	return v
}

// rankPID reads the pid of a running rank of job from the runner's rank state files.
func rankPID(t *testing.T, dataDir, job string, rank int) int {
	t.Helper()
	path := filepath.Join(dataDir, "jobs", job, "ranks", fmt.Sprintf("r%06d", rank))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		var pid int
		if _, err := fmt.Sscanf(string(b), "pid=%d state=running", &pid); err == nil && pid > 0 {
			return pid
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("rank %d of job %s never reported a running pid in %s", rank, job, path)
	return 0
}
