package shardstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"shoal/internal/errkind"
	"shoal/internal/shard"
)

// Storing a shard: written to a temporary file, verified as it is written,
// renamed into place, synced.

type pathLock struct {
	mu sync.Mutex
	n  int
}

// Put stores the shard read from r (size bytes, or negative when not known)
// as ref: it writes a temporary file, syncs it, verifies it (format, identity
// and size), renames it over any previous copy and syncs the directory. A
// shard that fails verification wraps errkind.BadRequest and the ckpt
// sentinel; an error reading r is returned as it is (the API's signed-body
// check wraps errkind.Unauthorized). Either way nothing is replaced.
func (s *Store) Put(ref shard.Ref, r io.Reader, size int64) (shard.Info, error) {
	info, err := s.put(ref, r, size)
	var vf *verifyFailure
	var rf *readFailure
	switch {
	case errors.As(err, &vf):
		return info, fmt.Errorf("%w: shard %s rejected, nothing stored: %w", errkind.BadRequest, ref, vf.err)
	case errors.As(err, &rf):
		if errors.Is(rf.err, errkind.Unauthorized) {
			return info, rf.err
		}
		return info, fmt.Errorf("%w: reading shard %s: %w", errkind.BadRequest, ref, rf.err)
	}
	return info, err
}

// verifyFailure is a shard that failed verification; err wraps a ckpt sentinel.
type verifyFailure struct{ err error }

func (v *verifyFailure) Error() string { return v.err.Error() }

func (v *verifyFailure) Unwrap() error { return v.err }

// readFailure is an error reading the shard's source.
type readFailure struct{ err error }

func (r *readFailure) Error() string { return r.err.Error() }

func (r *readFailure) Unwrap() error { return r.err }

func (s *Store) put(ref shard.Ref, r io.Reader, size int64) (shard.Info, error) {
	if err := checkRef(ref); err != nil {
		return shard.Info{}, err
	}
	// The shard is verified as it is written, from the bytes in memory, rather
	// than read back from the file afterwards.
	v := shard.NewVerifier(size)
	blocks := newBlockSums()
	// A connection's reader hands over one TLS record, 16 KiB, at a time:
	// the buffer is filled before each write, 64 times fewer of them.
	write := func(w io.Writer) error {
		buf := make([]byte, 1<<20)
		for end := false; !end; {
			n := 0
			for n < len(buf) && !end {
				k, err := r.Read(buf[n:])
				n += k
				switch {
				case err == io.EOF:
					end = true
				case err != nil:
					return &readFailure{err}
				}
			}
			v.Write(buf[:n])
			blocks.Write(buf[:n])
			if _, err := w.Write(buf[:n]); err != nil {
				return fmt.Errorf("writing shard %s: %w", ref, err)
			}
		}
		return nil
	}
	verify := func(path string, f *os.File) (entry, error) {
		fi, err := f.Stat()
		if err != nil {
			return entry{}, err
		}
		h, sum, err := v.Sum()
		if err != nil {
			err = &verifyFailure{err} // every error of Sum is a ckpt sentinel
		}
		return s.record(ref, path, fi, h, sum, blocks.Sums(), err)
	}
	e, err := s.commit(ref.Job, s.path(ref), s.jobDir(ref.Job).SparePath(ref.Rank), ref.Epoch, streamed(write), verify)
	return e.info, err
}

// streamed is commit's write for a file written as a stream by write: its
// length is what write wrote.
func streamed(write func(io.Writer) error) func(*os.File, bool) (int64, error) {
	return func(f *os.File, _ bool) (int64, error) {
		if err := write(f); err != nil {
			return 0, err
		}
		return f.Seek(0, io.SeekCurrent)
	}
}

