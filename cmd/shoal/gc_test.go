package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/localrun"
)

func TestGCHelpAndUsage(t *testing.T) {
	for cmd, words := range map[string][]string{
		"gc":    {"-dry-run", "-job", "-node", "-json", "-data-dir", "docs/retention.md", "--keep", "Exit codes", "does not know"},
		"run":   {"-keep\n", "-keep-for", "docs/retention.md"},
		"agent": {"-keep-succeeded", "-keep-failed", "-keep-unused-files", "-gc-interval", "docs/retention.md"},
	} {
		out := runCLI(t, exitOK, cmd, "--help")
		for _, w := range words {
			if !strings.Contains(out, w) {
				t.Errorf("shoal %s --help does not mention %q", cmd, w)
			}
		}
	}
	for _, args := range [][]string{
		{"gc", "extra"},
		{"gc", "--job", "../x"},
		{"run", "-n", "1", "--keep", "--keep-for", "1h", "true"},
		{"run", "-n", "1", "--keep-for", "-1s", "true"},
		{"agent", "--keep-failed", "-1s"},
		{"agent", "--keep-succeeded", "-1h"},
		{"agent", "--gc-interval", "0s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("shoal %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(args, " "), code, &stderr)
		}
	}
}

func TestRunKeepSpec(t *testing.T) {
	for _, c := range []struct {
		f    runFlags
		want job.Duration
	}{
		{runFlags{}, 0},
		{runFlags{keep: true}, job.KeepForever},
		{runFlags{keepFor: 3600e9}, job.Duration(3600e9)},
	} {
		if got := c.f.keepSpec(); got != c.want {
			t.Errorf("keep %v, keep-for %v: spec keep %v, want %v", c.f.keep, c.f.keepFor, got, c.want)
		}
		spec := job.Spec{Ranks: 1, Argv: []string{"x"}, Keep: c.f.keepSpec()}
		if err := spec.Validate(); err != nil {
			t.Errorf("spec with keep %v: %v", spec.Keep, err)
		}
	}
	if err := (job.Spec{Ranks: 1, Argv: []string{"x"}, Keep: job.Duration(-5e9)}).Validate(); err == nil || !strings.Contains(err.Error(), "keep -5s") {
		t.Errorf("spec with keep -5s: %v, want an error naming keep -5s", err)
	}
}

// TestGCCommand runs shoal gc against a real agent: data of a job the job
// store does not know is listed as kept by a dry run and by a plain gc, and
// only gc --job removes it.
func TestGCCommand(t *testing.T) {
	a := startCLIAgent(t, "gc1", "--init")
	shard := filepath.Join(a.dir, "ckpt", "standalone", "e00000001", "r000000.shard")
	if err := os.MkdirAll(filepath.Dir(shard), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shard, bytes.Repeat([]byte{1}, 2500), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, exitOK, "gc", "--data-dir", a.dir, "--dry-run")
	if !strings.Contains(out, "gc1   kept    standalone  shards  2.5 kB  unknown to the job store") ||
		!strings.Contains(out, "would remove 0 items, 0 B; kept 1") {
		t.Errorf("gc --dry-run:\n%s", out)
	}
	out = runCLI(t, exitOK, "gc", "--data-dir", a.dir)
	if !strings.Contains(out, "removed 0 items, 0 B; kept 1 ('shoal gc --dry-run' says why)") {
		t.Errorf("gc:\n%s", out)
	}
	out = runCLI(t, exitOK, "gc", "--data-dir", a.dir, "--job", "standalone")
	if !strings.Contains(out, "gc1   removed  standalone  shards  2.5 kB  removed by request") ||
		!strings.Contains(out, "removed 1 items, 2.5 kB; kept 0") {
		t.Errorf("gc --job standalone:\n%s", out)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(shard))); !os.IsNotExist(err) {
		t.Errorf("the standalone job's checkpoint directory is still there: %v", err)
	}
	runCLIError(t, "node \"nope\": not a member", "gc", "--data-dir", a.dir, "--node", "nope")
}

// TestGCLocal runs shoal gc where no agent runs: it applies the retention
// policy to the jobs shoal run ran on this machine alone. A run cancelled
// 25 h ago goes, one cancelled an hour ago stays until --job names it.
func TestGCLocal(t *testing.T) {
	data := t.TempDir()
	t.Setenv("SHOAL_DATA_DIR", data)
	t.Setenv("SHOAL_AGENT", "")
	store := localrun.Store{CkptRoot: filepath.Join(data, "ckpt"), RunRoot: filepath.Join(data, "jobs")}
	for id, ago := range map[string]time.Duration{"old": 25 * time.Hour, "new": time.Hour} {
		shard := filepath.Join(store.CkptRoot, id, "e00000001", "r000000.shard")
		if err := os.MkdirAll(filepath.Dir(shard), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shard, bytes.Repeat([]byte{1}, 2500), 0o644); err != nil {
			t.Fatal(err)
		}
		ended := time.Now().Add(-ago)
		if err := store.Write(localrun.Record{Job: id, State: job.Cancelled, Started: ended.Add(-time.Minute), Ended: ended}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
		gone []string
	}{
		{[]string{"gc", "--dry-run"}, []string{"local  would remove  old  shards  2.5 kB  cancelled 25h0m0s ago; kept 24h0m0s after the end", "local  kept          new  shards  2.5 kB  cancelled 1h0m0s ago"}, nil},
		{[]string{"gc"}, []string{"local  removed  old  shards", "local  removed  old  job-dir", "removed 2 items"}, []string{"old"}},
		{[]string{"gc", "--job", "new"}, []string{"local  removed  new  shards  2.5 kB  removed by request"}, []string{"old", "new"}},
	} {
		out := runCLI(t, exitOK, c.args...)
		spaced := regexp.MustCompile(` +`).ReplaceAllString(out, " ") // the table's alignment aside
		for _, w := range c.want {
			if !strings.Contains(spaced, regexp.MustCompile(` +`).ReplaceAllString(w, " ")) {
				t.Errorf("shoal %s:\n%s\nwant it to contain %q", strings.Join(c.args, " "), out, w)
			}
		}
		for _, id := range c.gone {
			for _, dir := range []string{store.CkptRoot, store.RunRoot} {
				if _, err := os.Stat(filepath.Join(dir, id)); !os.IsNotExist(err) {
					t.Errorf("after shoal %s: %s/%s is still there", strings.Join(c.args, " "), dir, id)
				}
			}
		}
	}
}
