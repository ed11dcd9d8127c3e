// Package files keeps a node's content-addressed cache of job files (programs and
// inputs) and places them into job directories, so no shared file system is needed.
package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors of the cache.
var (
	ErrHashMismatch = errors.New("files: content does not match its sha256")
	ErrNotCached    = errors.New("files: not in the cache")
	ErrBadStage     = errors.New("files: bad stage spec")
)

// Cache is a directory of files named by the hex SHA-256 of their content. It is safe
// for concurrent use by several goroutines and processes: files appear by rename only.
type Cache struct{ Dir string }

// Path returns where the file with hash sum lives.
func (c Cache) Path(sum string) string { return filepath.Join(c.Dir, sum) }

// Has reports whether sum is cached.
func (c Cache) Has(sum string) bool {
	_, err := os.Stat(c.Path(sum))
	return err == nil
}

// Use reports whether sum is cached and, if so, marks it used now (its
// modification time): retention keeps a file no job names yet for a while
// after its last use, and a submission that finds it cached names it in the
// job store only a moment later.
func (c Cache) Use(sum string) bool {
	now := time.Now()
	return os.Chtimes(c.Path(sum), now, now) == nil
}

// Entry is one cached file.
type Entry struct {
	Sum  string
	Size int64
	Used time.Time // last stored or found by [Cache.Use]
}

// List returns the cached files, by hash. Files being written (temporary
// names) are not listed.
func (c Cache) List() ([]Entry, error) {
	ents, err := os.ReadDir(c.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range ents {
		if !e.Type().IsRegular() || !isSum(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, Entry{Sum: e.Name(), Size: fi.Size(), Used: fi.ModTime()})
	}
	return out, nil
}

// Remove deletes the cached file sum; one that is not there is not an error.
// Copies already placed into job directories are not affected.
func (c Cache) Remove(sum string) error {
	if !isSum(sum) {
		return fmt.Errorf("files: remove %q: not a sha256", sum)
	}
	if err := os.Remove(c.Path(sum)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// isSum reports whether name is a hex SHA-256, the name of a cached file.
func isSum(name string) bool {
	if len(name) != 64 {
		return false
	}
	for _, r := range name {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// Put stores r's content under sum, checking that it hashes to sum; nothing is stored
// when it does not. An existing copy is kept.
func (c Cache) Put(sum string, r io.Reader) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, ".put-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: got %s, want %s", ErrHashMismatch, got, sum)
	}
	if err := os.Chmod(tmp.Name(), 0o444); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), c.Path(sum))
}

// PutFile caches the file at path and returns its hash.
func (c Cache) PutFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if c.Has(sum) {
		return sum, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return sum, c.Put(sum, f)
}

// Stage is one file to place into a job directory: name=sha256:mode (mode in octal).
type Stage struct {
	Name string
	Sum  string
	Mode os.FileMode
	// Arch, when set, is the instruction set the file is built for: a rank
	// of another set leaves it out (a world of several sets names each
	// set's build of the program).
	Arch string
}

// String is NAME=SHA256:MODE, and :ARCH after it when Arch is set.
func (s Stage) String() string {
	if s.Arch != "" {
		return fmt.Sprintf("%s=%s:%o:%s", s.Name, s.Sum, s.Mode, s.Arch)
	}
	return fmt.Sprintf("%s=%s:%o", s.Name, s.Sum, s.Mode)
}

// For reports whether a node of instruction set arch places the file.
func (s Stage) For(arch string) bool { return s.Arch == "" || s.Arch == arch }

// ParseStage parses the form Stage.String writes.
func ParseStage(v string) (Stage, error) {
	name, rest, ok := strings.Cut(v, "=")
	sum, mode, ok2 := strings.Cut(rest, ":")
	mode, arch, _ := strings.Cut(mode, ":")
	m, err := strconv.ParseUint(mode, 8, 32)
	if !ok || !ok2 || err != nil || name == "" || filepath.IsAbs(name) || filepath.Clean(name) != name || strings.HasPrefix(name, "..") || len(sum) != 64 ||
		strings.Trim(arch, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return Stage{}, fmt.Errorf("%w: %q: want NAME=SHA256:MODE[:ARCH]", ErrBadStage, v)
	}
	return Stage{Name: name, Sum: sum, Mode: os.FileMode(m), Arch: arch}, nil
}

