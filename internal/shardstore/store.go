// Package shardstore is one node's checkpoint store: the shards libshoal's ranks
// write into the node's ckpt directory (docs/shard-format.md, "Files on disk"),
// and those the agent receives from other nodes. It verifies every shard it lists,
// serves or stores, so a corrupt copy is reported and never passed on, and it
// gives the coordinator its durability primitives: index, fetch from another
// node, remove old epochs, request a checkpoint.
package shardstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"shoal/internal/api"
	"shoal/internal/compress"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/userdir"
)

// Store is the checkpoint store rooted at Dir (an agent's <data>/ckpt). The zero
// value with Dir set is ready; a Store must not be copied after first use. Its
// methods are safe for concurrent use, also with libshoal's ranks writing into
// Dir. Errors wrap the api sentinels that choose their HTTP status
// (errkind.BadRequest, errkind.NotFound, errkind.Corrupt, errkind.BadGateway) and,
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

// New returns a store rooted at dir.
func New(dir string) *Store { return &Store{Dir: dir} }

// Source is a node a shard can be fetched from; *api.Client is one.
type Source interface {
	// Addr names the node in messages (its API address).
	Addr() string
	GetShard(ctx context.Context, ref shard.Ref) (io.ReadCloser, int64, error)
}

// LinkSource is a Source that can be told the bandwidth of the link a shard
// crosses from it, link bytes/s (> 0), and then may send it compressed; the
// reader yields the raw shard either way. *api.Client is one. Fetch may call
// it concurrently.
type LinkSource interface {
	Source
	GetShardOver(ctx context.Context, ref shard.Ref, link float64) (io.ReadCloser, int64, error)
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
	info shard.Info
	// parity describes a verified parity file (then info is zero).
	parity *shard.ParityInfo
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

func (s *Store) jobDir(job string) jobdir.Dir { return jobdir.Dir{Root: s.Dir, Job: job} }

// tree is the store's directory, through which every file of a job is reached:
// a user's job's directory is theirs to change, and no link in it is followed.
func (s *Store) tree() userdir.Tree { return userdir.Tree{Base: s.Dir} }

func (s *Store) path(ref shard.Ref) string {
	return s.jobDir(ref.Job).ShardPath(ref.Epoch, ref.Rank)
}

func checkJob(jobID string) error {
	if !job.ValidID(jobID) {
		return fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", errkind.BadRequest, jobID)
	}
	return nil
}

func checkRef(ref shard.Ref) error {
	if err := checkJob(ref.Job); err != nil {
		return err
	}
	if ref.Epoch == 0 || ref.Rank < 0 || ref.Rank >= job.MaxRanks {
		return fmt.Errorf("%w: shard %s: want epoch ≥ 1 and rank from 0 to %d", errkind.BadRequest, ref, job.MaxRanks-1)
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
func (s *Store) newestEarlierLocked(ref shard.Ref, want func(path string, e entry) bool) (string, entry) {
	var path string
	var best entry
	for p, e := range s.cache[ref.Job] {
		if e.info.Rank == ref.Rank && e.info.Epoch < ref.Epoch && e.info.Epoch > best.info.Epoch && want(p, e) {
			path, best = p, e
		}
	}
	return path, best
}

// verifyOpen verifies the open shard file f, whose path names ref, through the
// cache. A read failure is returned as err; a verification failure is in the
// entry (with a nil err).
func (s *Store) verifyOpen(ref shard.Ref, path string, f *os.File) (entry, error) {
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
func (s *Store) record(ref shard.Ref, path string, fi os.FileInfo, h shard.Header, sum uint64, blocks []uint64, err error) (entry, error) {
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
			e.info = shard.Info{Epoch: h.Epoch, Rank: int(h.Rank), NRanks: int(h.NRanks),
				Size: fi.Size(), CreatedNs: h.CreatedNs, Checksum: sum, PerRank: h.PerRank()}
			e.blocks = blocks
		}
	}
	s.remember(ref.Job, path, e)
	return e, nil
}

// Stat returns the verified description of the local copy of ref: an error
// wrapping errkind.NotFound when there is none, errkind.Corrupt (and the ckpt
// sentinel) when it fails verification.
func (s *Store) Stat(ref shard.Ref) (shard.Info, error) {
	f, info, err := s.Open(ref)
	if err != nil {
		return shard.Info{}, err
	}
	f.Close()
	return info, nil
}

// Open opens the local copy of ref after verifying it (through the cache); the
// caller reads info.Size bytes and closes it. Errors are as for Stat.
func (s *Store) Open(ref shard.Ref) (*os.File, shard.Info, error) {
	f, e, err := s.open(ref)
	return f, e.info, err
}

// open is Open that returns the file's verification: its description, block
// sums and sample.
func (s *Store) open(ref shard.Ref) (*os.File, entry, error) {
	if err := checkRef(ref); err != nil {
		return nil, entry{}, err
	}
	path := s.path(ref)
	f, _, err := jobdir.OpenShard(s.tree(), path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, entry{}, fmt.Errorf("%w: shard %s is not stored on this node: %w", errkind.NotFound, ref, os.ErrNotExist)
	}
	if err != nil {
		return nil, entry{}, err
	}
	e, err := s.verifyOpen(ref, path, f)
	if err == nil && e.err != nil {
		err = fmt.Errorf("%w: shard %s on this node fails verification and is not served: %w", errkind.Corrupt, ref, e.err)
	}
	if err != nil {
		f.Close()
		return nil, entry{}, err
	}
	return f, e, nil
}

func (s *Store) forget(job, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cache[job], path)
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
