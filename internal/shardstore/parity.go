package shardstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/erasure"
	"shoal/internal/errkind"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/userdir"
)

// A job with --redundancy rs:K+M keeps, beside each shard on its rank's node,
// Reed–Solomon parity files over groups of shards (internal/erasure): row R of
// group G of an epoch is <job>/e<epoch>/p<G as 6 digits>-<R as 3 digits>.parity.
// They live in the epoch's directory, so pruning and retention remove them
// with the shards they protect.

// PieceSource is a node that holds pieces of parity groups: they can be read
// from it, and parity rows written to it; *api.Client is one.
type PieceSource interface {
	Source
	GetParity(ctx context.Context, ref shard.ParityRef) (io.ReadCloser, int64, error)
	PutParity(ctx context.Context, ref shard.ParityRef, r io.ReadSeeker) (shard.ParityInfo, error)
}

func (s *Store) parityPath(ref shard.ParityRef) string {
	return s.jobDir(ref.Job).ParityPath(ref.Epoch, ref.Group, ref.Row)
}

// verifyParity verifies the open parity file f, whose path names ref, through
// the cache, as verifyOpen does a shard.
func (s *Store) verifyParity(ref shard.ParityRef, path string, f *os.File) (entry, error) {
	fi, err := f.Stat()
	if err != nil {
		return entry{}, err
	}
	key := keyOf(fi)
	if e, ok := s.cached(ref.Job, path, key); ok {
		return e, nil
	}
	e := entry{key: key}
	h, err := erasure.Verify(f, fi.Size())
	switch {
	case err != nil:
		e.err = fmt.Errorf("parity file %s: %w", path, err)
	case h.Job != ref.Job || h.Epoch != ref.Epoch || h.Group != ref.Group || h.Index != ref.Row:
		e.err = fmt.Errorf("parity file %s: wrong parity: it holds %s/%d/parity/%d/%d", path, h.Job, h.Epoch, h.Group, h.Index)
	default:
		p := &shard.ParityInfo{Epoch: h.Epoch, Group: h.Group, Row: h.Index, K: h.K, M: h.M, Size: fi.Size()}
		for _, d := range h.Data {
			p.Ranks = append(p.Ranks, d.Rank)
			p.Sums = append(p.Sums, d.Sum)
		}
		p.Checksum, err = trailingSum(f, fi.Size())
		if err != nil {
			return entry{}, err
		}
		e.parity = p
	}
	s.remember(ref.Job, path, e)
	return e, nil
}

// trailingSum reads the checksum in the last 8 bytes of a verified file.
func trailingSum(f *os.File, size int64) (uint64, error) {
	var b [8]byte
	if _, err := f.ReadAt(b[:], size-8); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// indexParity verifies the parity file named name at path through the cache,
// and reports whether the name is a parity file's; one that fails
// verification (nil) is left out of the index (the coordinator counts only
// listed rows, and computes a missing one again).
func (s *Store) indexParity(dir *userdir.Dir, job string, epoch uint64, name, path string) (*shard.ParityInfo, bool) {
	group, row, ok := jobdir.ParseParityName(name)
	if !ok {
		return nil, false
	}
	// A stat when this version was verified before, as for shards (verifyIn).
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, true
	}
	e, ok := s.cached(job, path, keyOf(fi))
	if !ok {
		f, err := dir.Open(name)
		if err != nil {
			return nil, true
		}
		defer f.Close()
		if e, err = s.verifyParity(shard.ParityRef{Job: job, Epoch: epoch, Group: group, Row: row}, path, f); err != nil {
			return nil, true
		}
	}
	return e.parity, true
}

// OpenParity opens the local copy of a parity file after verifying it; the
// caller reads size bytes and closes it. Errors wrap errkind.NotFound and
// errkind.Corrupt as Open's do.
func (s *Store) OpenParity(ref shard.ParityRef) (*os.File, int64, error) {
	if err := checkJob(ref.Job); err != nil {
		return nil, 0, err
	}
	path := s.parityPath(ref)
	f, err := s.tree().Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: parity %s is not stored on this node: %w", errkind.NotFound, ref, os.ErrNotExist)
	}
	if err != nil {
		return nil, 0, err
	}
	e, err := s.verifyParity(ref, path, f)
	if err == nil && e.err != nil {
		err = fmt.Errorf("%w: parity %s on this node fails verification and is not served: %w", errkind.Corrupt, ref, e.err)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, e.parity.Size, nil
}

