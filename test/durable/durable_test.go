// Package durable runs a job with its epochs kept in an object store (shoal run
// --durable s3://BUCKET/PREFIX) on testbed hosts with agents (instance 264, which
// it takes down whole), loses every host at once, and resumes the job on a new
// testbed from the store.
package durable

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 264

// TestEveryHostLost: heat on 2 ranks over 2 hosts, run in n1 by shoal run with
// --durable s3://…, the credentials in the AWS_* variables. Once an epoch is kept in
// the bucket, the whole testbed goes down at once: ranks, agents, their data and the
// shoal run that copied the epochs. On a new testbed the same command resumes from
// the bucket, heat resumes past its first step, and the job ends with the checksum of
// an uninterrupted run, leaving no object under the prefix. The secret key appears in
// neither run's output. While the first runs, shoal jobs on the other host says
// which epoch is kept where, and neither its output, the job's events nor the
// agents' logs hold the secret. The first testbed's agents have the store's
// credentials: the job's coordinator has the nodes upload their shards themselves
// and writes the manifests. On the second only n1's agent has them: n1 fetches its
// shards from the store itself when the job resumes, and shoal run puts n2's there;
// a coordinator on n1 then fails each epoch's copy naming n2 (it carries no shard
// itself), one on n2 leaves the copies to shoal run, which makes them through
// itself. The newest epoch kept has a damaged object by then: n1 refuses it, and
// the job resumes from the epoch before. Before all that, a detached job on the
// first testbed has its epochs kept by its coordinator, and once cancelled they
// are removed from the bucket by retention (detachedKept).
func TestEveryHostLost(t *testing.T) {
	bin := testenv.NeedTestbed(t)
	heat := testenv.Built(t, "build/examples/heat")
	heatArgs := []string{"--size", "200", "--steps", "300"}
	want := testenv.Reference(t, 2, heatArgs...)
	srv := startS3(t, "shoal-durable")
	env := append(os.Environ(), srv.EnvVars(testbed.BridgeIP(instance))...)

	loc := "s3://shoal-durable/jobs/heat"
	kept := regexp.QuoteMeta(loc)
	// 300 steps of at least 20 ms: 6 s uninterrupted, a checkpoint every second.
	argv := append([]string{bin, "run", "-n", "2", "--ckpt-interval", "1s", "--durable", loc, "--", heat}, heatArgs...)
	argv = append(argv, "--pace", "20000")
	run := func(b *testbed.Bed) *watch.Proc {
		cmd, err := b.Command(context.Background(), "n1", argv...)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env, cmd.Dir = env, testenv.Root
		return watch.Start(t, cmd)
	}

	// The first testbed's agents have the store's credentials: each node uploads
	// its own shards.
	b := up(t, srv)
	detachedKept(t, b, srv, env, bin, heat)
	first := run(b)
	saved, _ := strconv.Atoi(first.WaitLine(`^shoal: epoch (\d+) kept in `+kept+` `+byCoordinator+`$`, time.Minute)[1])
	// A second, so that a damaged newest epoch leaves one to resume from.
	first.WaitLine(`^shoal: epoch \d+ kept in `+kept+` `+byCoordinator+`$`, time.Minute)
	// The job's record says so too, for shoal jobs on any node.
	id := regexp.MustCompile(`(?m)^shoal: job (\S+):`).FindStringSubmatch(first.Output())
	if id == nil {
		t.Fatalf("no line names the job:\n%s", first.Output())
	}
	poll.Until(t, 5*time.Second, func() string { // n2's replica follows the leader's
		show, err := b.Exec(context.Background(), "n2", bin, "jobs", id[1])
		if err != nil {
			return err.Error()
		}
		if !regexp.MustCompile(`(?m)^durable: epoch \d+ kept in ` + kept + ` \d+s ago$`).Match(show) {
			return fmt.Sprintf("shoal jobs %s on n2 does not say which epoch is kept:\n%s", id[1], show)
		}
		if strings.Contains(string(show), srv.SecretKey) {
			t.Errorf("shoal jobs %s holds the secret key", id[1])
		}
		return ""
	})
	// The agents that uploaded, their logs and the job's events hold no secret.
	events, err := b.Exec(context.Background(), "n1", bin, "events", id[1])
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(b.Dir(), "n*", "agent.log"))
	for _, f := range logs {
		if text, _ := os.ReadFile(f); strings.Contains(string(text), srv.SecretKey) {
			t.Errorf("%s holds the secret key", f)
		}
	}
	if len(logs) != 2 || strings.Contains(string(events), srv.SecretKey) {
		t.Errorf("the job's events hold the secret key, or the agents' logs (%d) were not read", len(logs))
	}
	dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
	defer dcancel()
	if err := b.Down(dctx); err != nil {
		t.Fatalf("testbed down: %v", err)
	}
	first.Wait(30 * time.Second) // killed with its host

	// A byte of the newest epoch's rank 0 flips in the bucket: the node that
	// fetches it refuses it, and the job resumes from the epoch before.
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	newest := spoilNewest(t, c, "shoal-durable", "jobs/heat")

	// On the second only n1's agent has them: n1 fetches its shards of the
	// resumed epoch, shoal run puts n2's, and copies the epochs after.
	b = up(t, srv, "n1")
	second := run(b)
	h2, err := b.Host("n2")
	if err != nil {
		t.Fatal(err)
	}
	n2 := regexp.QuoteMeta(h2.IP)
	second.WaitLine(`^shoal: the node at `+n2+`:\d+ does not fetch its shards from `+kept+` itself \(.*its agent has no credentials for `+kept+` .*\): shoal run puts them there$`, time.Minute)
	second.WaitLine(`^shoal: `+kept+`: refusing epoch `+strconv.Itoa(newest)+`: durable: corrupt epoch: .*rank-0\.shard`, time.Minute)
	resumed, _ := strconv.Atoi(second.WaitLine(`^shoal: resuming from epoch (\d+) kept in `+kept+` \(job \S+, fetched by 1 node\)$`, time.Minute)[1])
	if resumed < saved || resumed >= newest {
		t.Errorf("resumed from epoch %d, want %d or newer (kept before the testbed went down) and older than %d (damaged)", resumed, saved, newest)
	}
	// The damaged epoch goes: the resumed run writes its own under that number,
	// which would otherwise pass for kept.
	second.WaitLine(`^shoal: 1 epoch removed from `+kept+`: newer than epoch `+strconv.Itoa(resumed)+` and not resumed$`, time.Minute)
	if n := strings.Count(second.Output(), "does not fetch its shards"); n != 1 {
		t.Errorf("shoal run said %d times that n2 does not fetch its shards, want once", n)
	}
	coordinator := second.WaitLine(`^shoal: job \S+: .*, coordinated by (\S+)$`, time.Minute)[1]
	if coordinator == "n1" {
		// One copier a job: the coordinator, which has credentials, never
		// carries n2's shards, and the epoch resumed stays the one kept.
		second.WaitLine(`^shoal: warning: keeping epoch \d+ in `+kept+` failed: node n2, rank \d: .*its agent has no credentials for `+kept+` .*; epoch `+strconv.Itoa(resumed)+` stays the one kept$`, time.Minute)
	} else {
		second.WaitLine(`^shoal: the coordinator, node n2, has no credentials for `+kept+`: shoal run has the epochs copied while it follows the job$`, time.Minute)
		second.WaitLine(`^shoal: the nodes do not upload to `+kept+` themselves \(the node at \S+: .*its agent has no credentials for `+kept+` .*\): shoal run copies the epochs$`, time.Minute)
		second.WaitLine(`^shoal: epoch \d+ kept in `+kept+` \(\d+\.\d s\)$`, time.Minute)
	}
	if code := second.Wait(time.Minute); code != 0 {
		t.Fatalf("the resumed run exited %d", code)
	}
	out := second.Output()
	t.Logf("first run:\n%s\nsecond run:\n%s", shoalLines(first.Output()), shoalLines(out))
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	m := regexp.MustCompile(`heat: resumed at step (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("heat did not say it resumed")
	} else if step, _ := strconv.Atoi(m[1]); step <= 0 {
		t.Errorf("heat resumed at step %d, want past the first", step)
	}
	for name, p := range map[string]*watch.Proc{"first": first, "second": second} {
		if strings.Contains(p.Output(), srv.SecretKey) {
			t.Errorf("the %s run's output holds the secret key", name)
		}
	}

	for obj := range c.ListObjects(context.Background(), "shoal-durable", minio.ListObjectsOptions{Prefix: "jobs/heat/", Recursive: true}) {
		t.Errorf("the bucket keeps %s (%v) after the job finished", obj.Key, obj.Err)
	}
}

// byCoordinator is the end of the line of an epoch a job's coordinator kept,
// uploaded by the 2 nodes of its ranks.
const byCoordinator = `\([\d.]+ [kMG]?B by 2 nodes, [\d.]+ s\)`

// detachedKept: a job run with --detach, --durable and --keep-for 2s has its
// epochs kept by its coordinator, with no shoal run following it: the job's
// events say so, and the bucket holds the epoch's manifest. Cancelled, the job
// keeps that epoch in the bucket (nothing clears a job that did not succeed:
// the same command resumes it), and shoal gc --job would remove it; 2 s after
// its end, the leader's retention removes it, with its agent's credentials.
func detachedKept(t *testing.T, b *testbed.Bed, srv *testbed.S3Server, env []string, bin, heat string) {
	t.Helper()
	loc := "s3://shoal-durable/jobs/cancelled"
	cmd, err := b.Command(context.Background(), "n1", bin, "run", "--detach", "-n", "2", "--ckpt-interval", "1s", "--keep-for", "2s",
		"--durable", loc, "--", heat, "--size", "200", "--steps", "3000", "--pace", "20000")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env, cmd.Dir = env, testenv.Root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("shoal run --detach --durable %s: %v\n%s", loc, err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatal("shoal run --detach printed no job id")
	}
	id := lines[len(lines)-1]
	poll.Until(t, 5*time.Second, func() string { // n2's replica learns of the job
		if out, err := b.Exec(context.Background(), "n2", bin, "jobs", id); err != nil {
			return fmt.Sprintf("shoal jobs %s on n2: %v\n%s", id, err, out)
		}
		return ""
	})
	ecmd, err := b.Command(context.Background(), "n2", bin, "events", "--follow", id)
	if err != nil {
		t.Fatal(err)
	}
	events := watch.Start(t, ecmd)
	epoch := events.WaitLine(`  durable\s+epoch (\d+) kept in `+regexp.QuoteMeta(loc)+` `+byCoordinator+`$`, time.Minute)[1]
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	manifest := "jobs/cancelled/epoch-" + epoch + "/manifest.json"
	if _, err := c.StatObject(context.Background(), "shoal-durable", manifest, minio.StatObjectOptions{}); err != nil {
		t.Fatalf("the bucket has no %s once the job's events say epoch %s is kept: %v", manifest, epoch, err)
	}
	if out, err := b.Exec(context.Background(), "n2", bin, "cancel", id); err != nil {
		t.Fatalf("shoal cancel %s: %v\n%s", id, err, out)
	}
	events.Wait(30 * time.Second)
	poll.Until(t, 5*time.Second, func() string { // n2's replica learns of the end
		gc, err := b.Exec(context.Background(), "n2", bin, "gc", "--job", id, "--dry-run")
		if err != nil || !regexp.MustCompile(`(?m)^n\d\s+would remove\s+`+regexp.QuoteMeta(id)+`\s+durable\s+.*removed by request$`).Match(gc) {
			return fmt.Sprintf("shoal gc --job %s --dry-run lists no removal of its epochs in the bucket (%v):\n%s", id, err, gc)
		}
		return ""
	})
	objects := func() []string {
		var keys []string
		for obj := range c.ListObjects(context.Background(), "shoal-durable", minio.ListObjectsOptions{Prefix: "jobs/cancelled/", Recursive: true}) {
			keys = append(keys, obj.Key)
		}
		return keys
	}
	poll.Until(t, 30*time.Second, func() string {
		if keys := objects(); len(keys) > 0 {
			return fmt.Sprintf("the bucket still keeps %v of job %s, cancelled with --keep-for 2s", keys, id)
		}
		return ""
	})
}

// startS3 starts SeaweedFS for the test with a bucket, on every address of this
// machine, so that it outlives a testbed's bridge: the hosts of every testbed
// reach it at the bridge's address. Without weed the test is skipped, or fails
// under make test (SHOAL_REQUIRE_BUILD).
func startS3(t *testing.T, bucket string) *testbed.S3Server {
	t.Helper()
	weed := testbed.WeedPath()
	if _, err := os.Stat(weed); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%s missing: make test builds it (make s3-server)", weed)
		}
		t.Skipf("%s not built (make s3-server)", weed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := testbed.StartS3(ctx, testbed.S3Config{Weed: weed, Dir: t.TempDir(), BindIP: "0.0.0.0", Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// up brings up the testbed of the test: 2 hosts of 1 core with agents, which have
// the settings of srv, on the hosts named only when some are.
func up(t *testing.T, srv *testbed.S3Server, hosts ...string) *testbed.Bed {
	t.Helper()
	return upBed(t, testbed.Config{Nodes: 2, Cores: []int{1}, S3: true, S3Server: srv, S3Hosts: hosts})
}

// upBed brings up a testbed of cfg, on the test's instance, with agents.
func upBed(t *testing.T, cfg testbed.Config) *testbed.Bed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg.Instance, cfg.AgentBinary, cfg.Logf = instance, filepath.Join(testenv.Root, "bin/shoal"), t.Logf
	b, err := testbed.Up(ctx, cfg)
	if err != nil {
		t.Fatalf("testbed up: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Down(ctx); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	return b
}

// spoilNewest flips a byte of rank 0's shard of the newest epoch with a manifest
// under prefix in bucket, and returns that epoch.
func spoilNewest(t *testing.T, c *minio.Client, bucket, prefix string) int {
	t.Helper()
	ctx := context.Background()
	newest := 0
	for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		var e int
		if _, err := fmt.Sscanf(strings.TrimPrefix(obj.Key, prefix+"/"), "epoch-%d/manifest.json", &e); err == nil {
			newest = max(newest, e)
		}
	}
	if newest == 0 {
		t.Fatalf("no epoch with a manifest under s3://%s/%s", bucket, prefix)
	}
	key := fmt.Sprintf("%s/epoch-%d/rank-0.shard", prefix, newest)
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || len(b) < 1000 {
		t.Fatalf("reading %s: %d bytes, %v", key, len(b), err)
	}
	b[len(b)/2] ^= 1
	if _, err := c.PutObject(ctx, bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	return newest
}

// shoalLines keeps shoal's own lines of a run's output, and heat's resume.
func shoalLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "shoal") || strings.Contains(l, "heat: resumed") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
