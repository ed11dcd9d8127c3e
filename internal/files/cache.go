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
}

func (s Stage) String() string { return fmt.Sprintf("%s=%s:%o", s.Name, s.Sum, s.Mode) }

// ParseStage parses the form Stage.String writes.
func ParseStage(v string) (Stage, error) {
	name, rest, ok := strings.Cut(v, "=")
	sum, mode, ok2 := strings.Cut(rest, ":")
	m, err := strconv.ParseUint(mode, 8, 32)
	if !ok || !ok2 || err != nil || name == "" || filepath.IsAbs(name) || filepath.Clean(name) != name || strings.HasPrefix(name, "..") || len(sum) != 64 {
		return Stage{}, fmt.Errorf("%w: %q: want NAME=SHA256:MODE", ErrBadStage, v)
	}
	return Stage{Name: name, Sum: sum, Mode: os.FileMode(m)}, nil
}

// Place copies the cached file into dir under s.Name unless an identical one is there.
// Several ranks on one node may place the same file at once: each writes its own
// temporary copy and renames it, so readers only ever see a whole file.
func (c Cache) Place(dir string, s Stage) error {
	dst := filepath.Join(dir, s.Name)
	if st, err := os.Stat(dst); err == nil && st.Mode().Perm() == s.Mode.Perm() && sameContent(dst, s.Sum) {
		return nil
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