// groupHeader is the parity header of the group members form, row row of m.
func groupHeader(job string, epoch uint64, group, row, m int, members []api.Member) erasure.Header {
	h := erasure.Header{Job: job, Epoch: epoch, Group: group, Index: row, K: len(members), M: m}
	for _, d := range members {
		h.Data = append(h.Data, erasure.Member{Rank: d.Rank, Bytes: d.Bytes, Sum: d.Sum})
		h.Stripe = max(h.Stripe, d.Bytes)
	}
	return h
}

// sourceFailed words the failure of a node asked for a piece: its 404 and 422
// (it has no good copy) pass on as they are, anything else is a bad gateway.
func sourceFailed(what, from string, err error, parent context.Context) error {
	switch {
	case errors.Is(err, errkind.NotFound) || errors.Is(err, errkind.Corrupt):
		return fmt.Errorf("%s from %s: %w", what, from, err)
	case parent.Err() != nil:
		return fmt.Errorf("%s from %s: %w", what, from, parent.Err())
	default:
		return fmt.Errorf("%w: %s from %s: %v", errkind.BadGateway, what, from, err)
	}
}

// watchdog aborts ctx when no read of the readers it wraps returns data for
// the store's StallTimeout: a cut link otherwise blocks until TCP gives up.
type watchdog struct {
	t *time.Timer
	d time.Duration
}

func (s *Store) newWatchdog(cancel context.CancelCauseFunc) *watchdog {
	d := s.StallTimeout
	if d <= 0 {
		d = DefaultStallTimeout
	}
	return &watchdog{t: time.AfterFunc(d, func() { cancel(errStalled) }), d: d}
}

func (w *watchdog) wrap(r io.Reader) *progressReader { return &progressReader{r: r, t: w.t, d: w.d} }

// EncodeParity computes parity row req.Row of group req.Group of the job's
// shards of epoch from the group's data shards, read from the nodes req names
// (source returns the node at an API address), and stores it as a verified
// parity file. The rows req.Push lists are computed in the same pass, from the
// same reading of the shards, and each is sent to its node, which verifies and
// stores it: one node encoding a group for M nodes moves K shards and M−1 rows
// where each computing its own would move M·K shards. A push that fails is
// reported in the result; the row stored here stands. It streams: memory stays
// a few MiB per data shard whatever their size. Errors are as Fetch's.
func (s *Store) EncodeParity(ctx context.Context, job string, epoch uint64, req api.EncodeRequest, source func(addr string) PieceSource) (api.EncodeResult, error) {
	if err := checkJob(job); err != nil {
		return api.EncodeResult{}, err
	}
	ref := shard.ParityRef{Job: job, Epoch: epoch, Group: req.Group, Row: req.Row}
	h := groupHeader(job, epoch, req.Group, req.Row, req.M, req.Data)
	if err := h.Validate(); err != nil {
		return api.EncodeResult{}, fmt.Errorf("%w: parity %s: %v", errkind.BadRequest, ref, err)
	}
	if held, ok := s.heldRow(ref, req.Data); ok && len(req.Push) == 0 {
		return api.EncodeResult{ParityInfo: held}, nil
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := s.newWatchdog(cancel)
	defer dog.t.Stop()
	data := make([]io.Reader, len(req.Data))
	for i, d := range req.Data {
		sref := shard.Ref{Job: job, Epoch: epoch, Rank: d.Rank}
		rc, _, err := s.getShard(ctx, sref, source(d.From))
		if err != nil {
			return api.EncodeResult{}, sourceFailed("parity "+ref.String()+": read shard "+sref.String(), d.From, err, parent)
		}
		defer rc.Close()
		data[i] = dog.wrap(rc)
	}
	// The rows to push are written to unlisted files in the epoch's directory
	// as the row kept here is: a push is signed with its body's hash, known
	// only once the row is complete.
	pushed, err := s.pushFiles(ref, len(req.Push))
	defer func() {
		for _, f := range pushed {
			f.Close()
			s.tree().Remove(f.Name())
		}
	}()
	if err != nil {
		return api.EncodeResult{}, err
	}
	e, err := s.commit(ref.Job, s.parityPath(ref), "", ref.Epoch, streamed(func(w io.Writer) error {
		ws, rows := []io.Writer{w}, []int{req.Row}
		for i, p := range req.Push {
			ws, rows = append(ws, pushed[i]), append(rows, p.Row)
		}
		_, err := erasure.EncodeRows(ws, rows, h, data)
		return err
	}), func(path string, f *os.File) (entry, error) { return s.verifyParity(ref, path, f) })
	if err != nil {
		if errors.Is(context.Cause(ctx), errStalled) && parent.Err() == nil {
			return api.EncodeResult{}, fmt.Errorf("%w: parity %s: a data shard's transfer stalled", errkind.BadGateway, ref)
		}
		return api.EncodeResult{}, fmt.Errorf("%w: parity %s: %v", errkind.BadGateway, ref, err)
	}
	res := api.EncodeResult{ParityInfo: *e.parity, Pushed: make([]api.Pushed, len(req.Push))}
	var wg sync.WaitGroup
	for i, p := range req.Push {
		res.Pushed[i] = api.Pushed{Row: p.Row, To: p.To}
		wg.Add(1)
		go func(out *api.Pushed, f *os.File) {
			defer wg.Done()
			pref := ref
			pref.Row = out.Row
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				out.Error = err.Error()
				return
			}
			if _, err := source(out.To).PutParity(parent, pref, f); err != nil {
				out.Error = err.Error()
			}
		}(&res.Pushed[i], pushed[i])
	}
	wg.Wait()
	return res, nil
}

