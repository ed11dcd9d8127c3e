// Package userdir does an agent's file work in directory trees that another
// user can change: a job's directories on a node belong to the job's owner,
// whose processes may replace any entry in them at any moment, with a
// symbolic link to a file of root's, a hard link, a FIFO, or another
// directory. The agent, which runs as root, must never be turned by such an
// entry into writing, chowning, removing or reading a file that is not the
// job's.
//
// A [Tree] names the trusted top of such trees (the agent's DATA/ckpt, say:
// it and every directory above it are writable by the agent's user only).
// Every operation resolves its path below that top one component at a time,
// each directory opened relative to the one before with O_NOFOLLOW, and acts
// on the last component through its parent's descriptor (openat, mkdirat,
// unlinkat, renameat, linkat with no flag to follow), as systemd's chase()
// does with CHASE_NO_SYMLINKS: a symbolic link anywhere below the top is
// refused ([ErrSymlink]), never followed, and what a user swaps in between two
// operations is at worst another entry of the same user's tree. Files are
// opened without blocking and used only if they are regular ([ErrNotRegular]:
// a FIFO would hang a reader); a file the agent writes over, or chowns, must
// have one link ([ErrLinked]: a hard link to a file elsewhere is not the
// job's). The walk uses plain openat rather than openat2(RESOLVE_NO_SYMLINKS),
// which kernels before 5.6 and some seccomp filters (Android's) lack.
//
// Paths are full paths, as the callers build them; a path not lexically below
// the top is refused ([ErrOutside]). Errors are *fs.PathError wrapping the
// system's errno or one of the sentinels, so errors.Is(err, fs.ErrNotExist)
// and the like work as for the os package.
package userdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Errors of the package.
var (
	// ErrSymlink: an entry below the tree's top is a symbolic link.
	ErrSymlink = errors.New("userdir: a symbolic link where a file or directory was expected")
	// ErrNotRegular: a file to read or write is not a regular file.
	ErrNotRegular = errors.New("userdir: not a regular file")
	// ErrLinked: a file to write over or chown has other hard links.
	ErrLinked = errors.New("userdir: the file has other hard links")
	// ErrOutside: a path is not below the tree's top.
	ErrOutside = errors.New("userdir: path outside the tree")
)

// Tree is the directory tree below Base. Base itself, and the directories
// above it, are trusted: they are resolved as any path is (an administrator
// may link /var/lib/shoal elsewhere). Everything below Base is not. A Tree is
// a value; its methods are safe for concurrent use.
type Tree struct {
	Base string
}

// walk opens the parent directory of path's last component, resolving each
// component below Base with O_NOFOLLOW, and returns its descriptor (O_PATH,
// to be closed by the caller) and that last component. A path equal to Base
// is refused: its last component is not below the top.
func (t Tree) walk(op, path string) (int, string, error) {
	comps, err := t.split(op, path)
	if err != nil {
		return -1, "", err
	}
	fd, err := unix.Open(t.Base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", &fs.PathError{Op: op, Path: path, Err: err}
	}
	for _, c := range comps[:len(comps)-1] {
		next, err := openDirAt(fd, c, unix.O_PATH)
		unix.Close(fd)
		if err != nil {
			return -1, "", &fs.PathError{Op: op, Path: path, Err: err}
		}
		fd = next
	}
	return fd, comps[len(comps)-1], nil
}

// split returns path's components below Base, at least one.
func (t Tree) split(op, path string) ([]string, error) {
	rel, err := filepath.Rel(t.Base, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return nil, &fs.PathError{Op: op, Path: path, Err: ErrOutside}
	}
	return strings.Split(rel, "/"), nil
}

// openDirAt opens the directory name in dir without following a symbolic
// link, with extra flags (O_PATH, or O_RDONLY for a listing).
func openDirAt(dir int, name string, flags int) (int, error) {
	fd, err := unix.Openat(dir, name, flags|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		return fd, nil
	}
	if (err == unix.ENOTDIR || err == unix.ELOOP) && isSymlinkAt(dir, name) {
		return -1, ErrSymlink
	}
	return -1, err
}

