package durable

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// TestKeptEpochRestartsInPlace: heat on 2 ranks of a 3-host testbed, both placed
// on n3 (at --max-oversubscribe 0.5 only n3's 4 cores give slots), its shards
// on n3 only (--redundancy copy:1), run in n1 with --durable s3://…. Once an
// epoch is kept in the bucket, n3 is killed: no node holds an epoch of the job
// any more, but the cluster lives on without it (n1 and n2 are a quorum of its
// job store, whose leader holds the job's record). The job restarts by itself
// from the epoch kept in the bucket, fetched by the nodes it is placed on, and
// the shoal run that follows it ends with the checksum of an uninterrupted
// run.
func TestKeptEpochRestartsInPlace(t *testing.T) {
	bin := testenv.NeedTestbed(t)
	heat := testenv.Built(t, "build/examples/heat")
	heatArgs := []string{"--size", "200", "--steps", "300"}
	want := testenv.Reference(t, 2, heatArgs...)
	srv := startS3(t, "shoal-inplace")
	b := upBed(t, testbed.Config{Nodes: 3, Cores: []int{1, 1, 4}, S3: true, S3Server: srv})

	loc := "s3://shoal-inplace/jobs/heat"
	kept := regexp.QuoteMeta(loc)
	// 300 steps of at least 20 ms: 6 s uninterrupted, a checkpoint every second.
	cmd, err := b.Command(context.Background(), "n1", append([]string{bin, "run", "-n", "2", "--ckpt-interval", "1s",
		"--max-oversubscribe", "0.5", "--redundancy", "copy:1", "--durable", loc, "--", heat}, append(heatArgs, "--pace", "20000")...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env, cmd.Dir = append(os.Environ(), srv.EnvVars(testbed.BridgeIP(instance))...), testenv.Root
	p := watch.Start(t, cmd)
	p.WaitLine(`^shoal: launching 2 ranks .*\(n3:0-1\)$`, time.Minute)
	saved, _ := strconv.Atoi(p.WaitLine(`^shoal: epoch (\d+) kept in `+kept+` `, time.Minute)[1])
	if _, err := b.Kill(context.Background(), "n3"); err != nil {
		t.Fatalf("kill n3: %v", err)
	}
	p.WaitLine(`^shoal: 2 shards of epoch \d+ fetched from `+kept+` by 2 nodes `, time.Minute)
	line := p.WaitLine(`^shoal: node n3 lost .*; restarting 2 ranks from epoch (\d+) kept in `+kept+` \(no node holds a newer one\) on n1, n2 `, time.Minute)
	if from, _ := strconv.Atoi(line[1]); from < saved {
		t.Errorf("restarted from epoch %d, want %d or newer (kept before n3 was killed)", from, saved)
	}
	if code := p.Wait(time.Minute); code != 0 {
		t.Fatalf("shoal run exited %d:\n%s", code, shoalLines(p.Output()))
	}
	out := p.Output()
	t.Logf("shoal run:\n%s", shoalLines(out))
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	if m := regexp.MustCompile(`heat: resumed at step (\d+)`).FindStringSubmatch(out); m == nil {
		t.Errorf("heat did not say it resumed")
	} else if step, _ := strconv.Atoi(m[1]); step <= 0 {
		t.Errorf("heat resumed at step %d, want past the first", step)
	}
}