// heldRow returns row ref as stored here when it verifies and was computed
// from the shards data names (ranks and checksums): asking again for a row
// already made, as a coordinator whose view of this node lags may, costs a
// file check, not the group's shards read again.
func (s *Store) heldRow(ref shard.ParityRef, data []api.Member) (shard.ParityInfo, bool) {
	f, _, err := s.OpenParity(ref)
	if err != nil {
		return shard.ParityInfo{}, false
	}
	defer f.Close()
	e, err := s.verifyParity(ref, s.parityPath(ref), f)
	if err != nil || e.parity == nil || len(e.parity.Ranks) != len(data) {
		return shard.ParityInfo{}, false
	}
	for i, d := range data {
		if e.parity.Ranks[i] != d.Rank || e.parity.Sums[i] != d.Sum {
			return shard.ParityInfo{}, false
		}
	}
	return *e.parity, true
}

// pushFiles creates n unlisted files beside ref's parity file, for the rows
// an encoding node computes for others; the caller removes them.
func (s *Store) pushFiles(ref shard.ParityRef, n int) ([]*os.File, error) {
	if n == 0 {
		return nil, nil
	}
	if err := s.mkdirs(shard.Ref{Job: ref.Job, Epoch: ref.Epoch}); err != nil {
		return nil, err
	}
	var fs []*os.File
	for range n {
		f, err := s.tree().CreateTemp(filepath.Dir(s.parityPath(ref)), jobdir.ParityName(ref.Group, ref.Row)+".push-*.tmp")
		if err != nil {
			return fs, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// PutParity stores a parity row another node computed, as Put stores a
// shard: written to a temporary file, verified as row ref (its header must
// name ref), then renamed into place.
func (s *Store) PutParity(ref shard.ParityRef, r io.Reader) (shard.ParityInfo, error) {
	if err := checkJob(ref.Job); err != nil {
		return shard.ParityInfo{}, err
	}
	e, err := s.commit(ref.Job, s.parityPath(ref), "", ref.Epoch, streamed(func(w io.Writer) error {
		if _, err := io.Copy(w, r); err != nil {
			return &readFailure{err}
		}
		return nil
	}), func(path string, f *os.File) (entry, error) { return s.verifyParity(ref, path, f) })
	var vf *verifyFailure
	var rf *readFailure
	switch {
	case errors.As(err, &vf):
		return shard.ParityInfo{}, fmt.Errorf("%w: parity %s rejected, nothing stored: %w", errkind.BadRequest, ref, vf.err)
	case errors.As(err, &rf) && errors.Is(rf.err, errkind.Unauthorized):
		return shard.ParityInfo{}, rf.err
	case errors.As(err, &rf):
		return shard.ParityInfo{}, fmt.Errorf("%w: reading parity %s: %w", errkind.BadRequest, ref, rf.err)
	case err != nil:
		return shard.ParityInfo{}, err
	}
	return *e.parity, nil
}
