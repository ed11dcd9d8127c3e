package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/test/poll"
	"shoal/test/testenv"
)

// TestStandaloneOrphansStop kills the mpirun of a standalone run (plain mpirun, no
// shoal) with SIGKILL while its ranks checkpoint five times a second: the ranks,
// reparented, must write no epoch after the kill (no epoch directory, shard or
// manifest change appears), and must exit.
func TestStandaloneOrphansStop(t *testing.T) {
	requireMPI(t)
	heat := testenv.Built(t, "build/examples/heat")
	dir := t.TempDir()
	jobdir := filepath.Join(dir, "orphans")
	// A file, not a pipe: the orphans may hold it open, and Wait must not wait for them.
	out, err := os.Create(filepath.Join(t.TempDir(), "mpirun.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// Paced to run for minutes: only the kill ends it.
	cmd := exec.Command("mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", "2",
		heat, "--size", "200", "--steps", "200000", "--pace", "1000")
	cmd.Env = append(os.Environ(), "SHOAL_DIR="+dir, "SHOAL_JOB=orphans", "SHOAL_CKPT_INTERVAL=0.2")
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ranks []int
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for _, pid := range ranks {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if b, _ := os.ReadFile(out.Name()); t.Failed() {
			t.Logf("mpirun's output:\n%s", b)
		}
	})
	poll.Until(t, time.Minute, func() string {
		if b, _ := os.ReadFile(filepath.Join(jobdir, "manifest")); strings.Contains(string(b), "epoch 2 ") {
			return ""
		}
		return "no epoch 2 in the manifest"
	})
	poll.Until(t, 10*time.Second, func() string {
		ranks = childrenOf(cmd.Process.Pid)
		if len(ranks) == 2 {
			return ""
		}
		return fmt.Sprintf("mpirun (pid %d) has children %v, want its 2 ranks", cmd.Process.Pid, ranks)
	})

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	before := epochFiles(t, jobdir)
	// 15 checkpoint intervals: before the change, each brought an epoch.
	poll.Holds(t, 3*time.Second, func() string {
		now := epochFiles(t, jobdir)
		if added := now.addedTo(before); added != "" {
			return added + " appeared after mpirun was killed"
		}
		return ""
	})
	poll.Until(t, 10*time.Second, func() string {
		var alive []int
		for _, pid := range ranks {
			if running(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return ""
		}
		return fmt.Sprintf("ranks %v still run after their mpirun was killed", alive)
	})
}

// jobFiles is what a standalone job directory holds of its epochs: the names of
// its epoch directories and their shards, and the manifest's text.
type jobFiles struct {
	names    []string
	manifest string
}

func epochFiles(t *testing.T, jobdir string) jobFiles {
	t.Helper()
	var f jobFiles
	dirs, _ := filepath.Glob(filepath.Join(jobdir, "e*"))
	for _, d := range dirs {
		f.names = append(f.names, filepath.Base(d))
		shards, _ := filepath.Glob(filepath.Join(d, "*.shard"))
		for _, s := range shards {
			f.names = append(f.names, filepath.Base(d)+"/"+filepath.Base(s))
		}
	}
	b, _ := os.ReadFile(filepath.Join(jobdir, "manifest"))
	f.manifest = string(b)
	return f
}

// addedTo says what f has that was not in old: a new epoch directory or shard, or
// another manifest; "" when nothing.
func (f jobFiles) addedTo(old jobFiles) string {
	for _, n := range f.names {
		if !slices.Contains(old.names, n) {
			return n
		}
	}
	if f.manifest != old.manifest {
		return fmt.Sprintf("manifest %q (was %q)", f.manifest, old.manifest)
	}
	return ""
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var kids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			kids = append(kids, child)
		}
	}
	return kids
}

// running reports whether process pid exists and has not exited (a zombie has).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
