// Package shardstore is one node's checkpoint store: the shards libshoal's ranks
// write into the node's ckpt directory (docs/shard-format.md, "Files on disk"),
// and those the agent receives from other nodes. It verifies every shard it lists,
// serves or stores, so a corrupt copy is reported and never passed on, and it
// gives the coordinator its durability primitives: index, fetch from another
// node, remove old epochs, request a checkpoint.
package shardstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/api"
	"shoal/internal/compress"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/traffic"
	"shoal/internal/userdir"
)

// Store is the checkpoint store rooted at Dir (an agent's <data>/ckpt). The zero
// value with Dir set is ready; a Store must not be copied after first use. Its
// methods are safe for concurrent use, also with libshoal's ranks writing into
// Dir. Errors wrap the api sentinels that choose their HTTP status
// (api.ErrBadRequest, api.ErrNotFound, api.ErrCorrupt, api.ErrBadGateway) and,
// for verification failures, ckpt's sentinels (ckpt.ErrChecksum, …).
type Store struct {
	Dir string
	// StallTimeout aborts a Fetch whose source sends nothing for this long (a
	// cut link otherwise blocks until TCP gives up, minutes later). Default:
	// DefaultStallTimeout.
	StallTimeout time.Duration
	// RescanInterval is how often WaitIndex looks for a change of the index it
	// waits on. Default: DefaultRescanInterval.
	RescanInterval time.Duration
	// LinkRate returns the bandwidth, bytes/s, of the link from the node whose
	// API is at addr to this one; 0 when unknown. Fetch tells a [LinkSource]
	// the rate, which lets it send the shard compressed when that pays. Nil:
	// every link unknown, shards come raw. Called concurrently.
	LinkRate func(addr string) float64
	// Log, when set, is told when a shard asked for as its changes could not
	// be assembled and was copied whole (Fetch): a warning when the assembled
	// shard failed verification, which says this node's earlier copy changed
	// since it was verified.
	Log *slog.Logger
	// NoSpares makes RemoveBefore remove the shards of the epochs it deletes
	// instead of keeping them as spares: a shard's worth of storage less per
	// rank between checkpoints, new pages for every shard.
	NoSpares bool

	mu    sync.Mutex
	cache map[string]map[string]entry // job → shard path → last verification
	gen   uint64                      // entries remembered so far (entry.gen)
	locks map[string]*pathLock        // shard path → writers of it
}

// DefaultStallTimeout is Store.StallTimeout's default.
const DefaultStallTimeout = 15 * time.Second

// DefaultRescanInterval is Store.RescanInterval's default: a new shard is
// reported to a waiting coordinator within about this long.
const DefaultRescanInterval = 250 * time.Millisecond

// errStalled is the cause of a fetch aborted by Store.StallTimeout.
var errStalled = errors.New("stalled")

// New returns a store rooted at dir.
func New(dir string) *Store { return &Store{Dir: dir} }

// Source is a node a shard can be fetched from; *api.Client is one.
type Source interface {
	// Addr names the node in messages (its API address).
	Addr() string
	GetShard(ctx context.Context, ref api.ShardRef) (io.ReadCloser, int64, error)
}

// LinkSource is a Source that can be told the bandwidth of the link a shard
// crosses from it, link bytes/s (> 0), and then may send it compressed; the
// reader yields the raw shard either way. *api.Client is one. Fetch may call
// it concurrently.
type LinkSource interface {
	Source
	GetShardOver(ctx context.Context, ref api.ShardRef, link float64) (io.ReadCloser, int64, error)
}

var _ LinkSource = (*api.Client)(nil)

// fileKey identifies one version of a file: a shard rewritten or replaced gets a
// new key, so a cached verification never outlives the bytes it verified.
type fileKey struct {
	dev, ino     uint64
	size, mtimNs int64
}

func keyOf(fi os.FileInfo) fileKey {
	k := fileKey{size: fi.Size(), mtimNs: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.dev, k.ino = uint64(st.Dev), st.Ino
	}
	return k
}

