package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Files in the data directory.
const (
	LockFile   = "agent.lock" // flock'ed by the running agent; holds its pid
	AddrFile   = "agent.addr" // the API address local clients connect to, one line
	SecretFile = "secret"     // the cluster secret, mode 0600
	// SocketFile is the agent's local socket, mode 0666: any local user may
	// connect, and the agent grants what the caller's user may do (docs/api.md).
	SocketFile = "agent.sock"
)

// RootDataDir is the data dir of an agent run by root, the default for root.
const RootDataDir = "/var/lib/shoal"

// DefaultDataDir returns $SHOAL_DATA_DIR if set, else /var/lib/shoal when
// running as root, else ~/.shoal.
func DefaultDataDir() string {
	if d := os.Getenv("SHOAL_DATA_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return RootDataDir
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".shoal")
	}
	return filepath.Join(os.TempDir(), "shoal-"+strconv.Itoa(os.Getuid()))
}

// LockedError says that another process holds a data directory.
type LockedError struct {
	Dir string
	PID int // 0 if unknown
}

func (e *LockedError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("data dir %s is in use by another shoal agent", e.Dir)
	}
	return fmt.Sprintf("data dir %s is in use by pid %d", e.Dir, e.PID)
}

func (e *LockedError) Unwrap() error { return ErrDataDirLocked }

// dirLock is an exclusive flock on dir/agent.lock, released when the process
// exits however it exits.
type dirLock struct{ f *os.File }

// lockDir creates dir (mode 0711) if needed and locks it, writing this
// process's pid into the lock file. Other users may pass through dir, to the
// agent's socket and to their jobs' directories, but neither list nor write
// it; what in it is not theirs has modes of its own (the secret 0600, job
// directories 0700). A dir of another user is refused.
func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// Another user's directory (made first where others may write, as /tmp)
	// would let that user see and steer everything the agent writes; one that
	// others may write, replace the directories the agent trusts in it.
	if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != os.Geteuid() {
		return nil, fmt.Errorf("data dir %s belongs to uid %d, not to the agent's user (uid %d)", dir, uid, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&0o033 != 0o011 {
		if err := os.Chmod(dir, perm&^0o022|0o011); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("data dir: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// jobParents are the directories of the data dir with an entry per job (or,
// files, per file of jobs). A local user passes through them to their own
// jobs' directories and to the cached files their ranks name by hash, but may
// not list them: a listing would name every job the node holds data of, other
// users' too (docs/security.md, "Users").
var jobParents = []string{JobsDir, CkptDir, CoordDir, ResultsDir, FilesDir}

// unlistJobParents makes each of jobParents in dir, mode 0711, and takes the
// read bits for group and others from one an earlier version made listable;
// it widens nothing. dir is the agent's, which only its user can write.
func unlistJobParents(dir string) error {
	for _, name := range jobParents {
		path := filepath.Join(dir, name)
		if err := os.Mkdir(path, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("data dir: %w", err)
		}
		st, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("data dir: %s is not a directory", path)
		}
		if perm := st.Mode().Perm(); perm&0o044 != 0 {
			if err := os.Chmod(path, perm&^0o044); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
		}
	}
	return nil
}

func (l *dirLock) release() {
	if l != nil && l.f != nil {
		l.f.Truncate(0)
		l.f.Close() // closing the descriptor drops the flock
		l.f = nil
	}
}

// writeFileAtomic writes data to path through a temporary file, fsync and
// rename, so readers see the old content or the new, never a part.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// localAddr returns an address a client on this node can connect to for a
// server listening on addr: a loopback address when it listens on every
// interface (IPv6 only if it was asked to listen on "::").
func localAddr(addr net.Addr, asked string) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || (tcp.IP != nil && !tcp.IP.IsUnspecified()) {
		return addr.String()
	}
	ip := net.IPv4(127, 0, 0, 1)
	if host, _, err := net.SplitHostPort(asked); err == nil {
		if a := net.ParseIP(host); a != nil && a.To4() == nil {
			ip = net.IPv6loopback
		}
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}

// FindLocal returns the API address and cluster secret of the agent running
// with data directory dir ("" means DefaultDataDir()). It fails with
// ErrNoAgent when no agent has published its address there.
func FindLocal(dir string) (addr string, secret []byte, err error) {
	if dir == "" {
		dir = DefaultDataDir()
	}
	b, err := os.ReadFile(filepath.Join(dir, AddrFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("%w: none is running with data dir %s (start one with 'shoal agent --init', or set SHOAL_DATA_DIR)", ErrNoAgent, dir)
	}
	if err != nil {
		return "", nil, fmt.Errorf("find local agent: %w", err)
	}
	addr = strings.TrimSpace(string(b))
	secret, err = ReadSecret(filepath.Join(dir, SecretFile))
	if err != nil {
		return "", nil, err
	}
	return addr, secret, nil
}
