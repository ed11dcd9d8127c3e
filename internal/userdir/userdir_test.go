package userdir

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// plant makes a tree as a user bent on mischief would leave it: below base,
// job holds a file, a link to a file outside, a link to a directory outside, a
// FIFO and a hard link; outside holds the targets, whose bytes, mode and owner
// must never change.
type plant struct {
	base, job     string
	outFile       string // outside the tree, a file "secret"
	outDir        string // outside the tree, a directory with a file "f"
	want          []byte
	linkFile      string // job/lf → outFile
	linkDir       string // job/ld → outDir
	fifo, hard    string // job/fifo; job/hard, a second name of job/file
	file, subfile string // job/file; job/sub/f
}

func newPlant(t *testing.T) plant {
	t.Helper()
	top := t.TempDir()
	p := plant{base: filepath.Join(top, "base"), outDir: filepath.Join(top, "outside"), want: []byte("root's own bytes\n")}
	p.job = filepath.Join(p.base, "job")
	p.outFile = filepath.Join(top, "secret")
	for _, d := range []string{p.job, filepath.Join(p.job, "sub"), p.outDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.file, p.subfile = filepath.Join(p.job, "file"), filepath.Join(p.job, "sub", "f")
	for _, f := range []string{p.outFile, filepath.Join(p.outDir, "f"), p.file, p.subfile} {
		if err := os.WriteFile(f, p.want, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.linkFile, p.linkDir = filepath.Join(p.job, "lf"), filepath.Join(p.job, "ld")
	p.fifo, p.hard = filepath.Join(p.job, "fifo"), filepath.Join(p.job, "hard")
	if err := os.Symlink(p.outFile, p.linkFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p.outDir, p.linkDir); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p.fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p.file, p.hard); err != nil {
		t.Fatal(err)
	}
	return p
}

// untouched fails t if a file or directory outside the tree changed.
func (p plant) untouched(t *testing.T) {
	t.Helper()
	for _, f := range []string{p.outFile, filepath.Join(p.outDir, "f")} {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Equal(b, p.want) {
			t.Errorf("%s: %q, %v; want it untouched", f, b, err)
		}
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
			t.Errorf("%s: mode or owner changed: %v %v", f, st.Mode(), err)
		}
	}
	ents, err := os.ReadDir(p.outDir)
	if err != nil || len(ents) != 1 {
		t.Errorf("outside directory: %d entries, %v; want its one file only", len(ents), err)
	}
}

func TestSymlinksRefused(t *testing.T) {
	p := newPlant(t)
	tr := Tree{Base: p.base}
	through := filepath.Join(p.linkDir, "f") // a file named through the directory link
	for _, c := range []struct {
		name string
		op   func() error
		want error
	}{
		{"open a link", func() error { _, err := tr.Open(p.linkFile); return err }, ErrSymlink},
		{"open through a link", func() error { _, err := tr.Open(through); return err }, ErrSymlink},
		{"open for writing a link", func() error { _, err := tr.OpenWrite(p.linkFile); return err }, ErrSymlink},
		{"open for writing through a link", func() error { _, err := tr.OpenWrite(through); return err }, ErrSymlink},
		{"create over a link", func() error { _, err := tr.Create(p.linkFile, 0o644); return err }, fs.ErrExist},
		{"create through a link", func() error { _, err := tr.Create(filepath.Join(p.linkDir, "new"), 0o644); return err }, ErrSymlink},
		{"read a link", func() error { _, err := tr.ReadFile(p.linkFile, 1<<20); return err }, ErrSymlink},
		{"list a link", func() error { _, err := tr.ReadDir(p.linkDir); return err }, ErrSymlink},
		{"mkdir through a link", func() error { return tr.Mkdir(filepath.Join(p.linkDir, "d"), 0o755) }, ErrSymlink},
		{"mkdir owned through a link", func() error { return tr.MkdirOwned(filepath.Join(p.linkDir, "d"), 0o755) }, ErrSymlink},
		{"remove through a link", func() error { return tr.Remove(through) }, ErrSymlink},
		{"remove all through a link", func() error { return tr.RemoveAll(through) }, ErrSymlink},
		{"rename from through a link", func() error { return tr.Rename(through, filepath.Join(p.job, "x")) }, ErrSymlink},
		{"rename to through a link", func() error { return tr.Rename(p.file, filepath.Join(p.linkDir, "f")) }, ErrSymlink},
		{"link a link", func() error { return tr.Link(p.linkFile, filepath.Join(p.job, "spare")) }, ErrSymlink},
		{"link through a link", func() error { return tr.Link(through, filepath.Join(p.job, "spare")) }, ErrSymlink},
		{"link into a linked directory", func() error { return tr.Link(p.file, filepath.Join(p.linkDir, "spare")) }, ErrSymlink},
		{"chmod a link", func() error { return tr.Chmod(p.linkFile, 0o666) }, ErrSymlink},
		{"chmod through a link", func() error { return tr.Chmod(through, 0o666) }, ErrSymlink},
		{"sync a linked directory", func() error { return tr.SyncDir(p.linkDir) }, ErrSymlink},
		{"lstat through a link", func() error { _, err := tr.Lstat(through); return err }, ErrSymlink},
		{"open a FIFO", func() error { _, err := tr.Open(p.fifo); return err }, ErrNotRegular},
		{"sync a FIFO as a directory", func() error { return tr.SyncDir(p.fifo) }, syscall.ENOTDIR},
		{"write over a hard link", func() error { _, err := tr.OpenWrite(p.hard); return err }, ErrLinked},
		{"chmod a hard link", func() error { return tr.Chmod(p.hard, 0o666) }, ErrLinked},
		{"chmod a FIFO", func() error { return tr.Chmod(p.fifo, 0o666) }, ErrNotRegular},
		{"write over a link", func() error { return tr.WriteFile(p.linkFile, []byte("x"), 0o644) }, nil},
		{"open outside", func() error { _, err := tr.Open(p.outFile); return err }, ErrOutside},
		{"open above by ..", func() error { _, err := tr.Open(filepath.Join(p.base, "..", "secret")); return err }, ErrOutside},
		{"remove the top", func() error { return tr.RemoveAll(p.base) }, ErrOutside},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.op()
			if !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
			var pe *fs.PathError
			if err != nil && !errors.As(err, &pe) {
				t.Errorf("error %v is not a *fs.PathError", err)
			}
			p.untouched(t)
		})
	}
}