// entry is the outcome of verifying one version of a shard file.
type entry struct {
	key  fileKey
	info api.ShardInfo
	// parity describes a verified parity file (then info is zero).
	parity *api.ParityInfo
	err    error // nil: good; else wraps a ckpt sentinel (shards)
	// sample is how a sample of a good shard compressed, once measured
	// (OpenToSend), on this shard or an earlier one of its rank: on the shard
	// of epoch sampledAt.
	sample    *compress.Sample
	sampledAt uint64
	// blocks are a good shard's blocks' sums (OpenChanges, Fetch).
	blocks []uint64
	// gen orders the store's remembered entries: an Index forgets only those
	// remembered before it began (prune).
	gen uint64
}

type pathLock struct {
	mu sync.Mutex
	n  int
}

func (s *Store) jobDir(job string) jobdir.Dir { return jobdir.Dir{Root: s.Dir, Job: job} }

// tree is the store's directory, through which every file of a job is reached:
// a user's job's directory is theirs to change, and no link in it is followed.
func (s *Store) tree() userdir.Tree { return userdir.Tree{Base: s.Dir} }

func (s *Store) path(ref api.ShardRef) string {
	return s.jobDir(ref.Job).ShardPath(ref.Epoch, ref.Rank)
}

func checkJob(jobID string) error {
	if !job.ValidID(jobID) {
		return fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", api.ErrBadRequest, jobID)
	}
	return nil
}

func checkRef(ref api.ShardRef) error {
	if err := checkJob(ref.Job); err != nil {
		return err
	}
	if ref.Epoch == 0 || ref.Rank < 0 || ref.Rank >= job.MaxRanks {
		return fmt.Errorf("%w: shard %s: want epoch ≥ 1 and rank from 0 to %d", api.ErrBadRequest, ref, job.MaxRanks-1)
	}
	return nil
}

// cached returns the verification of path's version key, if known.
func (s *Store) cached(job, path string, key fileKey) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cache[job][path]
	return e, ok && e.key == key
}

func (s *Store) remember(job, path string, e entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rememberLocked(job, path, e)
}

// rememberLocked is remember with s.mu held.
func (s *Store) rememberLocked(job, path string, e entry) {
	if s.cache == nil {
		s.cache = map[string]map[string]entry{}
	}
	if s.cache[job] == nil {
		s.cache[job] = map[string]entry{}
	}
	s.gen++
	e.gen = s.gen
	s.cache[job][path] = e
}

// newestEarlierLocked returns the path and entry of the newest shard of ref's
// rank in the cache from an epoch before ref's for which want holds, path ""
// when there is none. With s.mu held.
func (s *Store) newestEarlierLocked(ref api.ShardRef, want func(path string, e entry) bool) (string, entry) {
	var path string
	var best entry
	for p, e := range s.cache[ref.Job] {
		if e.info.Rank == ref.Rank && e.info.Epoch < ref.Epoch && e.info.Epoch > best.info.Epoch && want(p, e) {
			path, best = p, e
		}
	}
	return path, best
}

// scanBegins returns what a scan of the store's files that begins now passes
// to prune.
func (s *Store) scanBegins() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// verifyOpen verifies the open shard file f, whose path names ref, through the
// cache. A read failure is returned as err; a verification failure is in the
// entry (with a nil err).
func (s *Store) verifyOpen(ref api.ShardRef, path string, f *os.File) (entry, error) {
	fi, err := f.Stat()
	if err != nil {
		return entry{}, err
	}
	if e, ok := s.cached(ref.Job, path, keyOf(fi)); ok {
		return e, nil
	}
	if h, sum, blocks, ok := writersSums(s.tree(), path, f, fi); ok {
		return s.record(ref, path, fi, h, sum, blocks, nil)
	}
	h, sum, blocks, err := verifyFile(f, fi.Size())
	return s.record(ref, path, fi, h, sum, blocks, err)
}

