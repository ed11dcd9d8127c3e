package engine

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestLauncherOpenFiles(t *testing.T) {
	for _, tt := range []struct {
		hosts, local int
		want         uint64
	}{{0, 0, 1024}, {1, 2, 1048}, {128, 1, 2056}, {1, 2000, 17032}, {10000, 1, 81032}} {
		if got := LauncherOpenFiles(tt.hosts, tt.local); got != tt.want {
			t.Errorf("LauncherOpenFiles(%d, %d) = %d, want %d", tt.hosts, tt.local, got, tt.want)
		}
	}
}

// LowerOpenFiles lowers a running process's soft limit, never raises it, and
// leaves its hard limit.
func TestLowerOpenFiles(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	var before unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &before); err != nil {
		t.Fatal(err)
	}
	if before.Cur < 300 {
		t.Skipf("the soft limit on open files is %d", before.Cur)
	}
	for _, tt := range []struct{ want, then uint64 }{{200, 200}, {250, 200}} {
		if err := LowerOpenFiles(pid, tt.want); err != nil {
			t.Fatal(err)
		}
		var got unix.Rlimit
		if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &got); err != nil {
			t.Fatal(err)
		}
		if got.Cur != tt.then || got.Max != before.Max {
			t.Errorf("LowerOpenFiles(%d): the limits are %d/%d, want %d/%d", tt.want, got.Cur, got.Max, tt.then, before.Max)
		}
	}
}