func TestRemoveAllRemovesLinksNotTargets(t *testing.T) {
	p := newPlant(t)
	tr := Tree{Base: p.base}
	if err := tr.Remove(p.linkFile); err != nil {
		t.Errorf("Remove of a link: %v", err)
	}
	if err := tr.RemoveAll(p.linkDir); err != nil {
		t.Errorf("RemoveAll of a link to a directory: %v", err)
	}
	p.untouched(t)
	if err := os.Symlink(p.outDir, p.linkDir); err != nil {
		t.Fatal(err)
	}
	if err := tr.RemoveAll(p.job); err != nil {
		t.Fatalf("RemoveAll of the job: %v", err)
	}
	if _, err := os.Lstat(p.job); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the job's directory is still there: %v", err)
	}
	p.untouched(t)
	if err := tr.RemoveAll(p.job); err != nil {
		t.Errorf("RemoveAll of what is gone: %v, want nil", err)
	}
}

func TestFilesWorkAsTheOsPackage(t *testing.T) {
	p := newPlant(t)
	tr := Tree{Base: p.base}
	f, err := tr.Create(filepath.Join(p.job, "sub", "new.tmp"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	f.Close()
	if err := tr.Rename(filepath.Join(p.job, "sub", "new.tmp"), filepath.Join(p.job, "new")); err != nil {
		t.Fatal(err)
	}
	if b, err := tr.ReadFile(filepath.Join(p.job, "new"), 3); err != nil || string(b) != "new" {
		t.Errorf("ReadFile = %q, %v; want \"new\"", b, err)
	}
	if _, err := tr.ReadFile(filepath.Join(p.job, "new"), 2); err == nil {
		t.Errorf("ReadFile over its limit: no error")
	}
	if f, err := tr.OpenWrite(filepath.Join(p.job, "new")); err != nil {
		t.Errorf("OpenWrite of a file of one link: %v", err)
	} else {
		f.Close()
	}
	ents, err := tr.ReadDir(p.job)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if e.Name() == "lf" && e.Type() != fs.ModeSymlink {
			t.Errorf("lf listed as %v, want a symbolic link", e.Type())
		}
	}
	if got, want := filepath.Join(names...), filepath.Join("fifo", "file", "hard", "ld", "lf", "new", "sub"); got != want {
		t.Errorf("ReadDir = %v, want %v", got, want)
	}
	if fi, err := tr.Lstat(p.linkFile); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat of a link: %v, %v; want the link described", fi, err)
	}
	if err := tr.Link(filepath.Join(p.job, "new"), filepath.Join(p.job, "spare")); err != nil {
		t.Errorf("Link: %v", err)
	}
	if err := tr.Mkdir(filepath.Join(p.job, "d"), 0o700); err != nil {
		t.Errorf("Mkdir: %v", err)
	}
	if err := tr.Mkdir(filepath.Join(p.job, "d"), 0o700); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir again: %v, want ErrExist", err)
	}
	if err := tr.Remove(filepath.Join(p.job, "d")); err != nil {
		t.Errorf("Remove of an empty directory: %v", err)
	}
	if err := tr.Remove(filepath.Join(p.job, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of nothing: %v, want ErrNotExist", err)
	}
	if err := tr.SyncDir(p.base); err != nil {
		t.Errorf("SyncDir of the top: %v", err)
	}
	p.untouched(t)
}

