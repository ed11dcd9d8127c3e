// Package testenv is what the packages of tests under test/ share: where the
// repository and its built files are, and the checks that skip a test this
// machine cannot run (no root for a testbed, no Open MPI).
package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/watch"
)

// Root is the repository's top directory.
var Root = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// Built returns the path of a built file, rel to Root; under make test
// (SHOAL_REQUIRE_BUILD) a missing one fails the test, otherwise it is skipped.
func Built(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(Root, rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%s missing: make build did not produce it", rel)
		}
		t.Skipf("%s not built (run make build)", rel)
	}
	return p
}

// NeedSlurm checks that the testbed can run Slurm (testbed.CheckSlurm): missing,
// it fails the test under make test (SHOAL_REQUIRE_BUILD, after make deps
// installed the packages) and skips it otherwise, saying what to install.
func NeedSlurm(t *testing.T) {
	t.Helper()
	if err := testbed.CheckSlurm(); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%v: make deps should have installed it", err)
		}
		t.Skip(err)
	}
}

// NeedTestbed skips a test that brings up testbed hosts running MPI jobs when
// this process is not root or Open MPI is not installed, and returns the
// shoal executable the hosts' agents run.
func NeedTestbed(t *testing.T) string {
	t.Helper()
	if !testbed.IsRoot() {
		t.Skip("needs root: the testbed makes network namespaces")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it)")
	}
	return Built(t, "bin/shoal")
}

// RankPID returns the pid of rank of job, running under the agent whose data
// directory is dataDir, from the runner's rank state file; it fails the test
// when the rank does not run within 10 s.
func RankPID(t *testing.T, dataDir, job string, rank int) int {
	t.Helper()
	path := filepath.Join(dataDir, "jobs", job, "ranks", fmt.Sprintf("r%06d", rank))
	var pid int
	poll.Until(t, 10*time.Second, func() string {
		b, _ := os.ReadFile(path)
		if _, err := fmt.Sscanf(string(b), "pid=%d state=running", &pid); err == nil && pid > 0 {
			return ""
		}
		return fmt.Sprintf("rank %d of job %s reports no running pid in %s", rank, job, path)
	})
	return pid
}

// CoordinatorOf names the node that coordinates job id, as n1's agent lists it
// (shoal jobs --json there); it fails the test when n1 lists no such job.
func CoordinatorOf(t *testing.T, b *testbed.Bed, id string) string {
	t.Helper()
	out, err := b.Exec(context.Background(), "n1", Built(t, "bin/shoal"), "jobs", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Jobs []struct {
			ID          string `json:"id"`
			Coordinator string `json:"coordinator"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Jobs {
		if j.ID == id {
			return j.Coordinator
		}
	}
	t.Fatalf("n1 lists no job %s:\n%s", id, out)
	return ""
}

// Reference runs heat-plain (build/examples) on ranks ranks with args under plain
// mpirun on this machine alone and returns the checksum it prints: the result of
// an uninterrupted run, which a job Shoal ran through losses must end with.
func Reference(t *testing.T, ranks int, args ...string) string {
	t.Helper()
	argv := append([]string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", strconv.Itoa(ranks),
		Built(t, "build/examples/heat-plain")}, args...)
	out, err := exec.Command("mpirun", argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	v := watch.Field(string(out), "checksum")
	if v == "" {
		t.Fatalf("reference run printed no checksum:\n%s", out)
	}
	return v
}
