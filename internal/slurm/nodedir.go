package slurm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Where an allocation keeps its files on a node.
//
// The node's temporary directory is usually /tmp, which every user may write: a name
// there that another user can predict, they can create first, and a directory there
// that this run did not make may be theirs. So every directory an allocation keeps
// files in is made by this run with a name of mkdtemp's that nobody chose beforehand
// (a name taken makes mkdir fail, and another is drawn), and checked once made: a
// directory, this user's, mode 0700. Files in it are created with O_EXCL|O_NOFOLLOW.
// The directory it is made in ([Base]), and every directory above that, must be
// changeable by root or this user alone: owned by one of them, and sticky where
// others may write (as /tmp), so that nobody else can rename or replace what is in it.

// DirError says why a directory cannot hold an allocation's files.
type DirError struct {
	Path    string
	Problem string // what is wrong with it: "owned by uid 1001, not by root or uid 1000"
}

func (e *DirError) Error() string { return fmt.Sprintf("%v %s: %s", ErrUnsafeDir, e.Path, e.Problem) }

func (e *DirError) Unwrap() error { return ErrUnsafeDir }

// Base is the directory an allocation's files go under on this node: SLURM_TMPDIR
// when the site sets one, else TMPDIR (os.TempDir), which Slurm's TmpFS and
// node-local /tmp make local to the node.
func Base(getenv func(string) string) string {
	if base := getenv("SLURM_TMPDIR"); base != "" {
		return base
	}
	return os.TempDir()
}

// NodeDir is what the agent of an allocation keeps on its node, all of it in Dir.
type NodeDir struct {
	// Dir is Base/shoal-slurm-JOBID-agent-RANDOM, mode 0700. The agent removes
	// it when it ends.
	Dir string
	// DataDir is Dir/data, the agent's data dir, which the agent makes.
	DataDir string
	// SecretFile is Dir/secret, mode 0600: the allocation's secret.
	SecretFile string
}

// agentPrefix is how the name of a [NodeDir] of job jobID starts.
func agentPrefix(jobID string) string { return DirName(jobID) + "-agent-" }

// MakeNodeDir makes the [NodeDir] of the agent of job jobID under base ([Base]) and
// writes secret into it. It first removes what an agent of an earlier run of the same
// job left on this node (a requeued job keeps its id): directories named as this
// job's NodeDirs that are this user's and mode 0700. Anything else under such a name
// (another user's directory, a symbolic link) it leaves alone and never uses. It
// fails with a [*DirError] when base, a directory above it, or the new directory is
// not as the package doc says.
func MakeNodeDir(base, jobID string, secret []byte) (NodeDir, error) {
	euid := os.Geteuid()
	base, err := checkBase(base, euid)
	if err != nil {
		return NodeDir{}, err
	}
	removeStale(base, agentPrefix(jobID), euid)
	dir, err := makePrivate(base, agentPrefix(jobID), euid)
	if err != nil {
		return NodeDir{}, err
	}
	nd := NodeDir{Dir: dir, DataDir: filepath.Join(dir, "data"), SecretFile: filepath.Join(dir, "secret")}
	if err := writeNew(nd.SecretFile, secret); err != nil {
		os.RemoveAll(dir)
		return NodeDir{}, err
	}
	return nd, nil
}

// PrivateDir makes a new directory under base, its name prefix and a random string,
// and checks base and the new directory as [MakeNodeDir] does. It returns the new
// directory's path, with base's symbolic links resolved.
func PrivateDir(base, prefix string) (string, error) {
	euid := os.Geteuid()
	base, err := checkBase(base, euid)
	if err != nil {
		return "", err
	}
	return makePrivate(base, prefix, euid)
}

// checkBase resolves base's symbolic links and checks that the directory it names
// and every directory above that can be changed by root or user euid alone
// ([baseProblem]). It returns the resolved path.
func checkBase(base string, euid int) (string, error) {
	abs, err := filepath.Abs(base)
	if err != nil {
		return "", fmt.Errorf("slurm: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("slurm: %w", err)
	}
	for p := resolved; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("slurm: %w", err)
		}
		if why := baseProblem(fi.Mode(), owner(fi), euid); why != "" {
			return "", &DirError{Path: p, Problem: why}
		}
		if p == filepath.Dir(p) {
			return resolved, nil
		}
	}
}

// makePrivate makes a new directory under base, which checkBase has checked, named
// prefix and a random string, mode 0700, and checks it through a descriptor opened
// without following a symbolic link.
func makePrivate(base, prefix string, euid int) (string, error) {
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", fmt.Errorf("slurm: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &DirError{Path: dir, Problem: openProblem(err)}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("slurm: %w", err)
	}
	if why := privateProblem(fi.Mode(), owner(fi), euid); why != "" {
		return "", &DirError{Path: dir, Problem: why}
	}
	return dir, nil
}

// writeNew creates the file path, which must not exist, mode 0600, and writes b into it.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("slurm: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	return nil
}

// removeStale removes the directories under base whose names start with prefix and
// that are user euid's, mode 0700 ([privateProblem]). Base has passed checkBase, so no
// one else can rename or replace such a directory between the check and the removal,
// and os.RemoveAll follows no symbolic link in it.
func removeStale(base, prefix string, euid int) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(base, e.Name())
		if fi, err := os.Lstat(p); err == nil && privateProblem(fi.Mode(), owner(fi), euid) == "" {
			os.RemoveAll(p)
		}
	}
}

// baseProblem says what is wrong with a directory an allocation's files are kept
// under, given its mode and owner, for a process of effective uid euid, or "" when
// only root and euid can change what is in it.
func baseProblem(mode fs.FileMode, uid, euid int) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case !mode.IsDir():
		return "not a directory"
	case uid != 0 && uid != euid:
		return fmt.Sprintf("owned by uid %d, not by root or uid %d", uid, euid)
	case mode.Perm()&0o022 != 0 && mode&fs.ModeSticky == 0:
		return fmt.Sprintf("writable by others (mode %04o) and not sticky", uint32(mode.Perm()))
	}
	return ""
}

// privateProblem says what is wrong with a directory an allocation keeps its files
// in, given its mode and owner, for a process of effective uid euid, or "" when it is
// a directory of euid's that no one else may enter.
func privateProblem(mode fs.FileMode, uid, euid int) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case !mode.IsDir():
		return "not a directory"
	case uid != euid:
		return fmt.Sprintf("owned by uid %d, not by uid %d", uid, euid)
	case mode.Perm()&0o077 != 0:
		return fmt.Sprintf("mode %04o, want 0700", uint32(mode.Perm()))
	}
	return ""
}

// openProblem says in words why opening a directory with O_NOFOLLOW failed.
func openProblem(err error) string {
	switch {
	case errors.Is(err, unix.ELOOP):
		return "a symbolic link"
	case errors.Is(err, unix.ENOTDIR):
		return "not a directory"
	}
	return err.Error()
}

// owner is the uid that owns the file fi describes.
func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