// record remembers, and returns, the outcome of verifying the version fi of
// the shard file at path, which names ref: verifyFile's results.
func (s *Store) record(ref api.ShardRef, path string, fi os.FileInfo, h shard.Header, sum uint64, blocks []uint64, err error) (entry, error) {
	e := entry{key: keyOf(fi)}
	var vf *verifyFailure
	switch {
	case errors.As(err, &vf):
		e.err = &shard.Error{Path: path, Err: vf.err}
	case err != nil:
		return entry{}, err
	default:
		want := shard.Header{Job: ref.Job, Epoch: ref.Epoch, Rank: uint32(ref.Rank), NRanks: h.NRanks}
		if err := h.Check(want); err != nil {
			e.err = &shard.Error{Path: path, Err: err}
		} else {
			e.info = api.ShardInfo{Epoch: h.Epoch, Rank: int(h.Rank), NRanks: int(h.NRanks),
				Size: fi.Size(), CreatedNs: h.CreatedNs, Checksum: sum}
			e.blocks = blocks
		}
	}
	s.remember(ref.Job, path, e)
	return e, nil
}

// Index lists the job's shards on this node that verify, and separately those
// that do not, by epoch then rank. Files being written (names other than
// r<rank>.shard, such as .tmp files) are not listed. Verification results are
// cached by file version, so polling costs one stat per shard once verified.
func (s *Store) Index(job string) (api.ShardIndex, error) {
	idx := api.ShardIndex{Job: job}
	if err := checkJob(job); err != nil {
		return idx, err
	}
	jd := s.jobDir(job)
	began := s.scanBegins()
	seen := map[string]bool{}
	if err := s.indexEpochs(&idx, seen); err != nil {
		return idx, err
	}
	s.prune(job, seen, began)
	idx.Progress = s.readProgress(filepath.Join(jd.Path(), jobdir.Progress))
	idx.Traffic = s.readTraffic(filepath.Join(jd.Path(), jobdir.Traffic))
	idx.Interval = s.readInterval(filepath.Join(jd.Path(), jobdir.Interval))
	idx.Tag = idx.ComputeTag()
	return idx, nil
}

