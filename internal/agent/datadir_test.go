package agent

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestAddresses(t *testing.T) {
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	for _, tt := range []struct {
		listen      net.Addr
		asked       string
		local, anno string
	}{
		{tcp("10.0.0.2", 7947), "10.0.0.2:7947", "10.0.0.2:7947", "10.0.0.2:7947"},
		{tcp("::", 7947), "0.0.0.0:7947", "127.0.0.1:7947", "192.0.2.2:7947"},
		{tcp("0.0.0.0", 7947), "0.0.0.0:7947", "127.0.0.1:7947", "192.0.2.2:7947"},
		{tcp("::", 7947), "[::]:7947", "[::1]:7947", "192.0.2.2:7947"},
	} {
		if got := localAddr(tt.listen, tt.asked); got != tt.local {
			t.Errorf("localAddr(%v, %q) = %s, want %s", tt.listen, tt.asked, got, tt.local)
		}
		if got := announcedAddr(tt.listen, "192.0.2.2:7946"); got != tt.anno {
			t.Errorf("announcedAddr(%v) = %s, want %s", tt.listen, got, tt.anno)
		}
	}
}

// TestUnlistJobParents: the directories with an entry per job are passable
// but not listable by other users, made so when new, and an existing one only
// loses its read bits: a mode already narrower stays as it was.
func TestUnlistJobParents(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if err := os.Mkdir(filepath.Join(dir, JobsDir), 0o755); err != nil { // as an earlier agent made it
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, ResultsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unlistJobParents(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{JobsDir: 0o711, CkptDir: 0o711, CoordDir: 0o711, FilesDir: 0o711, ResultsDir: 0o700} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", name, got, want)
		}
	}
	other := t.TempDir()
	if err := os.Symlink(dir, filepath.Join(other, CoordDir)); err != nil {
		t.Fatal(err)
	}
	if err := unlistJobParents(other); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a symlink where a directory should be: %v, want refused", err)
	}
}
