package files

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Errors of a [Quota]; a refusal is a [*QuotaError] that unwraps to one of them.
var (
	ErrOverQuota       = errors.New("files: over the quota")
	ErrLargerThanQuota = errors.New("files: larger than the quota")
)

// Quota bounds the bytes of files each user may have put into a [Cache]. A
// file counts for the user who uploaded it while it is in the cache, once
// however often they upload it; a file already cached when a user uploads it
// costs them nothing; a file retention removed counts no more.
//
// Who put which file there is recorded beside the cache, one empty file
// Dir/UID/SUM per file, so that the count survives the agent's restarts
// without a hook in retention: a count stats the user's files in the cache and
// drops the records of those no longer there. Dir is mode 0700: it says which
// user has which files, and a file's sum is all it takes to read it from the
// cache. The records are not synced: a crash may forget the last ones, whose
// files then cost their user nothing.
//
// A Quota is safe for concurrent use; one process at a time may use a Dir.
type Quota struct {
	Cache Cache
	Dir   string
	Bytes int64 // per user

	mu   sync.Mutex
	held map[int]int64 // uid → bytes taken by its uploads in progress
}

// QuotaError is an upload a [Quota] refused.
type QuotaError struct {
	UID   int
	Quota int64 // bytes per user
	Used  int64 // bytes the user has in the cache, uploads in progress included
	Size  int64 // of the file; -1: unknown, cut once it passed Quota - Used
}

func (e *QuotaError) Unwrap() error {
	if e.Size > e.Quota {
		return ErrLargerThanQuota
	}
	return ErrOverQuota
}

func (e *QuotaError) Error() string { return "files: " + e.Describe(fmt.Sprintf("uid %d", e.UID)) }

// Describe says what was refused, naming the user who.
func (e *QuotaError) Describe(who string) string {
	switch {
	case e.Size > e.Quota:
		return fmt.Sprintf("a file of %s is larger than the quota of %s of files per user", Bytes(e.Size), Bytes(e.Quota))
	case e.Size < 0:
		return fmt.Sprintf("%s has %s of files in this node's cache (uploads in progress included) and a quota of %s: the upload passed the %s left",
			who, Bytes(e.Used), Bytes(e.Quota), Bytes(e.Quota-e.Used))
	}
	return fmt.Sprintf("%s has %s of files in this node's cache (uploads in progress included) and a quota of %s: no room for a file of %s",
		who, Bytes(e.Used), Bytes(e.Quota), Bytes(e.Size))
}

// room decides an upload of size bytes (-1: unknown) by a user with used
// bytes in the cache and held more being uploaded, under quota: the bytes it
// may take, all that is left when its size is unknown, or why not.
func room(quota, used, held, size int64) (int64, error) {
	left := quota - used - held
	if size > quota || size > left || size < 0 && left <= 0 {
		return 0, &QuotaError{Quota: quota, Used: used + held, Size: size}
	}
	if size < 0 {
		return left, nil
	}
	return size, nil
}

// Used returns the bytes of the files uid put into the cache that are still
// there, and drops the records of the others.
func (q *Quota) Used(uid int) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.usedLocked(uid)
}

func (q *Quota) usedLocked(uid int) (int64, error) {
	dir := q.userDir(uid)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var used int64
	for _, e := range ents {
		if !isSum(e.Name()) {
			continue
		}
		st, err := os.Stat(q.Cache.Path(e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		if err != nil {
			return 0, err
		}
		used += st.Size()
	}
	return used, nil
}

func (q *Quota) userDir(uid int) string { return filepath.Join(q.Dir, strconv.Itoa(uid)) }

// Put stores a file uid uploads, of size bytes (-1: unknown), with store
// (which reads r to its end, checks it hashes to sum and stores it, as
// [Cache.Put] does), unless it would take the user's files over the quota: a
// refusal is a [*QuotaError], before any byte is read when size is known, or
// at the first byte past the room left (and store must then store nothing).
// A file already cached costs nothing: it is marked used ([Cache.Use]), and r
// is not read. An upload of unknown size holds all the room its user has left
// until it ends.
func (q *Quota) Put(uid int, sum string, size int64, r io.Reader, store func(io.Reader) error) error {
	if q.Cache.Use(sum) {
		return nil
	}
	u, err := q.take(uid, size)
	if err != nil {
		return err
	}
	err = store(&roomReader{r: r, u: u, left: u.room})
	if derr := u.done(sum, err == nil); err == nil && derr != nil {
		return fmt.Errorf("files: stored %s but could not record it as uid %d's: %w", sum, uid, derr)
	}
	return err
}

// upload is room a [Quota] gave one upload.
type upload struct {
	q    *Quota
	uid  int
	room int64
	used int64 // the user's bytes when the room was given, for a refusal
}

// take gives room to an upload by uid of size bytes (-1: unknown: all the
// room the user has left), or refuses it with a [*QuotaError].
func (q *Quota) take(uid int, size int64) (*upload, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	used, err := q.usedLocked(uid)
	if err != nil {
		return nil, fmt.Errorf("files: counting the files of uid %d: %w", uid, err)
	}
	n, err := room(q.Bytes, used, q.held[uid], size)
	if err != nil {
		err.(*QuotaError).UID = uid
		return nil, err
	}
	if q.held == nil {
		q.held = map[int]int64{}
	}
	u := &upload{q: q, uid: uid, room: n, used: used + q.held[uid]}
	q.held[uid] += n
	return u, nil
}

// roomReader is an upload's content cut at its room: a read past it fails
// with a [*QuotaError].
type roomReader struct {
	r    io.Reader
	u    *upload
	left int64
}

func (r *roomReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if r.left -= int64(n); r.left < 0 {
		return n, &QuotaError{UID: r.u.uid, Quota: r.u.q.Bytes, Used: r.u.used, Size: -1}
	}
	return n, err
}

// done gives the upload's room back and, when the file was stored as sum,
// records it as the user's.
func (u *upload) done(sum string, stored bool) error {
	q := u.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[u.uid] -= u.room; q.held[u.uid] <= 0 {
		delete(q.held, u.uid)
	}
	if !stored {
		return nil
	}
	if !isSum(sum) {
		return fmt.Errorf("files: record %q: not a sha256", sum)
	}
	dir := q.userDir(u.uid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, sum), nil, 0o600)
}

// ParseBytes reads a size as people write it: "10G", "10GiB", "512M", "4096";
// K, M, G and T are powers of 1024, with or without "iB".
func ParseBytes(s string) (int64, error) {
	num, shift := s, 0
	if i := strings.IndexAny(s, "KMGT"); i > 0 && (s[i+1:] == "" || s[i+1:] == "iB") {
		num, shift = s[:i], 10*(1+strings.IndexByte("KMGT", s[i]))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("files: size %q: want a number of bytes, or of K, M, G or T (powers of 1024)", s)
	}
	return n << shift, nil
}

// Bytes writes n bytes for people: "512 B", "1.5 KiB", "10 GiB".
func Bytes(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		if v /= 1024; v < 1024 && v > -1024 || u == "EiB" {
			unit = u
			break
		}
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + " " + unit
}
