package main

import (
	"os"
	"testing"
)

// TestMain lets this test binary stand in for shoal where an agent that a test
// starts in-process runs it (os.Executable): as the rank wrapper, as the
// launcher's rsh agent and as a farm's task runner.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "exec-rank" || os.Args[1] == "rsh" || os.Args[1] == "exec-task") {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
