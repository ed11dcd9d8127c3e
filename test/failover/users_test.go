package failover

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

	"shoal/test/testenv"
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
// shell would: without the secret, through the agent's socket. It returns the
// output and the exit code.
func asUser(t *testing.T, host, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := append([]string{"setpriv", "--reuid=" + name, "--regid=" + name, "--clear-groups", filepath.Join(testenv.Root, "bin/shoal")}, args...)
	cmd, err := bed.Command(ctx, host, argv...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("shoal %s as %s in %s: %v", strings.Join(args, " "), name, host, err)
	}
	return string(out), 0
}

// whoami is a program that prints the uid it runs as and its host, in a
// directory every user may read.
func whoami(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shoal-whoami-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	script := filepath.Join(dir, "whoami.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"uid: $(id -u) on $(hostname)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// rankUIDs are the uids the ranks of whoami reported in out, by host.
func rankUIDs(out string) map[string][]string {
	uids := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^\[\d+\] uid: (\d+) on (\S+)$`).FindAllStringSubmatch(out, -1) {
		uids[m[2]] = append(uids[m[2]], m[1])
	}
	return uids
}

const rootWarning = "runs as root on every node (the agents' user)"

// TestRunAsUser: root runs a job as another user with shoal run --user: its
// ranks run as that user on every node, and shoal jobs and the job's events
// name the user. Without --user, root's job runs as root and shoal run says so
// in one line; a user's own job does not; and a user other than root who names
// another user is refused.
func TestRunAsUser(t *testing.T) {
	cluster(t)
	uidA := localUser(t, "shoal-test-a")
	localUser(t, "shoal-test-b")
	script := whoami(t)

	out, code := shoal(t, "n1", "run", "-n", "4", "--ranks-per-node", "1", "--keep", "--user", "shoal-test-a", "--", script)
	if code != 0 {
		t.Fatalf("shoal run --user shoal-test-a exited %d:\n%s", code, out)
	}
	uids := rankUIDs(out)
	if len(uids) != 4 {
		t.Errorf("ranks reported from %d hosts, want 4:\n%s", len(uids), out)
	}
	for host, got := range uids {
		if len(got) != 1 || got[0] != uidA {
			t.Errorf("the rank on %s ran as uid %v, want shoal-test-a's %s", host, got, uidA)
		}
	}
	if strings.Contains(out, rootWarning) {
		t.Errorf("a job run as shoal-test-a says it runs as root:\n%s", out)
	}
	id := regexp.MustCompile(`(?m)^shoal: job ([^:]+):`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no job id in the output:\n%s", out)
	}
	if table, _ := shoal(t, "n2", "jobs"); !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id[1]) + `\s+shoal-test-a\s+succeeded\s`).MatchString(table) {
		t.Errorf("shoal jobs in n2:\n%s\nwant %s owned by shoal-test-a, succeeded", table, id[1])
	}
	if events, _ := shoal(t, "n2", "events", id[1]); !strings.Contains(events, "submitted; runs as shoal-test-a (uid "+uidA+") on every node") {
		t.Errorf("events of %s:\n%s\nwant the submission to name shoal-test-a", id[1], events)
	}
	if mine, _ := asUser(t, "n3", "shoal-test-a", "jobs"); !strings.Contains(mine, id[1]) {
		t.Errorf("shoal jobs as shoal-test-a:\n%s\nwant its job %s", mine, id[1])
	}

	out, code = shoal(t, "n1", "run", "-n", "2", "--", script)
	if code != 0 {
		t.Fatalf("shoal run as root exited %d:\n%s", code, out)
	}
	uids = rankUIDs(out)
	if len(uids) == 0 {
		t.Errorf("no rank of root's job reported its uid:\n%s", out)
	}
	for host, got := range uids {
		for _, uid := range got {
			if uid != "0" {
				t.Errorf("a rank of root's job on %s ran as uid %s, want 0", host, uid)
			}
		}
	}
	if n := strings.Count(out, rootWarning); n != 1 {
		t.Errorf("root's job said %d times that it runs as root, want once:\n%s", n, out)
	}

	out, code = asUser(t, "n1", "shoal-test-a", "run", "-n", "1", "--", script)
	if code != 0 || strings.Contains(out, rootWarning) {
		t.Errorf("shoal run as shoal-test-a exited %d:\n%s\nwant 0 and no word of root", code, out)
	}

	out, code = asUser(t, "n1", "shoal-test-b", "run", "-n", "1", "--user", "shoal-test-a", "--", script)
	refusal := "shoal run: shoal-test-b (uid "
	if code != 1 || !strings.HasPrefix(out, refusal) || strings.Count(out, "\n") != 1 || strings.Contains(out, "uid: ") {
		t.Errorf("shoal run --user shoal-test-a as shoal-test-b exited %d:\n%s\nwant 1 and one line starting %q", code, out, refusal)
	}
}
