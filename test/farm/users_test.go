package farm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
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

// sharedDir is a directory every local user can read, removed at the end of
// the test (t.TempDir's is its creator's only).
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shoal-farm-users-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asUser runs argv in host as the local user name, as that user's shell
// would (no cluster secret: shoal goes through the agent's socket), with
// stdin as its standard input; it returns the standard output and error and
// the exit code.
func asUser(t *testing.T, b *testbed.Bed, host, name, stdin string, argv ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, err := b.Command(ctx, host, append([]string{"setpriv", "--reuid=" + name, "--regid=" + name, "--clear-groups"}, argv...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = "/"
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s as %s in %s: %v", strings.Join(argv, " "), name, host, err)
	}
	return stdout.String(), stderr.String(), code
}

// shoalAs runs `shoal ARGS` in host as the local user name.
func shoalAs(t *testing.T, b *testbed.Bed, host, name, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return asUser(t, b, host, name, stdin, append([]string{filepath.Join(testenv.Root, "bin/shoal")}, args...)...)
}

// socketGet asks the agent of host, on its local socket, for path as the local
// user name: the answer's status and content type on a first line, then its
// body.
func socketGet(t *testing.T, b *testbed.Bed, host, name, path string) string {
	t.Helper()
	h, err := b.Host(host)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := asUser(t, b, host, name, "", "curl", "--silent", "--show-error", "--max-time", "30", "--unix-socket", filepath.Join(h.DataDir, "agent.sock"),
		"--write-out", statusMark+"%{http_code} %{content_type}", "http://agent"+path)
	if code != 0 {
		t.Fatalf("curl %s as %s in %s: exit %d: %s", path, name, host, code, errOut)
	}
	// curl writes the status after the body; put it first.
	body, status, _ := strings.Cut(out, statusMark)
	return status + "\n" + body
}

// statusMark separates the body curl writes from the status it writes after.
const statusMark = "\n--- status: "
