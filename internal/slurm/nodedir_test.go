package slurm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBaseProblem(t *testing.T) {
	const euid = 1000
	tests := []struct {
		mode fs.FileMode
		uid  int
		want string
	}{
		{fs.ModeDir | 0o755, 0, ""},
		{fs.ModeDir | 0o700, euid, ""},
		{fs.ModeDir | fs.ModeSticky | 0o777, 0, ""},
		{fs.ModeDir | fs.ModeSticky | 0o777, euid, ""},
		{fs.ModeDir | 0o777, 0, "writable by others (mode 0777) and not sticky"},
		{fs.ModeDir | 0o775, euid, "writable by others (mode 0775) and not sticky"},
		{fs.ModeDir | 0o700, 1001, "owned by uid 1001, not by root or uid 1000"},
		{fs.ModeDir | fs.ModeSticky | 0o777, 1001, "owned by uid 1001, not by root or uid 1000"},
		{fs.ModeSymlink | 0o777, euid, "a symbolic link"},
		{0o600, euid, "not a directory"},
	}
	for _, tt := range tests {
		if got := baseProblem(tt.mode, tt.uid, euid); got != tt.want {
			t.Errorf("baseProblem(%v, uid %d) = %q, want %q", tt.mode, tt.uid, got, tt.want)
		}
	}
}

func TestPrivateProblem(t *testing.T) {
	const euid = 1000
	tests := []struct {
		mode fs.FileMode
		uid  int
		want string
	}{
		{fs.ModeDir | 0o700, euid, ""},
		{fs.ModeDir | 0o500, euid, ""},
		{fs.ModeDir | 0o700, 0, "owned by uid 0, not by uid 1000"},
		{fs.ModeDir | 0o777, 1001, "owned by uid 1001, not by uid 1000"},
		{fs.ModeDir | 0o711, euid, "mode 0711, want 0700"},
		{fs.ModeDir | fs.ModeSticky | 0o777, euid, "mode 0777, want 0700"},
		{fs.ModeSymlink | 0o777, euid, "a symbolic link"},
		{0o600, euid, "not a directory"},
	}
	for _, tt := range tests {
		if got := privateProblem(tt.mode, tt.uid, euid); got != tt.want {
			t.Errorf("privateProblem(%v, uid %d) = %q, want %q", tt.mode, tt.uid, got, tt.want)
		}
	}
}

// TestMakeNodeDir: the agent's directory is new, this user's, mode 0700, with the
// secret in it; of what lies under its kind of name, only an earlier run's directory
// (this user's, mode 0700) is removed.
func TestMakeNodeDir(t *testing.T) {
	base := realDir(t, t.TempDir())
	elsewhere := filepath.Join(base, "elsewhere")
	mkdir(t, elsewhere, 0o700)
	tests := []struct {
		name string
		make func(path string)
		kept bool
	}{
		{"shoal-slurm-7-agent-123", func(p string) { mkdir(t, p, 0o700); writeFile(t, filepath.Join(p, "secret")) }, false},
		{"shoal-slurm-7-agent-open", func(p string) { mkdir(t, p, 0o755) }, true},
		{"shoal-slurm-7-agent-link", func(p string) { symlink(t, elsewhere, p) }, true},
		{"shoal-slurm-7-agent-file", func(p string) { writeFile(t, p) }, true},
		{"shoal-slurm-70-agent-123", func(p string) { mkdir(t, p, 0o700) }, true},
		{"shoal-slurm-7-run-123", func(p string) { mkdir(t, p, 0o700) }, true},
		{"shoal-slurm-7", func(p string) { mkdir(t, p, 0o700) }, true},
	}
	for _, tt := range tests {
		tt.make(filepath.Join(base, tt.name))
	}
	secret := []byte("s3cret\n")
	nd, err := MakeNodeDir(base, "7", secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		_, err := os.Lstat(filepath.Join(base, tt.name))
		if got := err == nil; got != tt.kept {
			t.Errorf("%s kept: got %v, want %v", tt.name, got, tt.kept)
		}
	}
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("the target of a symbolic link: %v", err)
	}
	if got, want := filepath.Dir(nd.Dir), base; got != want {
		t.Errorf("NodeDir in %s, want %s", got, want)
	}
	if !strings.HasPrefix(filepath.Base(nd.Dir), "shoal-slurm-7-agent-") {
		t.Errorf("NodeDir %s: want a name shoal-slurm-7-agent-*", nd.Dir)
	}
	if want := filepath.Join(nd.Dir, "data"); nd.DataDir != want {
		t.Errorf("DataDir = %s, want %s", nd.DataDir, want)
	}
	checkPrivate(t, nd.Dir, os.Geteuid())
	checkSecret(t, nd.SecretFile, secret, os.Geteuid())
	// A second run of the same job on this node: the first run's directory goes.
	again, err := MakeNodeDir(base, "7", secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(nd.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the earlier run's %s: %v, want it removed", nd.Dir, err)
	}
	if again.Dir == nd.Dir {
		t.Errorf("the second run's directory is the first's, %s", nd.Dir)
	}
}

