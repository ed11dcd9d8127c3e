package launch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestReadEnvironGrows: a file larger than the buffer is read whole, into a
// buffer grown for it, and a short one with a single read.
func TestReadEnvironGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	want := bytes.Repeat([]byte("K=V\x00"), 2500)
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, buf, err := readEnviron(path, make([]byte, 16))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readEnviron = %d bytes, %v; want the file's %d", len(got), err, len(want))
	}
	if len(buf) < len(want) {
		t.Errorf("buffer of %d bytes returned, want one that holds the %d read", len(buf), len(want))
	}
	if _, _, err := readEnviron(filepath.Join(t.TempDir(), "none"), buf); err == nil {
		t.Error("readEnviron of a missing file: no error")
	}
}

// TestMarkedFindsByEnvironment: the scan finds a process by its marker, with
// an environment larger than the scan's first buffer, and not one without it.
func TestMarkedFindsByEnvironment(t *testing.T) {
	marker := "test-owner/job/" + t.Name()
	big := "BIG=" + string(bytes.Repeat([]byte("x"), 100<<10))
	with := exec.Command("sleep", "30")
	with.Env = []string{big, MarkerVar + "=" + marker}
	without := exec.Command("sleep", "30")
	without.Env = []string{"OTHER=" + marker}
	for _, c := range []*exec.Cmd{with, without} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func(c *exec.Cmd) { c.Process.Kill(); c.Wait() }(c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := marked(exactly(marker))
		if slices.Equal(pids, []int{with.Process.Pid}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("marked found %v, want only %d (not %d)", pids, with.Process.Pid, without.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkMarked is one scan of this machine's processes for a marker no
// process has: what each launch's end costs its agent.
func BenchmarkMarked(b *testing.B) {
	for i := 0; i < b.N; i++ {
		marked(exactly("nobody/none/0"))
	}
}
