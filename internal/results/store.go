// Package results keeps a node's copies of task farm results: each task's
// standard output, stored as DIR/JOB/TASK: a header line
// "shoal-result 1 SHA256 SIZE" and the output. A result appears by rename
// only, after it was written in full, checked against its hash and synced, so
// a reader never sees part of one; it is checked again every time it is read.
package results

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"shoal/internal/userdir"
)

// MaxSize bounds one result, in bytes: a task whose output is larger fails.
const MaxSize = 64 << 20

// Errors of the store.
var (
	ErrNotFound = errors.New("results: no such result")
	// ErrCorrupt: a stored result no longer matches its hash.
	ErrCorrupt = errors.New("results: stored result does not match its sha256")
	// ErrMismatch: what was sent does not match the hash it was sent with.
	ErrMismatch = errors.New("results: content does not match its sha256")
	ErrTooLarge = fmt.Errorf("results: larger than %d MiB", MaxSize>>20)
)

// Store is a directory of results, one directory per job. It is safe for
// concurrent use. Dir is the agent's own; a job's directory in it belongs to the
// job's owner when it has one (its task runner stores results there as that
// user): every file in it is reached without following a link (userdir).
type Store struct {
	Dir string
	// NoSync writes results without waiting for the disk: a crash of the
	// machine may lose the newest or leave them corrupt, which a read detects.
	// For a copy that another node holds synced.
	NoSync bool
}

func (s Store) path(job string, task int) string {
	return filepath.Join(s.Dir, job, strconv.Itoa(task))
}

func (s Store) tree() userdir.Tree { return userdir.Tree{Base: s.Dir} }

// Put stores task's result, read from r, which must hash to sum (hex).
// A result stored before is replaced.
func (s Store) Put(job string, task int, sum string, r io.Reader) error {
	dir := filepath.Join(s.Dir, job)
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	if err := s.tree().Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	tmp, err := s.tree().CreateTemp(dir, ".put-*")
	if err != nil {
		return err
	}
	defer s.tree().Remove(tmp.Name())
	defer tmp.Close()
	// The header has a fixed width, so that it is written once the size is known.
	if _, err := tmp.Write(make([]byte, headerSize)); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, MaxSize+1))
	if err != nil {
		return err
	}
	if n > MaxSize {
		return ErrTooLarge
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: task %d of job %s: got %s, want %s", ErrMismatch, task, job, got, sum)
	}
	if _, err := tmp.WriteAt([]byte(header(sum, n)), 0); err != nil {
		return err
	}
	if !s.NoSync {
		if err := tmp.Sync(); err != nil {
			return err
		}
	}
	if err := s.tree().Rename(tmp.Name(), s.path(job, task)); err != nil {
		return err
	}
	if s.NoSync {
		return nil
	}
	return s.tree().SyncDir(dir)
}

// Open opens task's result after checking it against its hash, and returns
// its size and hash.
func (s Store) Open(job string, task int) (io.ReadCloser, int64, string, error) {
	f, err := s.tree().Open(s.path(job, task))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, "", fmt.Errorf("%w: task %d of job %s", ErrNotFound, task, job)
	}
	if err != nil {
		return nil, 0, "", err
	}
	fail := func(err error) (io.ReadCloser, int64, string, error) {
		f.Close()
		return nil, 0, "", err
	}
	hdr := make([]byte, headerSize)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return fail(fmt.Errorf("%w: task %d of job %s: no header", ErrCorrupt, task, job))
	}
	sum, size, ok := parseHeader(string(hdr))
	if !ok {
		return fail(fmt.Errorf("%w: task %d of job %s: bad header", ErrCorrupt, task, job))
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fail(err)
	}
	if n != size || hex.EncodeToString(h.Sum(nil)) != sum {
		return fail(fmt.Errorf("%w: task %d of job %s", ErrCorrupt, task, job))
	}
	if _, err := f.Seek(headerSize, io.SeekStart); err != nil {
		return fail(err)
	}
	return f, size, sum, nil
}

// headerSize is the length of a result's header line, padded with spaces.
const headerSize = 128

func header(sum string, size int64) string {
	line := fmt.Sprintf("shoal-result 1 %s %d", sum, size)
	return line + strings.Repeat(" ", headerSize-1-len(line)) + "\n"
}

func parseHeader(line string) (sum string, size int64, ok bool) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "shoal-result" || f[1] != "1" || len(f[2]) != 64 {
		return "", 0, false
	}
	size, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || size < 0 {
		return "", 0, false
	}
	return f[2], size, true
}

// List returns the tasks of job whose results the store holds, in order.
func (s Store) List(job string) ([]int, error) {
	ents, err := s.tree().ReadDir(filepath.Join(s.Dir, job))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil && t >= 0 && e.Name() == strconv.Itoa(t) {
			out = append(out, t)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Remove deletes every result of job.
func (s Store) Remove(job string) error { return s.tree().RemoveAll(filepath.Join(s.Dir, job)) }
