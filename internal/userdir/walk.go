package userdir

import (
	"errors"
	"io/fs"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// maxDepth bounds how deep RemoveAll and Give go below their path: each level
// holds a descriptor open, and a user could nest directories without end to
// run the agent out of them. Nothing Shoal or libshoal writes is deeper than
// a few levels.
const maxDepth = 256

// errTooDeep is returned for a tree nested deeper than maxDepth.
var errTooDeep = errors.New("userdir: directories nested too deep")

// removeAllAt removes name in dir and everything below it.
func removeAllAt(dir int, name string) error { return removeAllDepth(dir, name, 0) }

func removeAllDepth(dir int, name string, depth int) error {
	// A file or a symbolic link goes with one unlink.
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || err == unix.ENOENT {
		return err
	}
	if depth >= maxDepth {
		return errTooDeep
	}
	for attempt := 0; ; attempt++ {
		fd, err := openDirAt(dir, name, unix.O_RDONLY)
		switch {
		case err == unix.ENOENT:
			return nil
		case err == ErrSymlink || err == unix.ENOTDIR:
			// Replaced by a link or a file since the unlink: unlink that.
			if err := unix.Unlinkat(dir, name, 0); err != nil && err != unix.ENOENT {
				return err
			}
			return nil
		case err != nil:
			return err
		}
		d := os.NewFile(uintptr(fd), name)
		names, rerr := d.Readdirnames(-1)
		var first error
		for _, n := range names {
			if err := removeAllDepth(fd, n, depth+1); err != nil && first == nil {
				first = err
			}
		}
		d.Close()
		err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil || err == unix.ENOENT:
			return nil
		case err == unix.ENOTEMPTY && first == nil && attempt < 8:
			continue // entries made meanwhile: list again
		case first != nil:
			return first
		case rerr != nil:
			return rerr
		}
		return err
	}
}

// usageAt adds to n the sizes of name in dir and of the regular files below
// it.
func usageAt(dir int, name string, depth int, n *int64) error {
	if depth > maxDepth {
		return errTooDeep
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT && depth > 0 {
			return nil // removed meanwhile
		}
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		*n += st.Size
		return nil
	case unix.S_IFDIR:
	default:
		return nil
	}
	fd, err := openDirAt(dir, name, unix.O_RDONLY)
	if err != nil {
		if depth > 0 {
			return nil // replaced meanwhile: what is there counts as nothing
		}
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	for _, sub := range names {
		if err := usageAt(fd, sub, depth+1, n); err != nil {
			return err
		}
	}
	return err
}

// giveAt gives name in dir, and what is below it, to uid and gid: see Give.
func giveAt(dir int, name string, uid, gid int) error { return giveDepth(dir, name, uid, gid, 0) }

func giveDepth(dir int, name string, uid, gid int, depth int) error {
	if depth > maxDepth {
		return errTooDeep
	}
	// One descriptor for the entry, whatever it is, used for every step: the
	// name may be swapped meanwhile, the inode checked cannot.
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT && depth > 0 {
		return nil // removed meanwhile
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	kind := st.Mode & unix.S_IFMT
	mine := int(st.Uid) == os.Geteuid()
	switch {
	case kind == unix.S_IFDIR:
	case kind == unix.S_IFREG && st.Nlink == 1:
	default:
		return nil // links, other files, and files with other names stay as they are
	}
	if mine && (int(st.Uid) != uid || int(st.Gid) != gid) {
		if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return err
		}
	}
	if kind != unix.S_IFDIR {
		return nil
	}
	list, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(list), name)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := giveDepth(list, n, uid, gid, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// dirEntry is an entry of a listing whose Info is looked up through the tree,
// not by the path the os package would build.
type dirEntry struct {
	fs.DirEntry
	t    Tree
	path string
}

func (e dirEntry) Info() (fs.FileInfo, error) { return e.t.Lstat(e.path) }

func sortEntries(ents []fs.DirEntry) {
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
}
