package testbed

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// The version the Go side looks for is the one scripts/seaweedfs.sh builds.
func TestSeaweedFSVersionMatchesScript(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "scripts", "seaweedfs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION=\$\{VERSION:-(\S+)\}$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/seaweedfs.sh sets no default VERSION")
	}
	if got := string(m[1]); got != SeaweedFSVersion {
		t.Errorf("scripts/seaweedfs.sh builds %s, SeaweedFSVersion is %s", got, SeaweedFSVersion)
	}
}

// TestS3DirNotFollowed: a link another user put at the testbed's S3 directory in
// /tmp (here to an empty directory) is refused by name, not read or written through.
func TestS3DirNotFollowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the directory must be root's")
	}
	if _, err := os.Lstat(TestbedS3Dir); err == nil {
		t.Skipf("%s exists: a testbed S3 server may be up", TestbedS3Dir)
	}
	target := t.TempDir()
	if err := os.Symlink(target, TestbedS3Dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(TestbedS3Dir) })
	if _, err := OpenS3(); err == nil || !strings.Contains(err.Error(), "not a directory only root can change") {
		t.Errorf("OpenS3 through a link: %v, want it refused", err)
	}
	if err := os.Remove(TestbedS3Dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(TestbedS3Dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(TestbedS3Dir, 0o777)
	if _, err := OpenS3(); err == nil || !strings.Contains(err.Error(), "not a directory only root can change") {
		t.Errorf("OpenS3 of a directory anyone can write: %v, want it refused", err)
	}
}
