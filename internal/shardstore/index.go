package shardstore

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/traffic"
	"shoal/internal/userdir"
)

// The node's index of a job's shards: what the coordinator reads, in full or
// as a long poll that answers when it changes.

// scanBegins returns what a scan of the store's files that begins now passes
// to prune.
func (s *Store) scanBegins() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Index lists the job's shards on this node that verify, and separately those
// that do not, by epoch then rank. Files being written (names other than
// r<rank>.shard, such as .tmp files) are not listed. Verification results are
// cached by file version, so polling costs one stat per shard once verified.
func (s *Store) Index(job string) (shard.Index, error) {
	idx := shard.Index{Job: job}
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
	idx.Silent = s.silent(job)
	idx.Tag = idx.ComputeTag()
	return idx, nil
}

// indexEpochs lists into idx the shards and parity rows of the job's epochs on
// this node, and marks in seen the files it verified. Each directory is opened
// once and its entries are looked at through it.
func (s *Store) indexEpochs(idx *shard.Index, seen map[string]bool) error {
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
func (s *Store) indexEpoch(idx *shard.Index, seen map[string]bool, edir *userdir.Dir, epoch uint64) error {
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
		ref := shard.Ref{Job: job, Epoch: epoch, Rank: rank}
		e, err := s.verifyIn(edir, ref, de.Name(), path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		seen[path] = true
		switch {
		case err != nil:
			idx.Bad = append(idx.Bad, shard.Bad{Epoch: epoch, Rank: rank, Error: "unreadable", Detail: err.Error()})
		case e.err != nil:
			idx.Bad = append(idx.Bad, shard.Bad{Epoch: epoch, Rank: rank, Error: shard.ShortName(e.err), Detail: e.err.Error()})
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
func (s *Store) readTraffic(dir string) []traffic.Report {
	ents, err := s.tree().ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []traffic.Report
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
		rt := traffic.Report{Rank: tf.Rank, Epoch: tf.Epoch, SecondsMPI: tf.SecondsMPI, SecondsTotal: tf.SecondsTotal}
		for _, p := range tf.Peers {
			rt.Sent = append(rt.Sent, traffic.PeerReport{Peer: p.Rank, Bytes: p.Bytes, Messages: p.Messages})
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
// changed, and the progress file is read again only when it was replaced. The
// ranks' alive files are read every time: a rank falls silent with no file
// changing.
// Ranks and Put write a shard as a temporary file renamed into place, which
// changes its directory; a shard file changed in place is noticed only at the
// next change of its directory or the next call.
func (s *Store) WaitIndex(ctx context.Context, job, known string) (shard.Index, error) {
	fp, err := s.fingerprint(job)
	if err != nil {
		return shard.Index{Job: job}, err
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
		default:
			if next.progress != fp.progress {
				idx.Progress = s.readProgress(filepath.Join(s.jobDir(job).Path(), jobdir.Progress))
			}
			idx.Silent = s.silent(job)
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
func (s *Store) readProgress(path string) *job.Progress {
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
	return &job.Progress{Fraction: frac, At: st.ModTime()}
}

// verifyIn verifies the shard file name in dir, at path, through the cache: a
// stat when its version was verified before.
func (s *Store) verifyIn(dir *userdir.Dir, ref shard.Ref, name, path string) (entry, error) {
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