// indexEpochs lists into idx the shards and parity rows of the job's epochs on
// this node, and marks in seen the files it verified. Each directory is opened
// once and its entries are looked at through it.
func (s *Store) indexEpochs(idx *api.ShardIndex, seen map[string]bool) error {
	job := idx.Job
	jdir, err := s.tree().OpenDir(s.jobDir(job).Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer jdir.Close()
	ents, err := jdir.ReadDir()
	if err != nil {
		return err
	}
	for _, epoch := range jobdir.EpochsIn(ents) {
		edir, err := jdir.Sub(jobdir.EpochName(epoch))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, userdir.ErrSymlink) {
			continue // removed meanwhile, or not an epoch the store made or a rank wrote
		}
		if err != nil {
			return err
		}
		err = s.indexEpoch(idx, seen, edir, epoch)
		edir.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// indexEpoch lists into idx the shards and parity rows of epoch, whose
// directory edir is.
func (s *Store) indexEpoch(idx *api.ShardIndex, seen map[string]bool, edir *userdir.Dir, epoch uint64) error {
	job := idx.Job
	ents, err := edir.ReadDir()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, de := range ents {
		if !de.Type().IsRegular() {
			continue
		}
		path := filepath.Join(edir.Path(), de.Name())
		if p, ok := s.indexParity(edir, job, epoch, de.Name(), path); ok {
			seen[path] = true
			if p != nil {
				idx.Parity = append(idx.Parity, *p)
			}
			continue
		}
		rank, ok := jobdir.ParseShardName(de.Name())
		if !ok {
			continue
		}
		ref := api.ShardRef{Job: job, Epoch: epoch, Rank: rank}
		e, err := s.verifyIn(edir, ref, de.Name(), path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		seen[path] = true
		switch {
		case err != nil:
			idx.Bad = append(idx.Bad, api.BadShard{Epoch: epoch, Rank: rank, Error: "unreadable", Detail: err.Error()})
		case e.err != nil:
			idx.Bad = append(idx.Bad, api.BadShard{Epoch: epoch, Rank: rank, Error: shard.ShortName(e.err), Detail: e.err.Error()})
		default:
			idx.Shards = append(idx.Shards, e.info)
		}
	}
	return nil
}

// smallFile bounds what the store reads of a small file libshoal's ranks keep
// in a job's directory (progress, interval, traffic): theirs to fill.
const smallFile = 1 << 20

// readInterval reads the interval file libshoal's rank 0 keeps in the job's
// directory; missing or malformed means unknown.
func (s *Store) readInterval(path string) *job.Interval {
	b, err := s.tree().ReadFile(path, smallFile)
	if err != nil {
		return nil
	}
	return jobdir.ParseInterval(b)
}

// readTraffic reads the traffic files libshoal's ranks keep in dir
// (docs/traffic.md), in rank order; a file that does not parse is left out
// (the next checkpoint writes it again).
func (s *Store) readTraffic(dir string) []api.RankTraffic {
	ents, err := s.tree().ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []api.RankTraffic
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue // a temporary file
		}
		f, err := s.tree().Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		tf, err := traffic.Parse(io.LimitReader(f, smallFile))
		f.Close()
		if err != nil {
			continue
		}
		rt := api.RankTraffic{Rank: tf.Rank, Epoch: tf.Epoch, SecondsMPI: tf.SecondsMPI, SecondsTotal: tf.SecondsTotal}
		for _, p := range tf.Peers {
			rt.Sent = append(rt.Sent, api.PeerTraffic{Peer: p.Rank, Bytes: p.Bytes, Messages: p.Messages})
		}
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out
}

// WaitIndex returns the job's index (see Index) once its tag differs from
// known: at once when known is empty or already stale. Otherwise it looks
// again every RescanInterval until the tag changes; when ctx ends first, it
// returns the last index it made and no error (the caller asked for the index
// as it is by then).
//
// Looking again costs a few system calls while nothing changes: the job
// directory is read and its epoch directories and progress file are stat'ed
// (a [fingerprint]); shards are listed again only when an epoch directory
// changed, and the progress file is read again only when it was replaced.
// Ranks and Put write a shard as a temporary file renamed into place, which
// changes its directory; a shard file changed in place is noticed only at the
// next change of its directory or the next call.
func (s *Store) WaitIndex(ctx context.Context, job, known string) (api.ShardIndex, error) {
	fp, err := s.fingerprint(job)
	if err != nil {
		return api.ShardIndex{Job: job}, err
	}
	idx, err := s.Index(job)
	if err != nil || known == "" || idx.Tag != known {
		return idx, err
	}
	every := s.RescanInterval
	if every <= 0 {
		every = DefaultRescanInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return idx, nil
		case <-tick.C:
		}
		next, err := s.fingerprint(job)
		if err != nil {
			return idx, err
		}
		switch {
		case !fp.settled || !slices.Equal(next.epochs, fp.epochs) || !slices.Equal(next.dirs, fp.dirs):
			idx, err = s.Index(job)
		case next.progress != fp.progress:
			idx.Progress = s.readProgress(filepath.Join(s.jobDir(job).Path(), jobdir.Progress))
			idx.Tag = idx.ComputeTag()
		}
		fp = next
		if err != nil || idx.Tag != known {
			return idx, err
		}
	}
}

// fingerprint is what WaitIndex compares to tell that a job's index cannot
// have changed: the job's epoch directories, their versions, and the version
// of its progress file. Taken before an index is made, any later change shows
// in a later fingerprint, except a second change of a directory within the
// resolution of its modification time (a clock tick; a second on some file
// systems): a fingerprint with a version younger than that is not settled,
// and the next one lists the shards again whatever it shows.
type fingerprint struct {
	epochs   []uint64
	dirs     []fileKey // by epoch; zero for one removed meanwhile
	progress fileKey   // zero when there is no progress file
	settled  bool
}

// settleTime is how old a directory's modification time must be for a later
// change to show in it for sure (see fingerprint).
const settleTime = time.Second

func (s *Store) fingerprint(job string) (fingerprint, error) {
	if err := checkJob(job); err != nil {
		return fingerprint{}, err
	}
	now := time.Now()
	jdir, err := s.tree().OpenDir(s.jobDir(job).Path())
	if errors.Is(err, os.ErrNotExist) {
		return fingerprint{settled: true}, nil
	}
	if err != nil {
		return fingerprint{}, err
	}
	defer jdir.Close()
	ents, err := jdir.ReadDir()
	if err != nil {
		return fingerprint{}, err
	}
	epochs := jobdir.EpochsIn(ents)
	fp := fingerprint{epochs: epochs, dirs: make([]fileKey, len(epochs)), settled: true}
	for i, e := range epochs {
		if fi, err := jdir.Lstat(jobdir.EpochName(e)); err == nil {
			fp.dirs[i] = keyOf(fi)
			fp.settled = fp.settled && now.Sub(fi.ModTime()) >= settleTime
		}
	}
	if fi, err := jdir.Lstat(jobdir.Progress); err == nil {
		fp.progress = keyOf(fi)
	}
	return fp, nil
}

// readProgress reads the progress file libshoal's rank 0 keeps in the job's
// directory: one fraction in [0, 1]. Missing or unreadable means unknown.
func (s *Store) readProgress(path string) *api.Progress {
	f, err := s.tree().Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, smallFile))
	if err != nil {
		return nil
	}
	frac, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || !(frac >= 0 && frac <= 1) {
		return nil
	}
	return &api.Progress{Fraction: frac, At: st.ModTime()}
}

