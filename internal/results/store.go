// Package results keeps a node's copies of task farm results: each task's
// standard output, stored as DIR/JOB/TASK with its SHA-256 beside it in
// DIR/JOB/TASK.sha256. A result appears by rename only, after it was written
// in full, checked against its hash and synced, so a reader never sees part of
// one; it is checked again every time it is read.
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
// concurrent use.
type Store struct{ Dir string }

func (s Store) path(job string, task int) string {
	return filepath.Join(s.Dir, job, strconv.Itoa(task))
}

// Put stores task's result, read from r, which must hash to sum (hex).
// A result stored before is replaced.
func (s Store) Put(job string, task int, sum string, r io.Reader) error {
	dir := filepath.Join(s.Dir, job)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
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
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := writeFileSync(s.path(job, task)+".sha256", []byte(sum+"\n")); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path(job, task)); err != nil {
		return err
	}
	return syncDir(dir)
}

// Open opens task's result after checking it against its hash, and returns
// its size and hash.
func (s Store) Open(job string, task int) (io.ReadCloser, int64, string, error) {
	p := s.path(job, task)
	want, err := os.ReadFile(p + ".sha256")
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, "", fmt.Errorf("%w: task %d of job %s", ErrNotFound, task, job)
	}
	if err != nil {
		return nil, 0, "", err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, "", fmt.Errorf("%w: task %d of job %s", ErrNotFound, task, job)
	}
	if err != nil {
		return nil, 0, "", err
	}
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, "", err
	}
	sum := strings.TrimSpace(string(want))
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		f.Close()
		return nil, 0, "", fmt.Errorf("%w: task %d of job %s", ErrCorrupt, task, job)
	}
	return f, size, sum, nil
}

// List returns the tasks of job whose results the store holds, in order.
func (s Store) List(job string) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(s.Dir, job))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil && t >= 0 {
			out = append(out, t)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Remove deletes every result of job.
func (s Store) Remove(job string) error { return os.RemoveAll(filepath.Join(s.Dir, job)) }

func writeFileSync(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
