package testbed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstanceDirNotFollowed: an instance's directory in /tmp that is a link, or
// another user's, is refused by name: its state is not read (root would kill the
// pids it lists) and nothing is made or mounted through it.
func TestInstanceDirNotFollowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the directory must be root's")
	}
	n := names{253}
	if _, err := os.Lstat(n.dir()); err == nil {
		t.Skipf("%s exists: testbed instance 253 may be up", n.dir())
	}
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, "state.json"), []byte(`{"version":1,"instance":253}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, n.dir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(n.dir()) })
	if _, err := loadState(n); err == nil || !strings.Contains(err.Error(), "not a directory only root can change") {
		t.Errorf("loadState through a link: %v, want it refused", err)
	}
	if err := n.makeDir(); err == nil || !strings.Contains(err.Error(), "not a directory only root can change") {
		t.Errorf("makeDir over a link: %v, want it refused", err)
	}
	if err := os.Remove(n.dir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(n.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(n.dir(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := n.makeDir(); err == nil || !strings.Contains(err.Error(), "not a directory only root can change") {
		t.Errorf("makeDir of another user's directory: %v, want it refused", err)
	}
	if err := os.Remove(n.dir()); err != nil {
		t.Fatal(err)
	}
	if err := n.makeDir(); err != nil {
		t.Errorf("makeDir where nothing is: %v", err)
	}
}
