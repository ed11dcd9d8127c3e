package userdir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is a directory of a tree held open, for several operations on its
// entries without walking to it again each time: the store's rescan of a
// job's directories several times a second. The entries are named by their
// names in it; none is followed if it is a link. A Dir must be closed, and is
// not safe for concurrent use.
type Dir struct {
	f    *os.File // O_RDONLY|O_DIRECTORY, named by its descriptor (see openDir)
	t    Tree
	path string
}

// OpenDir opens the directory at path (Base itself included).
func (t Tree) OpenDir(path string) (*Dir, error) {
	f, err := t.openDir("open", path, "", unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	return &Dir{f: f, t: t, path: path}, nil
}

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Path is the directory's path, as it was opened.
func (d *Dir) Path() string { return d.path }

// fd is the directory's descriptor, for *at calls while d is open.
func (d *Dir) fd() int { return int(d.f.Fd()) }

// ReadDir lists the directory as [Tree.ReadDir] does.
func (d *Dir) ReadDir() ([]fs.DirEntry, error) {
	if _, err := d.f.Seek(0, 0); err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: d.path, Err: err}
	}
	ents, err := d.f.ReadDir(-1)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: d.path, Err: err}
	}
	for i, e := range ents {
		ents[i] = dirEntry{DirEntry: e, t: d.t, path: filepath.Join(d.path, e.Name())}
	}
	sortEntries(ents)
	return ents, nil
}

// Lstat describes the entry name as [Tree.Lstat] does.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	fi, err := statAt(d.fd(), name)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: filepath.Join(d.path, name), Err: err}
	}
	return fi, nil
}

// Open opens the regular file name for reading as [Tree.Open] does.
func (d *Dir) Open(name string) (*os.File, error) {
	path := filepath.Join(d.path, name)
	f, err := openAt(d.fd(), name, path, unix.O_RDONLY, 0, false)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}

// Sub opens the directory name in d.
func (d *Dir) Sub(name string) (*Dir, error) {
	path := filepath.Join(d.path, name)
	fd, err := openDirAt(d.fd(), name, unix.O_RDONLY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), fmt.Sprintf("/proc/self/fd/%d", fd)), t: d.t, path: path}, nil
}

// statAt describes name in dir as it is, a link as a link: one system call,
// where opening the entry to stat it would take three.
func statAt(dir int, name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return &fileInfo{name: filepath.Base(name), st: syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid,
		Rdev: st.Rdev, Size: st.Size, Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec{Sec: st.Atim.Sec, Nsec: st.Atim.Nsec},
		Mtim: syscall.Timespec{Sec: st.Mtim.Sec, Nsec: st.Mtim.Nsec},
		Ctim: syscall.Timespec{Sec: st.Ctim.Sec, Nsec: st.Ctim.Nsec},
	}}, nil
}

// fileInfo is an entry as fstatat describes it; Sys is its *syscall.Stat_t,
// as the os package's FileInfo has it.
type fileInfo struct {
	name string
	st   syscall.Stat_t
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *fileInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi *fileInfo) Sys() any           { return &fi.st }

// Mode is the entry's type and permissions in the os package's terms.
func (fi *fileInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if fi.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if fi.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if fi.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// SameFile reports whether a and b describe one file, as os.SameFile does,
// for descriptions of this package's as well as the os package's.
func SameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