func isSymlinkAt(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// openAt opens the file name in dir with flags, never following a symbolic
// link and never blocking on a FIFO, and checks it is a regular file; with
// oneLink, that it has no other hard link. The file is called path.
func openAt(dir int, name, path string, flags int, perm uint32, oneLink bool) (*os.File, error) {
	fd, err := unix.Openat(dir, name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, perm)
	if err == unix.ELOOP {
		if isSymlinkAt(dir, name) {
			return nil, ErrSymlink
		}
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	switch err := unix.Fstat(fd, &st); {
	case err != nil:
		unix.Close(fd)
		return nil, err
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		unix.Close(fd)
		return nil, ErrNotRegular
	case oneLink && st.Nlink != 1:
		unix.Close(fd)
		return nil, ErrLinked
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// at runs f on the parent of path and path's last component.
func (t Tree) at(op, path string, f func(dir int, name string) error) error {
	dir, name, err := t.walk(op, path)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := f(dir, name); err != nil {
		return &fs.PathError{Op: op, Path: path, Err: err}
	}
	return nil
}

// Open opens the regular file at path for reading.
func (t Tree) Open(path string) (*os.File, error) {
	var f *os.File
	err := t.at("open", path, func(dir int, name string) (err error) {
		f, err = openAt(dir, name, path, unix.O_RDONLY, 0, false)
		return err
	})
	return f, err
}

// OpenWrite opens the existing regular file at path for reading and writing;
// it must have no other hard link.
func (t Tree) OpenWrite(path string) (*os.File, error) {
	var f *os.File
	err := t.at("open", path, func(dir int, name string) (err error) {
		f, err = openAt(dir, name, path, unix.O_RDWR, 0, true)
		return err
	})
	return f, err
}

// Create creates the file at path, which must not exist (as anything, a
// symbolic link included), for reading and writing, with mode perm.
func (t Tree) Create(path string, perm fs.FileMode) (*os.File, error) {
	var f *os.File
	err := t.at("create", path, func(dir int, name string) (err error) {
		f, err = openAt(dir, name, path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, uint32(perm.Perm()), false)
		return err
	})
	return f, err
}

// CreateTemp creates a new file in the directory dir, named by pattern with
// its last "*" replaced by a random string (appended when there is none), as
// os.CreateTemp does, with mode 0600.
func (t Tree) CreateTemp(dir, pattern string) (*os.File, error) {
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		var rnd [6]byte
		rand.Read(rnd[:])
		f, err := t.Create(filepath.Join(dir, prefix+hex.EncodeToString(rnd[:])+suffix), 0o600)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

// WriteFile replaces the file at path with data, through a temporary file
// beside it renamed into place: a reader sees the old content or the new,
// never a part, and what was at path (a link included) is replaced, not
// written through. The new file has mode perm.
func (t Tree) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return t.WriteFileFor(path, data, perm, -1, -1)
}

// WriteFileFor is WriteFile for a file that belongs to uid and gid (-1: the
// agent's), given them before it takes its name.
func (t Tree) WriteFileFor(path string, data []byte, perm fs.FileMode, uid, gid int) error {
	f, err := t.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && (uid >= 0 || gid >= 0) {
		err = f.Chown(uid, gid)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = t.Rename(tmp, path)
	}
	if err != nil {
		t.Remove(tmp)
	}
	return err
}

// ReadFile reads the regular file at path whole; one larger than limit bytes
// is an error.
func (t Tree) ReadFile(path string, limit int64) ([]byte, error) {
	f, err := t.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("larger than %d bytes", limit)}
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		err = nil
	}
	return b[:n], err
}

// Lstat describes the entry at path itself: a symbolic link is described, not
// followed (and not refused). Sys() is a *syscall.Stat_t.
func (t Tree) Lstat(path string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := t.at("lstat", path, func(dir int, name string) (err error) {
		fi, err = statAt(dir, name)
		return err
	})
	return fi, err
}

// ReadDir lists the directory at path, sorted by name, as os.ReadDir does;
// entries are described as they are (a symbolic link as a link), and their
// Info is looked up as Lstat does.
func (t Tree) ReadDir(path string) ([]fs.DirEntry, error) {
	d, err := t.openDir("readdir", path, "", unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: path, Err: err}
	}
	for i, e := range ents {
		ents[i] = dirEntry{DirEntry: e, t: t, path: filepath.Join(path, e.Name())}
	}
	sortEntries(ents)
	return ents, nil
}

// openDir opens the directory at path (Base itself included) with flags, as
// a file called name.
func (t Tree) openDir(op, path, name string, flags int) (*os.File, error) {
	var fd int
	var err error
	if filepath.Clean(path) == filepath.Clean(t.Base) {
		fd, err = unix.Open(t.Base, flags|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			err = &fs.PathError{Op: op, Path: path, Err: err}
		}
	} else {
		err = t.at(op, path, func(dir int, last string) (err error) {
			fd, err = openDirAt(dir, last, flags)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	if name == "" {
		// Named by its descriptor: where the file system gives no entry
		// types, the os package looks each entry of a listing up under the
		// directory's name, which then resolves through the descriptor, not
		// through the path again.
		name = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// SyncDir fsyncs the directory at path (Base included), so that entries
// created, renamed or removed in it stay so after a crash.
func (t Tree) SyncDir(path string) error {
	d, err := t.openDir("sync", path, path, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Mkdir makes the directory path with mode perm (less the umask).
func (t Tree) Mkdir(path string, perm fs.FileMode) error {
	return t.at("mkdir", path, func(dir int, name string) error {
		return unix.Mkdirat(dir, name, uint32(perm.Perm()))
	})
}

// MkdirOwned makes the directory path with mode perm, owned as the directory
// it is made in: in a user's tree, a directory the agent makes is the user's.
// A directory that is there already is left as it is (fs.ErrExist).
func (t Tree) MkdirOwned(path string, perm fs.FileMode) error {
	return t.at("mkdir", path, func(dir int, name string) error {
		var parent unix.Stat_t
		if err := unix.Fstat(dir, &parent); err != nil {
			return err
		}
		if err := unix.Mkdirat(dir, name, uint32(perm.Perm())); err != nil {
			return err
		}
		if int(parent.Uid) == os.Geteuid() {
			return nil
		}
		fd, err := openDirAt(dir, name, unix.O_RDONLY)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchown(fd, int(parent.Uid), int(parent.Gid))
	})
}

// Remove removes the file, symbolic link or empty directory at path.
func (t Tree) Remove(path string) error {
	return t.at("remove", path, func(dir int, name string) error {
		err := unix.Unlinkat(dir, name, 0)
		if err == nil {
			return nil
		}
		// unlink of a directory fails (EISDIR), rmdir of a file fails with
		// ENOTDIR: whichever fails otherwise says what is wrong.
		derr := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		if derr == nil {
			return nil
		}
		if derr != unix.ENOTDIR {
			return derr
		}
		return err
	})
}

// RemoveAll removes path and everything below it, never following a symbolic
// link (a link is removed, not what it names). A path that does not exist is
// not an error.
func (t Tree) RemoveAll(path string) error {
	err := t.at("removeall", path, removeAllAt)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Rename renames oldpath to newpath, both below the top, replacing what
// newpath names if it is a file. Neither is followed if it is a link.
func (t Tree) Rename(oldpath, newpath string) error {
	return t.at("rename", oldpath, func(odir int, oname string) error {
		return t.at("rename", newpath, func(ndir int, nname string) error {
			return unix.Renameat(odir, oname, ndir, nname)
		})
	})
}

// Link makes newpath a hard link to the file at oldpath. A symbolic link at
// oldpath is refused, not linked.
func (t Tree) Link(oldpath, newpath string) error {
	return t.at("link", oldpath, func(odir int, oname string) error {
		if isSymlinkAt(odir, oname) {
			return ErrSymlink
		}
		return t.at("link", newpath, func(ndir int, nname string) error {
			return unix.Linkat(odir, oname, ndir, nname, 0)
		})
	})
}

// Chmod sets the mode of the directory or regular file at path.
func (t Tree) Chmod(path string, perm fs.FileMode) error {
	return t.at("chmod", path, func(dir int, name string) error {
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.ELOOP && isSymlinkAt(dir, name) {
			return ErrSymlink
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		switch kind := st.Mode & unix.S_IFMT; {
		case kind == unix.S_IFREG && st.Nlink != 1:
			return ErrLinked
		case kind != unix.S_IFDIR && kind != unix.S_IFREG:
			return ErrNotRegular
		}
		return unix.Fchmod(fd, uint32(perm.Perm()))
	})
}

// Usage returns the size in bytes of the regular files at and below path;
// links are not followed and count as nothing.
func (t Tree) Usage(path string) (int64, error) {
	var n int64
	err := t.at("usage", path, func(dir int, name string) error { return usageAt(dir, name, 0, &n) })
	return n, err
}

// Give gives path and everything below it that the agent's user owns to the
// user uid and group gid: the directories and regular files of one link that
// the agent made in a user's tree. Symbolic links, files with other hard
// links and whatever another user owns are left as they are; no link is
// followed. A path that does not exist is an error.
func (t Tree) Give(path string, uid, gid int) error {
	return t.at("chown", path, func(dir int, name string) error {
		return giveAt(dir, name, uid, gid)
	})
}

// Private makes the directory path, mode 0700, where nothing is, and checks
// that what is there is a directory, not a link, that belongs to the calling
// user and that no other user may enter: a directory of a name others can
// guess, in a directory every user may write (/tmp, /dev/shm), which another
// user could have made first to see or steer what is written in it. One of the
// user's own that others may enter is closed. The directory that holds path is
// trusted (a sticky /tmp lets nobody rename what
// is not theirs). The error names path, what is wrong and the way out.
func Private(path string) error {
	err := os.Mkdir(path, 0o700)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link, not this user's own directory: remove it", path)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: remove it", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d): another user made it; remove it", path, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		// The user's own, made less private by an earlier version: closed now.
		return os.Chmod(path, 0o700)
	}
	return nil
}