// verifyIn verifies the shard file name in dir, at path, through the cache: a
// stat when its version was verified before.
func (s *Store) verifyIn(dir *userdir.Dir, ref api.ShardRef, name, path string) (entry, error) {
	fi, err := dir.Lstat(name)
	if err != nil {
		return entry{}, err
	}
	if e, ok := s.cached(ref.Job, path, keyOf(fi)); ok {
		return e, nil
	}
	f, _, err := jobdir.OpenShard(s.tree(), path)
	if err != nil {
		return entry{}, err
	}
	defer f.Close()
	return s.verifyOpen(ref, path, f)
}

// prune forgets the cached verifications of the job's files not in seen, a
// scan of its directories that began at began (scanBegins). An entry
// remembered since is kept: its file may have been renamed into a directory
// after the scan had read it (a copy committed meanwhile), and forgetting it
// would have the next scan read and hash the whole file again.
func (s *Store) prune(job string, seen map[string]bool, began uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, e := range s.cache[job] {
		if !seen[p] && !isSpare(p) && e.gen <= began {
			delete(s.cache[job], p)
		}
	}
	if len(s.cache[job]) == 0 {
		delete(s.cache, job)
	}
}

// Stat returns the verified description of the local copy of ref: an error
// wrapping api.ErrNotFound when there is none, api.ErrCorrupt (and the ckpt
// sentinel) when it fails verification.
func (s *Store) Stat(ref api.ShardRef) (api.ShardInfo, error) {
	f, info, err := s.Open(ref)
	if err != nil {
		return api.ShardInfo{}, err
	}
	f.Close()
	return info, nil
}

// Open opens the local copy of ref after verifying it (through the cache); the
// caller reads info.Size bytes and closes it. Errors are as for Stat.
func (s *Store) Open(ref api.ShardRef) (*os.File, api.ShardInfo, error) {
	f, e, err := s.open(ref)
	return f, e.info, err
}

// open is Open that returns the file's verification: its description, block
// sums and sample.
func (s *Store) open(ref api.ShardRef) (*os.File, entry, error) {
	if err := checkRef(ref); err != nil {
		return nil, entry{}, err
	}
	path := s.path(ref)
	f, _, err := jobdir.OpenShard(s.tree(), path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, entry{}, fmt.Errorf("%w: shard %s is not stored on this node: %w", api.ErrNotFound, ref, os.ErrNotExist)
	}
	if err != nil {
		return nil, entry{}, err
	}
	e, err := s.verifyOpen(ref, path, f)
	if err == nil && e.err != nil {
		err = fmt.Errorf("%w: shard %s on this node fails verification and is not served: %w", api.ErrCorrupt, ref, e.err)
	}
	if err != nil {
		f.Close()
		return nil, entry{}, err
	}
	return f, e, nil
}