// TestMakeNodeDirBase: a base another user could change, or a directory above it, is
// refused with one line naming it; a sticky one (/tmp) and a symbolic link to a good
// one are not.
func TestMakeNodeDirBase(t *testing.T) {
	root := realDir(t, t.TempDir())
	tests := []struct {
		name     string
		make     func(base string)
		badPath  string // the directory the refusal names, relative to root; "" for none
		problem  string // what it says of it
		notFound bool
	}{
		{"sticky", func(b string) { mkdir(t, b, fs.ModeSticky|0o777) }, "", "", false},
		{"private", func(b string) { mkdir(t, b, 0o700) }, "", "", false},
		{"link", func(b string) { mkdir(t, b+".real", 0o700); symlink(t, b+".real", b) }, "", "", false},
		{"open", func(b string) { mkdir(t, b, 0o777) }, "open", "writable by others (mode 0777) and not sticky", false},
		{"group", func(b string) { mkdir(t, b, 0o770) }, "group", "writable by others (mode 0770) and not sticky", false},
		{"under-open/base", func(b string) { mkdir(t, filepath.Dir(b), 0o777); mkdir(t, b, 0o700) },
			"under-open", "writable by others (mode 0777) and not sticky", false},
		{"file", func(b string) { writeFile(t, b) }, "file", "not a directory", false},
		{"missing", func(string) {}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := filepath.Join(root, tt.name)
			tt.make(base)
			nd, err := MakeNodeDir(base, "7", []byte("s\n"))
			_, pdErr := PrivateDir(base, "shoal-slurm-7-run-")
			var de *DirError
			switch {
			case tt.notFound:
				if !errors.Is(err, fs.ErrNotExist) || !errors.Is(pdErr, fs.ErrNotExist) {
					t.Errorf("MakeNodeDir: %v, PrivateDir: %v; want both not found", err, pdErr)
				}
			case tt.badPath == "":
				if err != nil || pdErr != nil {
					t.Fatalf("MakeNodeDir: %v, PrivateDir: %v; want both to succeed", err, pdErr)
				}
				checkPrivate(t, nd.Dir, os.Geteuid())
			case !errors.As(err, &de) || !errors.Is(err, ErrUnsafeDir) || !errors.Is(pdErr, ErrUnsafeDir):
				t.Errorf("MakeNodeDir: %v, PrivateDir: %v; want ErrUnsafeDir", err, pdErr)
			case de.Path != filepath.Join(root, tt.badPath) || de.Problem != tt.problem:
				t.Errorf("refused %s: %q, want %s: %q", de.Path, de.Problem, filepath.Join(root, tt.badPath), tt.problem)
			case strings.Contains(err.Error(), "\n"):
				t.Errorf("refusal %q is more than one line", err)
			}
		})
	}
}

// realDir is dir with its symbolic links resolved, as MakeNodeDir returns paths.
func realDir(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// mkdir makes dir with exactly mode (umask aside).
func mkdir(t *testing.T, dir string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// checkPrivate fails t unless dir is a directory of uid's, mode 0700.
func checkPrivate(t *testing.T, dir string, uid int) {
	t.Helper()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := owner(fi); !fi.IsDir() || got != uid || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v owned by uid %d, want a directory, mode 0700, owned by uid %d", dir, fi.Mode(), got, uid)
	}
}

// checkSecret fails t unless path is a file of uid's, mode 0600, holding secret.
func checkSecret(t *testing.T, path string, secret []byte, uid int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := owner(fi); !fi.Mode().IsRegular() || got != uid || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v owned by uid %d, want a file, mode 0600, owned by uid %d", path, fi.Mode(), got, uid)
	}
	if b, _ := os.ReadFile(path); string(b) != string(secret) {
		t.Errorf("%s holds %q, want %q", path, b, secret)
	}
}
