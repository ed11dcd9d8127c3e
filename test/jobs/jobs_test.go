// Package jobs runs real jobs across testbed hosts and takes nodes away while they run:
// hosts killed, links cut, nodes leaving and joining. Every job must finish with the
// result of an uninterrupted run. Each test brings up its own testbed (instance 240)
// and takes it down; they run one after the other.
package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 240

// up brings up a testbed of n hosts with agents and returns it; it is torn down at
// the end of the test.
func up(t *testing.T, n int) *testbed.Bed {
	t.Helper()
	bin := testenv.NeedTestbed(t)
	testenv.Built(t, "build/examples/heat")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := testbed.Up(ctx, testbed.Config{Nodes: n, Cores: []int{2}, Instance: instance, AgentBinary: bin, Logf: t.Logf})
	if err != nil {
		t.Fatalf("testbed up: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			for i := 1; i <= n+1; i++ {
				if log, err := os.ReadFile(filepath.Join(b.Dir(), fmt.Sprintf("n%d", i), "agent.log")); err == nil {
					t.Logf("agent log of n%d (tail, without the retries of an election that cannot be won):\n%s", i, tail(withoutElectionRetries(string(log)), 60))
				}
			}
		}
		if err := b.Down(ctx); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	return b
}

// withoutElectionRetries drops from an agent's log the lines a node that cannot
// win an election writes every second or two, which would fill any tail.
func withoutElectionRetries(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "Election timeout reached") && !strings.Contains(l, "failed to make requestVote RPC") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// job is a `shoal run` inside a host, its output watched line by line.
type job struct {
	*watch.Proc
	id    string // the job id, once its first line is seen
	epoch int    // the complete epoch the test's loss came after
}

// waitEpoch waits until an epoch numbered at least min is complete and returns its
// number. Epochs can be overtaken: one that is not yet durable when a newer one is
// taken is never reported, so the test must not wait for one number.
func (j *job) waitEpoch(min int) int {
	for {
		n, _ := strconv.Atoi(j.WaitLine(`epoch (\d+) complete`, 2*time.Minute)[1])
		if n >= min {
			return n
		}
	}
}

func submit(t *testing.T, b *testbed.Bed, host string, args ...string) *job {
	t.Helper()
	argv := append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run"}, args...)
	cmd, err := b.Command(context.Background(), host, argv...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = testenv.Root
	return &job{Proc: watch.Start(t, cmd)}
}

var field = watch.Field

// shoalJSON runs `shoal ARGS...` on n1 and decodes its output into v.
func shoalJSON(ctx context.Context, b *testbed.Bed, v any, args ...string) error {
	out, err := b.Exec(ctx, "n1", append([]string{filepath.Join(testenv.Root, "bin/shoal")}, args...)...)
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}

// references holds the results reference has computed, by key, ranks and
// argv: several tests compare with the same uninterrupted run, and heat is
// deterministic, so each is run once a test binary.
var references = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// reference runs the program with plain mpirun on this machine alone, libshoal
// keeping its shards in a temporary directory, and returns the value of key: the
// result an uninterrupted run on one node gives.
func reference(t *testing.T, key string, n int, argv ...string) string {
	t.Helper()
	id := fmt.Sprintf("%s %d %q", key, n, argv)
	references.Lock()
	defer references.Unlock()
	if v, ok := references.m[id]; ok {
		return v
	}
	args := append([]string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", fmt.Sprint(n), "-x", "SHOAL_DIR"}, argv...)
	cmd := exec.Command("mpirun", args...)
	cmd.Env = append(os.Environ(), "SHOAL_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	v := field(string(out), key)
	if v == "" {
		t.Fatalf("reference run printed no %s line:\n%s", key, out)
	}
	references.m[id] = v
	return v
}

// event is one line of `shoal events --json`.
type event struct {
	Seq     uint64 `json:"seq"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func events(t *testing.T, b *testbed.Bed, host, id string) []event {
	t.Helper()
	out, err := b.Exec(context.Background(), host, filepath.Join(testenv.Root, "bin/shoal"), "events", "--json", id)
	if err != nil {
		t.Fatalf("shoal events: %v\n%s", err, out)
	}
	var evs []event
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e event
		if err := json.Unmarshal([]byte(l), &e); err == nil {
			evs = append(evs, e)
		}
	}
	return evs
}
