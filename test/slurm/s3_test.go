package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"shoal/internal/testbed"
	"shoal/test/testenv"
)

// batchJobHeldS3: batchJobRequeued's first half with the epochs in an object store
// (--durable s3://BUCKET/PREFIX) instead of a shared directory: SeaweedFS on this
// machine, outside every host, listening at the testbed's bridge address. The
// warning signal holds the job and its epoch goes to the bucket; the next batch job of
// the same script resumes from the bucket and ends with the uninterrupted checksum,
// the bucket emptied of its epochs, its nodes having fetched their shards from it
// themselves. The credentials reach shoal run (and the agents it starts) through the
// AWS_* variables, and never appear in the job's output.
func batchJobHeldS3(t *testing.T, b *testbed.Bed) {
	weed := testbed.WeedPath()
	if _, err := os.Stat(weed); err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%s missing: make test builds it (make s3-server)", weed)
		}
		t.Skipf("%s not built (make s3-server)", weed)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := testbed.StartS3(ctx, testbed.S3Config{Weed: weed, Dir: dir, BindIP: testbed.BridgeIP(instance), Bucket: "shoal-slurm"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)

	heatArgs := []string{"--size", "1000", "--steps", "800"}
	want := testenv.Reference(t, 6, heatArgs...)
	shoal := filepath.Join(testenv.Root, "bin/shoal")
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	loc := "s3://shoal-slurm/jobs/heat"
	script := fmt.Sprintf("#!/bin/bash\n%sexec %s run -n 6 --ckpt-interval 2s --durable %s -- %s %s --pace 6000\n",
		srv.Env(srv.Host), shoal, loc, heat, strings.Join(heatArgs, " "))
	kept := regexp.QuoteMeta(loc)

	// Not requeueable (--no-requeue), so that the next run is a new batch job, which
	// Slurm starts at once, rather than a requeued one, which it delays.
	j := sbatch(t, b, script, "-N", "4", "--no-kill", "--no-requeue")
	j.waitOutput(t, `^shoal: epoch \d+ kept in `+kept+` \(`, time.Minute)
	scancel(t, b, "--batch", "--signal=TERM", j.id)
	held := j.waitOutput(t, `^shoal: epoch (\d+) kept in `+kept+`; not requeueing Slurm job `+j.id, 45*time.Second)[1]
	if strings.Contains(j.output(), srv.SecretKey) {
		t.Errorf("the first run's output holds the secret")
	}

	j2 := sbatch(t, b, script, "-N", "4", "--no-kill", "--no-requeue")
	// The agents shoal run starts in the allocation have the script's AWS_*
	// variables: the nodes fetch the epoch's shards from the bucket themselves.
	j2.waitOutput(t, `^shoal: resuming from epoch `+held+` kept in `+kept+` \(job \S+, fetched by \d+ nodes; Slurm job `+j2.id+`, restart 0\)`, time.Minute)
	out := j2.finished(t, b, want)
	if !strings.Contains(out, "heat: resumed at step") {
		t.Errorf("heat did not resume")
	}
	if strings.Contains(out, srv.SecretKey) {
		t.Errorf("the second run's output holds the secret")
	}

	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	left := false
	for obj := range c.ListObjects(context.Background(), "shoal-slurm", minio.ListObjectsOptions{Prefix: "jobs/heat/", Recursive: true}) {
		t.Errorf("the bucket keeps %s (%v, written %s) after the job finished", obj.Key, obj.Err, obj.LastModified.Format(time.RFC3339Nano))
		left = true
	}
	if left {
		t.Logf("the second run's output:\n%s", out)
	}
}
