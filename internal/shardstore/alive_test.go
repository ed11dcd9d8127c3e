package shardstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// writeAlive writes rank's alive file of job heat in s as libshoal does, its
// last record, and the file's modification, silent ago.
func writeAlive(t *testing.T, s *Store, name, state string, silent, gap time.Duration, pid int) {
	t.Helper()
	dir := s.jobDir("heat").Path()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var cpu unix.Timespec
	unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &cpu)
	line := fmt.Sprintf("alive %s calls 40 at %d gap %d every %d pid %d cpu %d", state,
		int64(monotonicNow()-silent), int64(gap), int64(gap/10), pid, cpu.Nano())
	line = fmt.Sprintf("%-159s\n", line)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-silent)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// goneProcess returns the pid of a process that ended.
func goneProcess(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.Process.Pid
}

// TestIndexSilent: the index lists the ranks whose alive file says they run
// and made no call for longer than twice their gap (and a second), with the
// CPU their process used since; not a rank held or finalizing, one whose
// process is gone, nor a file of another name.
func TestIndexSilent(t *testing.T) {
	s := New(t.TempDir())
	me := os.Getpid()
	writeAlive(t, s, "r000000.alive", "run", 5*time.Second, 200*time.Millisecond, me)
	writeAlive(t, s, "r000001.alive", "run", 100*time.Millisecond, 200*time.Millisecond, me)
	writeAlive(t, s, "r000002.alive", "hold", 5*time.Second, 200*time.Millisecond, me)
	writeAlive(t, s, "r000003.alive", "done", 5*time.Second, 200*time.Millisecond, me)
	writeAlive(t, s, "r000004.alive", "run", 5*time.Second, 200*time.Millisecond, goneProcess(t))
	writeAlive(t, s, "r000005.alive.tmp", "run", 5*time.Second, 200*time.Millisecond, me)
	writeAlive(t, s, "r000006.alive", "run", 1500*time.Millisecond, time.Second, me)
	idx, err := s.Index("heat")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Silent) != 1 {
		t.Fatalf("silent = %+v, want rank 0 alone", idx.Silent)
	}
	got := idx.Silent[0]
	if got.Rank != 0 || got.Calls != 40 || time.Duration(got.For) < 5*time.Second || got.Busy < 0 || got.Busy > 1 {
		t.Errorf("silent = %+v, want rank 0, 40 calls, at least 5 s, busy within [0, 1]", got)
	}
}

// TestWaitIndexSilent: a wait on the index ends when a rank falls silent,
// though no file changes.
func TestWaitIndexSilent(t *testing.T) {
	s := New(t.TempDir())
	s.RescanInterval = 10 * time.Millisecond
	writeAlive(t, s, "r000000.alive", "run", 500*time.Millisecond, 100*time.Millisecond, os.Getpid())
	before, err := s.WaitIndex(context.Background(), "heat", "")
	if err != nil || len(before.Silent) != 0 {
		t.Fatalf("index %+v, %v; want none silent yet", before, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	after, err := s.WaitIndex(ctx, "heat", before.Tag)
	if err != nil || after.Tag == before.Tag || len(after.Silent) != 1 {
		t.Errorf("wait = %+v, %v; want the tag changed with rank 0 silent", after, err)
	}
}