// commit writes a file of the job's epoch (a shard, a parity row) so that no
// reader ever sees it half written or unverified: a temporary file beside
// final, filled by write, which returns the file's length, verified (a
// failure is a *verifyFailure), renamed over any earlier version, then synced
// with its directory; commit returns once both are. Writers of one path take
// turns. The temporary file is the spare, when one is given and there (a
// shard of the rank that RemoveBefore retired): written over (write is told
// it was reused) and cut to its new length, it keeps its pages.
//
// The sync comes after the rename because a restart's ranks wait for their
// staged shards to appear (SHOAL_STAGE_WAIT): on this machine's disk a
// 256 MB shard's sync was most of what staging it took, and the rank reads
// the verified file from memory meanwhile. A crash before the sync may leave
// the file torn under its final name; every reader verifies a shard before
// it trusts it (the store after each start of its agent, libshoal always),
// so that file counts as damaged, as any other would.
func (s *Store) commit(job, final, spare string, epoch uint64, write func(f *os.File, reused bool) (int64, error), verify func(string, *os.File) (entry, error)) (entry, error) {
	unlock := s.lock(final)
	defer unlock()
	if err := s.mkdirs(shard.Ref{Job: job, Epoch: epoch}); err != nil {
		return entry{}, err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := final + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	f, reused, err := s.openTemp(tmp, spare)
	if err != nil {
		return entry{}, err
	}
	committed := false
	defer func() {
		f.Close()
		if !committed {
			s.tree().Remove(tmp)
		}
	}()
	size, err := write(f, reused)
	if err != nil {
		return entry{}, err
	}
	if reused {
		if err := f.Truncate(size); err != nil {
			return entry{}, fmt.Errorf("writing %s: %w", final, err)
		}
	}
	e, err := verify(tmp, f)
	s.forget(job, tmp)
	if err != nil {
		return entry{}, err
	}
	if e.err != nil {
		return entry{}, &verifyFailure{e.err}
	}
	if err := s.tree().Rename(tmp, final); err != nil {
		return entry{}, err
	}
	committed = true
	// The renamed file keeps its inode and times: its verification holds.
	s.remember(job, final, e)
	if err := f.Sync(); err != nil {
		// Not known to be on the disk: not kept, as if never written.
		s.forget(job, final)
		s.tree().Remove(final)
		return entry{}, fmt.Errorf("writing %s: %w", final, err)
	}
	dir := filepath.Dir(final)
	if err := s.tree().SyncDir(dir); err != nil {
		return e, fmt.Errorf("syncing %s: %w", dir, err)
	}
	return e, nil
}

// openTemp creates the temporary file tmp: from spare when one is given and
// there (renamed, to be written over: a regular file of one link), else new.
// reused says which.
func (s *Store) openTemp(tmp, spare string) (f *os.File, reused bool, err error) {
	if spare != "" && s.tree().Rename(spare, tmp) == nil {
		if f, err := s.tree().OpenWrite(tmp); err == nil {
			return f, true, nil
		}
		s.tree().Remove(tmp)
	}
	f, err = s.tree().Create(tmp, 0o644)
	return f, false, err
}

// lock serializes the writers of one shard path and returns the unlock.
func (s *Store) lock(path string) func() {
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*pathLock{}
	}
	l := s.locks[path]
	if l == nil {
		l = &pathLock{}
		s.locks[path] = l
	}
	l.n++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.n--; l.n == 0 {
			delete(s.locks, path)
		}
		s.mu.Unlock()
	}
}

// mkdirs creates the store, job and epoch directories of ref, syncing the
// parent of each one it creates so that the new entries are durable. A job's
// directory is readable by its owner only (0700); an epoch directory made in the
// directory of a job with an owner (a user's job: its launch grant made the
// directory theirs) is given to that user, whose ranks write their own shards
// of the epoch there too.
func (s *Store) mkdirs(ref shard.Ref) error {
	if err := s.mkdirJob(ref.Job); err != nil {
		return err
	}
	jd := s.jobDir(ref.Job)
	// An epoch's mode: its job's directory guards it.
	err := s.tree().MkdirOwned(jd.EpochPath(ref.Epoch), 0o755)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.tree().SyncDir(jd.Path())
}

// mkdirJob creates the store's and the job's directories where they are not.
func (s *Store) mkdirJob(job string) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil { // the agent's own
		return err
	}
	err := s.tree().Mkdir(s.jobDir(job).Path(), 0o700)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.tree().SyncDir(s.Dir)
}
