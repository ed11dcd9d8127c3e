package dirsync

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSync(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Sync(dir); err != nil {
		t.Errorf("Sync of a directory: %v", err)
	}
	if err := Sync(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Sync of a missing directory: %v, want ErrNotExist", err)
	}
}
