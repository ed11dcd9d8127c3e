package shardstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"shoal/internal/errkind"
	"shoal/internal/jobdir"
)

// Removing a job's shards: old epochs (kept as spares to be written over), a
// whole job; and the checkpoint requests the agent leaves for a job's rank 0.

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
		return nil, fmt.Errorf("%w: remove epochs before 0: want an epoch ≥ 1", errkind.BadRequest)
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
