// Package e2e runs shoal, libshoal and the examples the way users run them: the built
// binaries, the real Open MPI, real processes killed with real signals.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"shoal/test/watch"
)

func requireMPI(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it)")
	}
}

var field = watch.Field

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
