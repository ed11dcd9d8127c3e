package jobs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// localUser returns the uid of a local user named name, made for the test when
// the machine has none.
func localUser(t *testing.T, name string) string {
	t.Helper()
	if u, err := user.Lookup(name); err == nil {
		return u.Uid
	}
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Skipf("cannot make a local user %s: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u.Uid
}

// asUser runs shoal with args in host as the local user name, as that user's
// shell would: without the secret, through the agent's socket.
func asUser(ctx context.Context, b *testbed.Bed, host, name string, args ...string) (string, error) {
	argv := append([]string{"setpriv", "--reuid=" + name, "--regid=" + name, "--clear-groups", filepath.Join(testenv.Root, "bin/shoal")}, args...)
	cmd, err := b.Command(ctx, host, argv...)
	if err != nil {
		return "", err
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestUserJob: a user other than root submits through the local agent's socket
// without the cluster secret. The job's ranks run as that user on every node,
// are given neither the secret nor its path, and cannot read it; `shoal jobs`
// names the owner; another user sees nothing of the job, and neither user may do
// what is root's (make a node leave).
func TestUserJob(t *testing.T) {
	uid := localUser(t, "shoal-test-a")
	localUser(t, "shoal-test-b")
	b := up(t, 3)
	// Every node's replica of the job store has the job once every node votes.
	waitVoters(t, b, 3, time.Minute)
	// The program: a script the user can read, in a directory they can reach.
	dir, err := os.MkdirTemp("", "shoal-user-job-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	script := filepath.Join(dir, "whoami.sh")
	body := `#!/bin/sh
echo "uid: $(id -u) on $(hostname)"
echo "secret in env: $(env | grep -c SHOAL_SECRET)"
if cat "$SHOAL_NODE_DATA/secret" >/dev/null 2>&1; then echo "secret: read"; else echo "secret: refused"; fi
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	out, err := asUser(ctx, b, "n1", "shoal-test-a", "run", "-n", "3", "--ranks-per-node", "1", "--keep", "--", script)
	if err != nil {
		t.Fatalf("shoal run as shoal-test-a: %v\n%s", err, out)
	}
	t.Logf("output:\n%s", out)
	ranks := regexp.MustCompile(`(?m)^\[\d\] uid: (\d+) on (\S+)$`).FindAllStringSubmatch(out, -1)
	hosts := map[string]bool{}
	for _, m := range ranks {
		if m[1] != uid {
			t.Errorf("a rank ran as uid %s on %s, want shoal-test-a's %s", m[1], m[2], uid)
		}
		hosts[m[2]] = true
	}
	if len(ranks) != 3 || len(hosts) != 3 {
		t.Errorf("%d ranks reported on %d hosts, want 3 on 3", len(ranks), len(hosts))
	}
	if n := strings.Count(out, "secret in env: 0"); n != 3 {
		t.Errorf("%d of 3 ranks had no SHOAL_SECRET in their environment", n)
	}
	if n := strings.Count(out, "secret: refused"); n != 3 {
		t.Errorf("%d of 3 ranks were refused the secret file", n)
	}
	id := regexp.MustCompile(`(?m)^shoal: job ([^:]+):`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no job id in the output")
	}

	// Root sees the job and its owner; the owner sees it; another user does not.
	table, err := b.Exec(ctx, "n2", filepath.Join(testenv.Root, "bin/shoal"), "jobs")
	if err != nil || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(id[1])+`\s+shoal-test-a\s+succeeded\s`).Match(table) {
		t.Errorf("shoal jobs as root in n2: %v\n%s\nwant %s owned by shoal-test-a, succeeded", err, table, id[1])
	}
	if mine, err := asUser(ctx, b, "n2", "shoal-test-a", "jobs"); err != nil || !strings.Contains(mine, id[1]) {
		t.Errorf("shoal jobs as the owner in n2: %v\n%s", err, mine)
	}
	if theirs, err := asUser(ctx, b, "n2", "shoal-test-b", "jobs"); err != nil || strings.Contains(theirs, id[1]) {
		t.Errorf("shoal jobs as another user: %v\n%s\nwant no %s", err, theirs, id[1])
	}
	logs, err := asUser(ctx, b, "n1", "shoal-test-b", "logs", id[1])
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || strings.Contains(logs, "uid:") {
		t.Errorf("shoal logs of another user's job: %v\n%s\nwant exit 4 and no output of the job", err, logs)
	}
	leave, err := asUser(ctx, b, "n2", "shoal-test-a", "leave")
	if err == nil || !strings.Contains(leave, "forbidden") && !strings.Contains(leave, "is for root") {
		t.Errorf("shoal leave as a user: %v\n%s\nwant a refusal", err, leave)
	}
	if ns, err := b.Exec(ctx, "n1", filepath.Join(testenv.Root, "bin/shoal"), "nodes"); err != nil || strings.Count(string(ns), " alive ") != 3 {
		t.Errorf("shoal nodes after the refused leave: %v\n%s\nwant three nodes alive", err, ns)
	}

	// A user's job checkpoints and survives a node as root's does: its shards,
	// written by ranks running as the user and copied by the agents, are read
	// back by the user's ranks after the restart. --no-replan keeps rank 3 on
	// n3 for its loss (the planner would pack the four ranks on n1 and n2).
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	args := []string{"--size", "600", "--steps", "6000", "--pace", "1500"}
	want := reference(t, "checksum", 4, append([]string{heat}, unpaced(args)...)...)
	argv := append([]string{"setpriv", "--reuid=shoal-test-a", "--regid=shoal-test-a", "--clear-groups", filepath.Join(testenv.Root, "bin/shoal"),
		"run", "-n", "4", "--ckpt-interval", "500ms", "--max-oversubscribe", "2", "--no-replan", "--", heat}, args...)
	cmd, err := b.Command(context.Background(), "n1", argv...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = "/"
	j := &job{Proc: watch.Start(t, cmd)}
	j.waitEpoch(2)
	if _, err := b.Kill(context.Background(), "n3"); err != nil {
		t.Fatal(err)
	}
	if code := j.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("the user's heat exited %d:\n%s", code, grepShoal(j.Output()))
	}
	out = j.Output()
	if got := field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	if !regexp.MustCompile(`node n3 lost .*; restarting 4 ranks from epoch [1-9]`).MatchString(out) {
		t.Errorf("the user's job did not restart from an epoch after n3 was lost:\n%s", grepShoal(out))
	}
}