// TestGive: as root, everything the agent made in the tree goes to the user;
// what a link names, a file with a second name and what the user made stay.
func TestGive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	const uid, gid = 54321, 54322
	p := newPlant(t)
	theirs := filepath.Join(p.job, "theirs")
	if err := os.WriteFile(theirs, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := (Tree{Base: p.base}).Give(p.job, uid, gid); err != nil {
		t.Fatalf("Give: %v", err)
	}
	owner := func(path string) (uint32, uint32) {
		st, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		s := st.Sys().(*syscall.Stat_t)
		return s.Uid, s.Gid
	}
	for _, c := range []struct {
		path     string
		uid, gid uint32
	}{
		{p.job, uid, gid}, {filepath.Join(p.job, "sub"), uid, gid}, {p.subfile, uid, gid},
		{p.file, 0, 0}, {p.hard, 0, 0}, // one file of two names: not the agent's to give
		{theirs, 4242, 4242}, {p.linkFile, 0, 0}, {p.linkDir, 0, 0},
	} {
		if u, g := owner(c.path); u != c.uid || g != c.gid {
			t.Errorf("%s: owned by %d:%d, want %d:%d", c.path, u, g, c.uid, c.gid)
		}
	}
	p.untouched(t)
	if err := (Tree{Base: p.base}).Give(p.linkDir, uid, gid); err != nil {
		t.Errorf("Give of a link: %v, want nothing done", err)
	}
	p.untouched(t)
}

// TestMkdirOwned: a directory made in a user's directory is the user's.
func TestMkdirOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	p := newPlant(t)
	if err := os.Chown(p.job, 54321, 54322); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(p.job, "e1")
	if err := (Tree{Base: p.base}).MkdirOwned(d, 0o755); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(d)
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 54321 || s.Gid != 54322 {
		t.Errorf("%s owned by %d:%d, want the job directory's 54321:54322", d, s.Uid, s.Gid)
	}
}

// TestLstatAsTheOsPackage: an entry described by fstatat reads as os.Lstat
// describes it, whatever it is, and is the same file by SameFile.
func TestLstatAsTheOsPackage(t *testing.T) {
	p := newPlant(t)
	tr := Tree{Base: p.base}
	d, err := tr.OpenDir(p.job)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, path := range []string{p.file, p.linkFile, p.linkDir, p.fifo, filepath.Join(p.job, "sub")} {
		want, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		viaTree, err := tr.Lstat(path)
		if err != nil {
			t.Fatalf("Lstat(%s): %v", path, err)
		}
		viaDir, err := d.Lstat(filepath.Base(path))
		if err != nil {
			t.Fatalf("Dir.Lstat(%s): %v", path, err)
		}
		for _, got := range []fs.FileInfo{viaTree, viaDir} {
			if got.Name() != want.Name() || got.Mode() != want.Mode() || got.Size() != want.Size() ||
				!got.ModTime().Equal(want.ModTime()) || got.IsDir() != want.IsDir() {
				t.Errorf("%s: %s %v %d %v, want %s %v %d %v", path, got.Name(), got.Mode(), got.Size(), got.ModTime(),
					want.Name(), want.Mode(), want.Size(), want.ModTime())
			}
			if !SameFile(got, want) || *got.Sys().(*syscall.Stat_t) != *want.Sys().(*syscall.Stat_t) {
				t.Errorf("%s: Sys %+v, want %+v", path, got.Sys(), want.Sys())
			}
		}
	}
	if SameFile(must(tr.Lstat(p.file)), must(tr.Lstat(p.subfile))) {
		t.Errorf("two files are the same by SameFile")
	}
	ents, err := d.ReadDir()
	if err != nil || len(ents) != 6 {
		t.Errorf("Dir.ReadDir = %d entries, %v; want 6", len(ents), err)
	}
	if again, _ := d.ReadDir(); len(again) != len(ents) {
		t.Errorf("a second Dir.ReadDir lists %d entries, want %d", len(again), len(ents))
	}
	if _, err := d.Sub("ld"); !errors.Is(err, ErrSymlink) {
		t.Errorf("Dir.Sub of a link: %v, want ErrSymlink", err)
	}
	if _, err := d.Open("fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Dir.Open of a FIFO: %v, want ErrNotRegular", err)
	}
}

func must(fi fs.FileInfo, err error) fs.FileInfo {
	if err != nil {
		panic(err)
	}
	return fi
}
