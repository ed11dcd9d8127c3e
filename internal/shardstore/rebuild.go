package shardstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"shoal/internal/api"
	"shoal/internal/erasure"
	"shoal/internal/errkind"
	"shoal/internal/shard"
)

// RebuildShard rebuilds ref's shard from the other pieces of its parity group
// that req names (data shards with a source, parity rows), read from their
// nodes, and stores it after verifying it as Put does: the rebuilt shard must
// verify and carry the checksum the group recorded. A verified local copy
// makes it a no-op.
//
// It reads K of the pieces offered, data shards first (they need no decoding
// of their own). A piece that cannot be opened (its node unreachable, or
// silent for the stall timeout, or without a good copy) is passed over for
// the next one offered: a coordinator offers every piece it counts on a live
// node, and a node it still counts may have died since. Errors are as Fetch's;
// a rebuild left short of pieces by nodes that did not answer is an
// *errkind.NoAnswer naming them, for the coordinator to count them lost.
func (s *Store) RebuildShard(ctx context.Context, ref shard.Ref, req api.RebuildRequest, source func(addr string) PieceSource) (api.Fetched, error) {
	if err := checkRef(ref); err != nil {
		return api.Fetched{}, err
	}
	if info, err := s.Stat(ref); err == nil {
		return api.Fetched{Shard: info}, nil
	}
	h := groupHeader(ref.Job, ref.Epoch, req.Group, 0, req.M, req.Data)
	if err := h.Validate(); err != nil {
		return api.Fetched{}, fmt.Errorf("%w: rebuild shard %s: %v", errkind.BadRequest, ref, err)
	}
	want := slices.IndexFunc(req.Data, func(d api.Member) bool { return d.Rank == ref.Rank })
	if want < 0 {
		return api.Fetched{}, fmt.Errorf("%w: rebuild shard %s: rank %d is not a member of group %d", errkind.BadRequest, ref, ref.Rank, req.Group)
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pieces, err := s.openPieces(ctx, ref, s.pieceOffers(ref, req, want, source), h.K)
	for _, p := range pieces {
		defer p.R.(io.Closer).Close()
	}
	if err != nil {
		if parent.Err() != nil {
			return api.Fetched{}, fmt.Errorf("rebuild shard %s: %w", ref, parent.Err())
		}
		return api.Fetched{}, err
	}
	dog := s.newWatchdog(cancel)
	defer dog.t.Stop()
	for i := range pieces {
		pieces[i].R = dog.wrap(pieces[i].R)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(erasure.Rebuild(pw, h, want, pieces)) }()
	info, err := s.put(ref, pr, h.Data[want].Bytes)
	pr.CloseWithError(errors.New("rebuild abandoned")) // ends the goroutine if put stopped early
	var vf *verifyFailure
	var rf *readFailure
	switch {
	case errors.As(err, &vf):
		return api.Fetched{}, fmt.Errorf("%w: shard %s rebuilt from its group fails verification, not stored: %w", errkind.Corrupt, ref, vf.err)
	case errors.As(err, &rf) && errors.Is(context.Cause(ctx), errStalled) && parent.Err() == nil:
		return api.Fetched{}, fmt.Errorf("%w: rebuild shard %s: a piece's transfer stalled", errkind.BadGateway, ref)
	case errors.As(err, &rf) && parent.Err() != nil:
		return api.Fetched{}, fmt.Errorf("rebuild shard %s: %w", ref, parent.Err())
	case errors.As(err, &rf) && errors.Is(rf.err, erasure.ErrCorrupt):
		return api.Fetched{}, fmt.Errorf("%w: rebuild shard %s: %v", errkind.Corrupt, ref, rf.err)
	case errors.As(err, &rf):
		return api.Fetched{}, fmt.Errorf("%w: rebuild shard %s: %v", errkind.BadGateway, ref, rf.err)
	case err != nil:
		return api.Fetched{}, fmt.Errorf("rebuild shard %s: %w", ref, err)
	}
	return api.Fetched{Shard: info, Copied: true}, nil
}

// pieceOffer is one piece of a group a rebuild may read: what it is ("shard
// j/3/1"), the node that holds it, and how to open it there.
type pieceOffer struct {
	what  string
	from  string
	piece erasure.Piece // its place in the group; R is set once open
	open  func(ctx context.Context) (io.ReadCloser, error)
}

// pieceOffers lists the pieces req offers for rebuilding member want, in the
// order they are tried: the data shards with a source, then the parity rows.
func (s *Store) pieceOffers(ref shard.Ref, req api.RebuildRequest, want int, source func(addr string) PieceSource) []pieceOffer {
	var out []pieceOffer
	for i, d := range req.Data {
		if i == want || d.From == "" {
			continue
		}
		sref := shard.Ref{Job: ref.Job, Epoch: ref.Epoch, Rank: d.Rank}
		src := source(d.From)
		out = append(out, pieceOffer{what: "shard " + sref.String(), from: d.From, piece: erasure.Piece{Member: i},
			open: func(ctx context.Context) (io.ReadCloser, error) {
				rc, _, err := s.getShard(ctx, sref, src)
				return rc, err
			}})
	}
	for _, p := range req.Parity {
		pref := shard.ParityRef{Job: ref.Job, Epoch: ref.Epoch, Group: req.Group, Row: p.Row}
		src := source(p.From)
		out = append(out, pieceOffer{what: "parity " + pref.String(), from: p.From, piece: erasure.Piece{Parity: true, Row: p.Row},
			open: func(ctx context.Context) (io.ReadCloser, error) {
				rc, _, err := src.GetParity(ctx, pref)
				return rc, err
			}})
	}
	return out
}

// pieceFailure is an offered piece that could not be opened, and why.
type pieceFailure struct {
	offer    pieceOffer
	err      error
	noAnswer bool // its node was unreachable or silent
}

// openPieces opens k of offers in their order, passing over those that fail,
// and returns them open (each R an io.ReadCloser, closed by the caller, even
// with an error). It fails when fewer than k open, naming each failure.
func (s *Store) openPieces(ctx context.Context, ref shard.Ref, offers []pieceOffer, k int) ([]erasure.Piece, error) {
	var pieces []erasure.Piece
	var failed []pieceFailure
	for _, o := range offers {
		if len(pieces) == k {
			break
		}
		rc, silent, err := s.openPiece(ctx, o.open)
		if err != nil {
			if ctx.Err() != nil {
				return pieces, ctx.Err()
			}
			failed = append(failed, pieceFailure{offer: o, err: err, noAnswer: silent || errors.Is(err, errkind.Unreachable)})
			continue
		}
		p := o.piece
		p.R = rc
		pieces = append(pieces, p)
	}
	if len(pieces) < k {
		return pieces, shortOfPieces(ref, k, len(pieces), failed)
	}
	return pieces, nil
}

// openPiece opens a piece, giving its node the stall timeout to answer: a
// node that went away behind a cut link otherwise holds the rebuild until TCP
// gives up. silent reports that the time ran out.
func (s *Store) openPiece(ctx context.Context, open func(context.Context) (io.ReadCloser, error)) (rc io.ReadCloser, silent bool, err error) {
	octx, cancel := context.WithCancelCause(ctx)
	dog := s.newWatchdog(cancel)
	rc, err = open(octx)
	if !dog.t.Stop() && err == nil {
		rc.Close() // opened as the time ran out: its context is gone
		err = octx.Err()
	}
	if err != nil {
		cancel(nil)
		if errors.Is(context.Cause(octx), errStalled) && ctx.Err() == nil {
			return nil, true, fmt.Errorf("no answer for %v", dog.d)
		}
		return nil, false, err
	}
	return cancelOnClose{rc, cancel}, false, nil
}

// cancelOnClose is a piece's stream that ends its context when closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// shortOfPieces is the error of a rebuild that could open only got of the k
// pieces it needs. It is a bad gateway when a node failed otherwise than by
// holding no good copy (an *errkind.NoAnswer when nodes did not answer), else
// the first failure's kind: not found, or corrupt.
func shortOfPieces(ref shard.Ref, k, got int, failed []pieceFailure) error {
	if len(failed) == 0 {
		return fmt.Errorf("%w: rebuild shard %s: %d pieces offered, %d needed", errkind.BadRequest, ref, got, k)
	}
	var why, silent []string
	kind := error(nil)
	for _, f := range failed {
		why = append(why, fmt.Sprintf("%s from %s: %v", f.offer.what, f.offer.from, f.err))
		if f.noAnswer {
			silent = append(silent, f.offer.from)
		}
		held := errors.Is(f.err, errkind.NotFound) || errors.Is(f.err, errkind.Corrupt)
		switch {
		case !held:
			kind = errkind.BadGateway
		case kind == nil && errors.Is(f.err, errkind.NotFound):
			kind = errkind.NotFound
		case kind == nil:
			kind = errkind.Corrupt
		}
	}
	err := fmt.Errorf("%w: rebuild shard %s: read %d of the %d pieces it needs: %s", kind, ref, got, k, strings.Join(why, "; "))
	if len(silent) > 0 {
		return &errkind.NoAnswer{Addrs: silent, Err: err}
	}
	return err
}
