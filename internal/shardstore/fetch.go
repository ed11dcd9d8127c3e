package shardstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/shard"
)

// Copying a shard from another node.

// errStalled is the cause of a fetch aborted by Store.StallTimeout.
var errStalled = errors.New("stalled")

// Fetch makes sure this node holds a verified copy of ref, copying it from src
// when it has none (a corrupt local copy is replaced). It reports whether bytes
// were copied. Errors: the source's 404 and 422 (it has no good copy) are
// passed on as errkind.NotFound and errkind.Corrupt; bytes that arrive but fail
// verification wrap errkind.Corrupt and the ckpt sentinel; any other failure of
// the source or of the transfer, a compressed stream that fails to decode
// included, wraps errkind.BadGateway. Messages name the source. With LinkRate
// set, a [LinkSource] is told the link's bandwidth and may send the shard
// compressed; what arrives is verified all the same. When this node holds a
// verified shard of ref's rank from an earlier epoch and src is a
// [ChangesSource], the shard is first asked for as its changes since that one
// (changes.go); when that fails in any way, it is copied whole.
func (s *Store) Fetch(ctx context.Context, ref shard.Ref, src Source) (api.Fetched, error) {
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
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: no answer for %v", errkind.BadGateway, ref, from, stall)
	case err != nil && (errors.Is(err, errkind.NotFound) || errors.Is(err, errkind.Corrupt)):
		return api.Fetched{}, fmt.Errorf("fetch shard %s from %s: %w", ref, from, err)
	case err != nil && parent.Err() != nil:
		return api.Fetched{}, fmt.Errorf("fetch shard %s from %s: %w", ref, from, parent.Err())
	case err != nil:
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: %v", errkind.BadGateway, ref, from, err)
	}
	defer rc.Close()
	info, err := s.put(ref, dog.wrap(rc), size)
	var vf *verifyFailure
	var rf *readFailure
	switch {
	case errors.As(err, &vf):
		return api.Fetched{}, fmt.Errorf("%w: shard %s fetched from %s fails verification, not stored: %w", errkind.Corrupt, ref, from, vf.err)
	case errors.As(err, &rf) && stalled():
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: transfer stalled, no data for %v", errkind.BadGateway, ref, from, stall)
	case errors.As(err, &rf) && parent.Err() != nil:
		return api.Fetched{}, fmt.Errorf("fetch shard %s from %s: %w", ref, from, parent.Err())
	case errors.As(err, &rf):
		// A compressed stream that fails to decode ends here too: the source's
		// copy was verified before it was sent, so the damage is the transfer's.
		return api.Fetched{}, fmt.Errorf("%w: fetch shard %s from %s: transfer failed: %v", errkind.BadGateway, ref, from, rf.err)
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
func (s *Store) getShard(ctx context.Context, ref shard.Ref, src Source) (io.ReadCloser, int64, error) {
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