// Place copies the cached file into dir under s.Name unless an identical one is there.
// Several ranks on one node may place the same file at once: each writes its own
// temporary copy and renames it, so readers only ever see a whole file.
//
// A file already in place is known identical by its stamp in the directory
// stamps (see [stamp]) while the stamp still describes it, else by hashing it
// (and stamping it then); "" keeps no stamps, and every call hashes. Without
// stamps, every rank of every relaunch hashed every staged file again: about
// 0.8 s of CPU per rank for a 1 GB input.
func (c Cache) Place(dir, stamps string, s Stage) error {
	dst := filepath.Join(dir, s.Name)
	now := clock()
	if st, err := os.Stat(dst); err == nil && st.Mode().Perm() == s.Mode.Perm() {
		rec, ok := stampOf(s.Sum, st)
		if ok && stamps != "" && readStamp(stamps, s.Name) == rec.String() {
			return nil
		}
		if hashMatches(dst, s.Sum) {
			if ok && rec.ctime < now.Add(-clockTick).UnixNano() {
				writeStamp(stamps, s.Name, rec)
			}
			return nil
		}
	}
	src, err := os.Open(c.Path(s.Sum))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s (%s)", ErrNotCached, s.Name, s.Sum)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".stage-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(s.Mode.Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// A stamp records a placed file as it was when hashing found it identical to
// its stage: "SUM SIZE INODE CTIME MTIME" (times in nanoseconds), in a file
// named by the stage's name with "/" as "%". The file is still identical while
// its inode, size and both times are the stamp's: any write, truncation, chmod
// or utimes sets its ctime to the time then, which no program can choose.
//
// Unless that time could equal the stamped one: file times come from a clock
// that advances in ticks, so a write in the tick of the stat the stamp was
// made from would keep its ctime. A file is therefore stamped only when its
// ctime is older than that stat by more than a tick (git's "racily clean"
// rule), and a file just copied into place is not stamped at all: the next
// Place hashes it once and stamps it, and the ones after it hash nothing.
type stamp struct {
	sum          string
	size, inode  uint64
	ctime, mtime int64
}

// clockTick bounds the tick of the clock file times are taken from (the
// kernel's coarse clock: 1 to 10 ms).
const clockTick = 20 * time.Millisecond

func stampOf(sum string, st os.FileInfo) (stamp, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}, false
	}
	return stamp{sum: sum, size: uint64(st.Size()), inode: sys.Ino,
		ctime: sys.Ctim.Sec*1e9 + sys.Ctim.Nsec, mtime: sys.Mtim.Sec*1e9 + sys.Mtim.Nsec}, true
}

func (s stamp) String() string {
	return fmt.Sprintf("%s %d %d %d %d\n", s.sum, s.size, s.inode, s.ctime, s.mtime)
}

func stampPath(stamps, name string) string {
	return filepath.Join(stamps, strings.ReplaceAll(name, "/", "%"))
}

// readStamp returns the stamp of the stage named name, "" when there is none.
func readStamp(stamps, name string) string {
	b, _ := os.ReadFile(stampPath(stamps, name))
	return string(b)
}

// writeStamp records rec for the stage named name, whole or not at all (ranks
// on one node may write it at once). A stamp that cannot be written costs a
// hash at the next Place, nothing else.
func writeStamp(stamps, name string, rec stamp) {
	if stamps == "" || os.MkdirAll(stamps, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(stamps, ".stamp-*")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(rec.String())
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), stampPath(stamps, name)) != nil {
		os.Remove(tmp.Name())
	}
}

// hashMatches and clock are sameContent and time.Now; tests count the hashes
// and set the clock.
var (
	hashMatches = sameContent
	clock       = time.Now
)

func sameContent(path, sum string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == sum
}