// Put stores the shard read from r (size bytes, or negative when not known)
// as ref: it writes a temporary file, syncs it, verifies it (format, identity
// and size), renames it over any previous copy and syncs the directory. A
// shard that fails verification wraps api.ErrBadRequest and the ckpt
// sentinel; an error reading r is returned as it is (the API's signed-body
// check wraps api.ErrUnauthorized). Either way nothing is replaced.
func (s *Store) Put(ref api.ShardRef, r io.Reader, size int64) (api.ShardInfo, error) {
	info, err := s.put(ref, r, size)
	var vf *verifyFailure
	var rf *readFailure
	switch {
	case errors.As(err, &vf):
		return info, fmt.Errorf("%w: shard %s rejected, nothing stored: %w", api.ErrBadRequest, ref, vf.err)
	case errors.As(err, &rf):
		if errors.Is(rf.err, api.ErrUnauthorized) {
			return info, rf.err
		}
		return info, fmt.Errorf("%w: reading shard %s: %w", api.ErrBadRequest, ref, rf.err)
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

func (s *Store) put(ref api.ShardRef, r io.Reader, size int64) (api.ShardInfo, error) {
	if err := checkRef(ref); err != nil {
		return api.ShardInfo{}, err
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
	if err := s.mkdirs(api.ShardRef{Job: job, Epoch: epoch}); err != nil {
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

func (s *Store) forget(job, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cache[job], path)
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
func (s *Store) mkdirs(ref api.ShardRef) error {
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

// Fetch makes sure this node holds a verified copy of ref, copying it from src
// when it has none (a corrupt local copy is replaced). It reports whether bytes
// were copied. Errors: the source's 404 and 422 (it has no good copy) are
// passed on as api.ErrNotFound and api.ErrCorrupt; bytes that arrive but fail
// verification wrap api.ErrCorrupt and the ckpt sentinel; any other failure of
// the source or of the transfer, a compressed stream that fails to decode
// included, wraps api.ErrBadGateway. Messages name the source. With LinkRate
// set, a [LinkSource] is told the link's bandwidth and may send the shard
// compressed; what arrives is verified all the same. When this node holds a
// verified shard of ref's rank from an earlier epoch and src is a
// [ChangesSource], the shard is first asked for as its changes since that one
// (changes.go); when that fails in any way, it is copied whole.
func (s *Store) Fetch(ctx context.Context, ref api.ShardRef, src Source) (api.Fetched, error) {
	if err := checkRef(ref); err != nil {
		return api.Fetched{}, err
	}
	if info, err := s.Stat(ref); err == nil {
		return api.Fetched{Shard: info}, nil
	}
	from := src.Addr()
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := s.newWatchdog(cancel)
	defer dog.t.Stop()
	stall := dog.d
	stalled := func() bool { return errors.Is(context.Cause(ctx), errStalled) && parent.Err() == nil }

	if f, ok := s.fetchChanges(ctx, ref, src, dog); ok {
		return f, nil
	}
	rc, size, err := s.getShard(ctx, ref, src)
	switch {
	case err != nil && stalled():
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: no answer for %v", api.ErrBadGateway, ref, from, stall)
	case err != nil && (errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrCorrupt)):
		return api.Fetched{}, fmt.Errorf("fetch shard %s from %s: %w", ref, from, err)
	case err != nil && parent.Err() != nil:
		return api.Fetched{}, fmt.Errorf("fetch shard %s from %s: %w", ref, from, parent.Err())
	case err != nil:
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: %v", api.ErrBadGateway, ref, from, err)
	}
	defer rc.Close()
	info, err := s.put(ref, dog.wrap(rc), size)
	var vf *verifyFailure
	var rf *readFailure
	switch {
	case errors.As(err, &vf):
		return api.Fetched{}, fmt.Errorf("%w: shard %s fetched from %s fails verification, not stored: %w", api.ErrCorrupt, ref, from, vf.err)
	case errors.As(err, &rf) && stalled():
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: transfer stalled, no data for %v", api.ErrBadGateway, ref, from, stall)
	case errors.As(err, &rf) && parent.Err() != nil:
		return api.Fetched{}, fmt.Errorf("fetch shard %s from %s: %w", ref, from, parent.Err())
	case errors.As(err, &rf):
		// A compressed stream that fails to decode ends here too: the source's
		// copy was verified before it was sent, so the damage is the transfer's.
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: transfer failed: %v", api.ErrBadGateway, ref, from, rf.err)
	case err != nil:
		return api.Fetched{}, fmt.Errorf("fetch shard %s from %s: %w", ref, from, err)
	}
	wire := info.Size
	if w, ok := rc.(interface{ Wire() int64 }); ok {
		wire = w.Wire()
	}
	return api.Fetched{Shard: info, Copied: true, Wire: wire}, nil
}

// getShard asks src for ref, telling it the link's bandwidth when it is known
// and src can use it.
func (s *Store) getShard(ctx context.Context, ref api.ShardRef, src Source) (io.ReadCloser, int64, error) {
	if ls, ok := src.(LinkSource); ok && s.LinkRate != nil {
		if link := s.LinkRate(src.Addr()); link > 0 {
			return ls.GetShardOver(ctx, ref, link)
		}
	}
	return src.GetShard(ctx, ref)
}

// progressReader restarts the stall timer t at every read that returns data,
// and counts the bytes read.
type progressReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
	n int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.t.Reset(p.d)
		p.n += int64(n)
	}
	return n, err
}

// RemoveBefore deletes the job's epoch directories older than epoch (≥ 1) and
// returns the epochs deleted, oldest first. Where newer epochs replace them, the
// shards of the ranks that have one in those epochs are kept as spares to be
// written over ([ckpt.JobDir.RetireEpoch]), and the spares of the other ranks
// (moved to other nodes) go; where no newer epoch remains (the job's end), all
// the job's spares go.
func (s *Store) RemoveBefore(job string, epoch uint64) ([]uint64, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	if epoch == 0 {
		return nil, fmt.Errorf("%w: remove epochs before 0: want an epoch ≥ 1", api.ErrBadRequest)
	}
	jd := s.jobDir(job)
	epochs, err := jd.Epochs()
	if err != nil {
		return nil, err
	}
	// Shards are kept as spares only while the job goes on writing them here: an
	// epoch at or above epoch remains. Removing them all is the job's end, and takes
	// the spares with it.
	cut, _ := slices.BinarySearch(epochs, epoch)
	var keep func(rank int) bool // nil: no spare kept
	if cut < len(epochs) && !s.NoSpares {
		ranks := jd.ShardRanks(epochs[cut:])
		keep = func(rank int) bool { return ranks[rank] }
	}
	var removed []uint64
	for _, e := range epochs[:cut] {
		var err error
		if keep != nil {
			err = jd.RetireEpoch(e, keep)
		} else {
			err = jd.RemoveEpoch(e)
		}
		if err != nil {
			return removed, err
		}
		removed = append(removed, e)
	}
	spares, err := jd.RemoveSpares(keep)
	if err != nil {
		return removed, err
	}
	s.rememberSpares(job, spares, s.pruneEpochs(job, func(e uint64) bool { return e < epoch }))
	return removed, nil
}

// RemoveSpares deletes the job's spares ([Store.RemoveBefore]).
func (s *Store) RemoveSpares(job string) error {
	if err := checkJob(job); err != nil {
		return err
	}
	_, err := s.jobDir(job).RemoveSpares(nil)
	return err
}

// RemoveEpoch deletes one epoch directory of the job; one that is not there is
// not an error.
func (s *Store) RemoveEpoch(job string, epoch uint64) error {
	if err := checkJob(job); err != nil {
		return err
	}
	if err := s.jobDir(job).RemoveEpoch(epoch); err != nil {
		return err
	}
	s.pruneEpochs(job, func(e uint64) bool { return e == epoch })
	return nil
}

// RemoveJob deletes the job's whole directory (shards, manifest, request) and
// returns the epochs it held. A job with no directory is not an error.
func (s *Store) RemoveJob(job string) ([]uint64, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	jd := s.jobDir(job)
	epochs, err := jd.Epochs()
	if err != nil {
		return nil, err
	}
	if err := s.tree().RemoveAll(jd.Path()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.cache, job)
	s.mu.Unlock()
	return epochs, nil
}

// pruneEpochs forgets the cached verifications of the job's epochs that gone
// says are gone, and returns those of good shards among them.
func (s *Store) pruneEpochs(job string, gone func(uint64) bool) []entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var good []entry
	for p, e := range s.cache[job] {
		if ep, ok := epochOf(p); ok && gone(ep) {
			delete(s.cache[job], p)
			if e.err == nil && e.blocks != nil {
				good = append(good, e)
			}
		}
	}
	return good
}

// epochOf returns the epoch of a file in an epoch directory (a spare is in
// none, whatever its job's name).
func epochOf(path string) (uint64, bool) {
	if isSpare(path) {
		return 0, false
	}
	var e uint64
	_, err := fmt.Sscanf(filepath.Base(filepath.Dir(path)), "e%d", &e)
	return e, err == nil
}

// isSpare says whether a cached path is a spare's (ckpt.JobDir.SparePath).
func isSpare(path string) bool { return strings.HasSuffix(path, ".spare") }

// rememberSpares keeps, for each of the job's spares (by rank), the
// verification of the shard it was (one of retired, or the spare's own from
// before), so that a shard stored from its changes over the spare writes only
// the blocks that differ from it (patch). The verification holds for as long
// as the spare's file version does: a shard retired to a spare keeps its inode
// and times.
func (s *Store) rememberSpares(job string, spares map[int]string, retired []entry) {
	keys := map[string]fileKey{}
	for _, path := range spares {
		if fi, err := s.tree().Lstat(path); err == nil {
			keys[path] = keyOf(fi)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, e := range s.cache[job] {
		if isSpare(p) && e.key != keys[p] {
			delete(s.cache[job], p)
		}
	}
	for path, key := range keys {
		if _, ok := s.cache[job][path]; ok {
			continue
		}
		for _, e := range retired {
			if e.key == key {
				s.rememberLocked(job, path, e)
				break
			}
		}
	}
}

// RequestCheckpoint creates the job's request-checkpoint file: its rank 0, if it
// runs on this node, deletes it at its next agreement and every rank checkpoints.
// The request stays until a rank 0 of the job on this node takes it.
func (s *Store) RequestCheckpoint(job string) error { return s.request(job, "") }

// RequestHold asks for a checkpoint after which the ranks hold still until the
// launcher stops them: the relaunch that follows loses no work
// (docs/launcher-protocol.md).
func (s *Store) RequestHold(job string) error { return s.request(job, "hold\n") }

// WithdrawRequest removes the job's checkpoint request, if one waits: a new run
// of the job must not take a request made for an earlier one.
func (s *Store) WithdrawRequest(job string) error {
	if err := checkJob(job); err != nil {
		return err
	}
	err := s.tree().Remove(filepath.Join(s.jobDir(job).Path(), jobdir.Request))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (s *Store) request(job, content string) error {
	if err := checkJob(job); err != nil {
		return err
	}
	if err := s.mkdirJob(job); err != nil {
		return err
	}
	// Written whole and renamed: rank 0 must never read half a request.
	return s.tree().WriteFile(filepath.Join(s.jobDir(job).Path(), jobdir.Request), []byte(content), 0o644)
}

// Jobs lists the jobs that have a directory in the store, sorted.
func (s *Store) Jobs() ([]string, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && job.ValidID(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
