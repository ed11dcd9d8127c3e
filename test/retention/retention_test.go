// Package retention runs jobs on testbed hosts whose agents keep job data for a
// few seconds only, and checks that what a failed or a cancelled job leaves goes
// on every node once its grace period has passed, also on a node that was down
// when the job ended and comes back later (docs/retention.md). The tests share
// one testbed (instance 244), brought up by the first and cleaned at the end;
// they run one after the other.
package retention

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 244

// grace is the agents' --keep-failed and --keep-succeeded: long enough to see a
// job's data still there right after its end, short for the tests.
const grace = 6 * time.Second

var hosts = []string{"n1", "n2", "n3"}

var bed *testbed.Bed // shared; nil until the first test brings it up

func TestMain(m *testing.M) {
	os.Unsetenv("SHOAL_AGENT")
	os.Unsetenv("SHOAL_TESTBED_INSTANCE")
	code := m.Run()
	if bed != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := testbed.Clean(ctx, instance); err != nil {
			fmt.Fprintf(os.Stderr, "retention: clean testbed %d: %v\n", instance, err)
			code = 1
		}
		cancel()
	}
	os.Exit(code)
}

// up returns the shared testbed: three hosts of two cores whose agents keep
// job data for grace after the end and unused files for 2 s.
func up(t *testing.T) *testbed.Bed {
	t.Helper()
	bin := testenv.NeedTestbed(t)
	testenv.Built(t, "build/examples/heat")
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range hosts {
				if log, err := os.ReadFile(filepath.Join(bed.Dir(), h, "agent.log")); err == nil {
					t.Logf("agent log of %s (tail):\n%s", h, tail(string(log), 30))
				}
			}
		}
	})
	if bed != nil {
		return bed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := testbed.Up(ctx, testbed.Config{
		Nodes: len(hosts), Cores: []int{2}, Instance: instance, AgentBinary: bin, Logf: t.Logf,
		AgentArgs: []string{"--keep-failed", grace.String(), "--keep-succeeded", grace.String(), "--keep-unused-files", "2s"},
	})
	if err != nil {
		t.Fatalf("testbed up: %v", err)
	}
	bed = b
	return b
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run starts `shoal run ARGS` in host n1, its output watched.
func run(t *testing.T, b *testbed.Bed, args ...string) *watch.Proc {
	t.Helper()
	cmd, err := b.Command(context.Background(), "n1", append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = testenv.Root
	return watch.Start(t, cmd)
}

// jobData lists what host holds of job: its checkpoint, job and coordinator
// directories, and those of the given cached files.
func jobData(t *testing.T, b *testbed.Bed, host, job string, sums ...string) []string {
	t.Helper()
	h, err := b.Host(host)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	paths := []string{
		filepath.Join(h.DataDir, agent.CkptDir, job),
		filepath.Join(h.DataDir, agent.JobsDir, job),
		filepath.Join(h.DataDir, agent.CoordDir, job),
	}
	for _, s := range sums {
		paths = append(paths, filepath.Join(h.DataDir, agent.FilesDir, s))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			held = append(held, strings.TrimPrefix(p, h.DataDir+"/"))
		}
	}
	return held
}

// waitGone waits until none of hosts holds anything of job (nor the files).
func waitGone(t *testing.T, b *testbed.Bed, within time.Duration, job string, hosts []string, sums ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var left []string
		for _, h := range hosts {
			for _, p := range jobData(t, b, h, job, sums...) {
				left = append(left, h+":"+p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the grace period began: still there: %s", within, strings.Join(left, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestFailedJobCollected runs a job over three hosts that checkpoints, then
// fails by itself: its shards stay for the grace period, for inspection, and
// then its shards, job and coordinator directories, and the cached copies of
// its program and input go from every host.
func TestFailedJobCollected(t *testing.T) {
	b := up(t)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	// The program checkpoints through heat, a staged input, then exits 7. It runs
	// a private copy: a staged file is the node's, and every rank's wrapper that
	// finds it changed (a chmod) places it again as staged.
	script := filepath.Join(t.TempDir(), "failheat")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nh=$(mktemp) && cp heat \"$h\" && chmod +x \"$h\" || exit 1\n\"$h\" --size 300 --steps 4000 --pace 1000\nrc=$?\nrm -f \"$h\"\n[ $rc = 0 ] || exit $rc\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sums := []string{sha256File(t, script), sha256File(t, heat)}
	j := run(t, b, "-n", "6", "--ckpt-interval", "1s", "--max-restarts", "0", "--file", heat, "--", script)
	id := j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`epoch \d+ complete`, time.Minute)
	if code := j.Wait(2 * time.Minute); code != 7 {
		t.Fatalf("shoal run: exit %d, want the program's 7", code)
	}
	ended := time.Now()
	// Kept for inspection: the shards are there on the nodes right after the end.
	var holders []string
	for _, h := range hosts {
		for _, p := range jobData(t, b, h, id) {
			if strings.HasPrefix(p, agent.CkptDir+"/") {
				holders = append(holders, h)
			}
		}
	}
	since := time.Since(ended)
	t.Logf("%v after the failure, shards of %s on %v", since.Round(time.Millisecond), id, holders)
	if since < grace && len(holders) < 2 {
		t.Errorf("%v after the failure, shards of %s on %v: want them kept on at least 2 nodes for %v", since, id, holders, grace)
	}
	waitGone(t, b, grace+20*time.Second, id, hosts, sums...)
}

// TestDownNodeCleansUpWhenBack runs a job over three hosts, kills n3 once it
// holds shards, and cancels the job while n3 is down: the others remove the
// job's data after the grace period; n3, its agent started again, removes what
// it holds as soon as it hears the job ended (its store catches up), and says so
// in its log with the sizes.
func TestDownNodeCleansUpWhenBack(t *testing.T) {
	b := up(t)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	j := run(t, b, "-n", "6", "--ckpt-interval", "1s", "--", heat, "--size", "300", "--steps", "100000", "--pace", "1000")
	id := j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`epoch \d+ complete`, time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for len(jobData(t, b, "n3", id)) < 2 { // shards and job directory
		if time.Now().After(deadline) {
			t.Fatalf("n3 holds %v of job %s: want its shards and job directory", jobData(t, b, "n3", id), id)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := b.Kill(context.Background(), "n3"); err != nil {
		t.Fatal(err)
	}
	j.WaitLine(`restart|relaunch`, time.Minute)

	h1, err := b.Host("n1")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := agent.ReadSecret(filepath.Join(h1.DataDir, agent.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := api.NewClient(h1.IP+":"+fmt.Sprint(testbed.AgentPort+1), secret)
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatalf("cancel %s: %v", id, err)
	}
	if code := j.Wait(time.Minute); code != 130 {
		t.Errorf("shoal run of a cancelled job: exit %d, want 130", code)
	}
	waitGone(t, b, grace+20*time.Second, id, []string{"n1", "n2"})
	if held := jobData(t, b, "n3", id); len(held) < 2 {
		t.Fatalf("n3, down, holds %v of job %s: want what it held when killed", held, id)
	}
	if err := b.StartAgent(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, b, 30*time.Second, id, []string{"n3"})
	log, err := os.ReadFile(filepath.Join(b.Dir(), "n3", "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, `msg="removed job data"`) && strings.Contains(l, "job="+id) && strings.Contains(l, "bytes=") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		t.Errorf("n3's log has %d lines removing job %s's data with sizes, want its shards and job directory:\n%s", len(lines), id, strings.Join(lines, "\n"))
	}
}
