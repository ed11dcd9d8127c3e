package shardstore

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A probe writes and removes its bytes, leaving the store as it was; a store
// that cannot take them says why in the system's words.
func TestProbe(t *testing.T) {
	s := New(filepath.Join(t.TempDir(), "ckpt"))
	why, err := s.Probe(3<<20 + 5)
	if err != nil || why != "" {
		t.Fatalf("probe of a writable store: %q, %v", why, err)
	}
	if left, _ := os.ReadDir(s.Dir); len(left) != 0 {
		t.Errorf("the probe left %v", left)
	}
	if _, err := s.Probe(0); err == nil {
		t.Error("a probe of 0 bytes was made")
	}

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	bad := New(filepath.Join(file, "ckpt")) // under a file: no directory can be made
	if why, err := bad.Probe(1); err != nil || why != "not a directory" {
		t.Errorf("probe of a store under a file: %q, %v; want \"not a directory\"", why, err)
	}
	if got := reason(&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}); got != "no space left on device" {
		t.Errorf("reason(ENOSPC) = %q", got)
	}
	if got := reason(os.ErrClosed); !strings.Contains(got, "closed") {
		t.Errorf("reason(ErrClosed) = %q", got)
	}
}
