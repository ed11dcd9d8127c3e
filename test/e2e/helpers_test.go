// Package e2e runs shoal, libshoal and the examples the way users run them: the built
// binaries, the real Open MPI, real processes killed with real signals.
package e2e

import (
	"os/exec"
	"testing"

	"shoal/test/watch"
)

func requireMPI(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it)")
	}
}

var field = watch.Field
