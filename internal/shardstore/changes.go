package shardstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/zeebo/xxh3"

	"shoal/internal/api"
)

// A copy of a shard whose receiver holds the rank's shard of an earlier epoch
// crosses the network as its changes: the blocks of BlockSize bytes whose
// XXH3-64 differs from the earlier shard's block at the same offset
// (docs/api.md, POST /v1/shards/{job}/{epoch}/{rank}/changes). A state with
// parts that stay as they were between checkpoints (a mesh, tables, a
// converged field) pays for those parts once. The receiver assembles the new
// shard from the blocks that arrive and its own copy of the rest, and
// verifies every byte of the result as it would a whole copy: a block that
// hashed alike but differs, or an earlier copy damaged since it was
// verified, fails that verification, and the shard is then copied whole.

// BlockSize is the length of the blocks a shard's changes are counted in: the
// last block of a shard may be shorter.
const BlockSize = api.ShardBlockSize

// blockSums is an io.Writer that hashes what it is given in blocks of
// BlockSize: the XXH3-64 (seed 0) of each, the last one possibly shorter.
type blockSums struct {
	h    *xxh3.Hasher
	n    int // bytes of the current block so far
	sums []uint64
}

func newBlockSums() *blockSums { return &blockSums{h: xxh3.New()} }

func (b *blockSums) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if b.n == 0 && len(p) >= BlockSize {
			// A whole block at once: one call, no state kept.
			b.sums = append(b.sums, xxh3.Hash(p[:BlockSize]))
			p = p[BlockSize:]
			continue
		}
		k := min(len(p), BlockSize-b.n)
		b.h.Write(p[:k])
		b.n += k
		p = p[k:]
		if b.n == BlockSize {
			b.sums = append(b.sums, b.h.Sum64())
			b.h.Reset()
			b.n = 0
		}
	}
	return total, nil
}

// Sums returns the blocks' sums, the partial last block's included.
func (b *blockSums) Sums() []uint64 {
	if b.n > 0 {
		b.sums = append(b.sums, b.h.Sum64())
		b.h.Reset()
		b.n = 0
	}
	return b.sums
}

// blockCount is the number of blocks of a shard of size bytes.
func blockCount(size int64) int { return int((size + BlockSize - 1) / BlockSize) }

// changedBlocks returns the bitmap of the blocks of a shard whose sums are
// sums that differ from base, a shard's sums at the same offsets: bit i (byte
// i/8, bit i%8 from the least significant) is set when block i is sent. A
// block beyond base is always sent.
func changedBlocks(sums, base []uint64) []byte {
	bits := make([]byte, (len(sums)+7)/8)
	for i, s := range sums {
		if i >= len(base) || base[i] != s {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	return bits
}

func sent(bits []byte, i int) bool { return bits[i/8]&(1<<(i%8)) != 0 }

// OpenChanges is OpenToSend for a receiver that holds an earlier shard of
// ref's rank whose blocks have the sums base: r yields the bitmap of the
// blocks sent (changedBlocks), then those blocks of the shard in order, n
// bytes in all; size is the shard's. The caller closes r. Errors are as for
// Open.
func (s *Store) OpenChanges(ref api.ShardRef, link float64, base []uint64) (r io.ReadCloser, size, n int64, compressIt bool, err error) {
	f, e, compressIt, err := s.openToSend(ref, link)
	if err != nil {
		return nil, 0, 0, false, err
	}
	bits := changedBlocks(e.blocks, base)
	parts := []io.Reader{bytes.NewReader(bits)}
	n = int64(len(bits))
	for i := 0; i < len(e.blocks); {
		if !sent(bits, i) {
			i++
			continue
		}
		j := i + 1
		for j < len(e.blocks) && sent(bits, j) {
			j++
		}
		off, end := int64(i)*BlockSize, min(int64(j)*BlockSize, e.info.Size)
		parts = append(parts, io.NewSectionReader(f, off, end-off))
		n += end - off
		i = j
	}
	return readCloser{io.MultiReader(parts...), f}, e.info.Size, n, compressIt, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// ChangesSource is a LinkSource that can send a shard as its changes since a
// shard whose blocks have the sums base (link as for GetShardOver, 0 when
// unknown): r yields what [Store.OpenChanges] does, decoded; size is the
// shard's. *api.Client is one.
type ChangesSource interface {
	LinkSource
	GetShardChanges(ctx context.Context, ref api.ShardRef, link float64, base []uint64) (r io.ReadCloser, size int64, err error)
}

var _ ChangesSource = (*api.Client)(nil)

// base returns the newest shard of ref's rank on this node from an epoch
// before ref's, verified and unchanged since, opened, with its epoch and its
// blocks' sums; ok is false when there is none.
func (s *Store) base(ref api.ShardRef) (f *os.File, epoch uint64, sums []uint64, ok bool) {
	s.mu.Lock()
	var path string
	var best entry
	for p, e := range s.cache[ref.Job] {
		if e.err == nil && e.blocks != nil && e.info.Rank == ref.Rank && e.info.Epoch < ref.Epoch && e.info.Epoch > best.info.Epoch {
			path, best = p, e
		}
	}
	s.mu.Unlock()
	if path == "" {
		return nil, 0, nil, false
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, false
	}
	if fi, err := f.Stat(); err != nil || keyOf(fi) != best.key {
		f.Close()
		return nil, 0, nil, false
	}
	return f, best.info.Epoch, best.blocks, true
}

// logWhole tells Log that ref, asked of src as its changes, is copied whole
// because of err.
func (s *Store) logWhole(level slog.Level, ref api.ShardRef, src Source, err error) {
	if s.Log != nil {
		s.Log.Log(context.Background(), level, "shard's changes not used; copying it whole", "shard", ref.String(), "from", src.Addr(), "err", err)
	}
}

// assembled yields a shard of size bytes from its changes since base (whose
// blocks' sums the source was given): the bitmap and the blocks sent, read
// from body, and the others read from base.
type assembled struct {
	body io.Reader
	base *os.File
	nb   int // blocks of base the source was told of
	size int64
	bits []byte
	off  int64 // bytes of the shard yielded so far
	sent int64 // bytes read from body
	what string
}

func (a *assembled) Read(p []byte) (int, error) {
	if a.bits == nil {
		a.bits = make([]byte, (blockCount(a.size)+7)/8)
		if _, err := io.ReadFull(a.body, a.bits); err != nil {
			return 0, fmt.Errorf("%s: reading the blocks' bitmap: %w", a.what, err)
		}
		a.sent = int64(len(a.bits))
	}
	if a.off == a.size {
		// Nothing may follow the last block.
		var one [1]byte
		if k, err := a.body.Read(one[:]); k > 0 || (err != nil && err != io.EOF) {
			if err == nil || err == io.EOF {
				err = errors.New("more bytes than its blocks")
			}
			return 0, fmt.Errorf("%s: %w", a.what, err)
		}
		return 0, io.EOF
	}
	i := int(a.off / BlockSize)
	end := min(int64(i+1)*BlockSize, a.size)
	p = p[:min(int64(len(p)), end-a.off)]
	var k int
	var err error
	if sent(a.bits, i) {
		k, err = a.body.Read(p)
		a.sent += int64(k)
		switch {
		case err == io.EOF && k > 0:
			err = nil // the next read tells whether the body ended early
		case err == io.EOF:
			err = fmt.Errorf("%s: ends in block %d: %w", a.what, i, io.ErrUnexpectedEOF)
		}
	} else {
		if i >= a.nb {
			return 0, fmt.Errorf("%s: block %d not sent and not in the earlier shard's %d", a.what, i, a.nb)
		}
		k, err = a.base.ReadAt(p, a.off)
		if err == io.EOF && k == len(p) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("%s: reading block %d of the earlier shard: %w", a.what, i, err)
		}
	}
	a.off += int64(k)
	return k, err
}

// fetchChanges is Fetch's first try when this node holds an earlier shard of
// ref's rank and src can send changes: the shard assembled from them and
// stored. done is false when it was not tried or failed; then Fetch copies
// the shard whole, and reports any failure of that (a source gone, a stall,
// the caller's cancellation) as its own.
func (s *Store) fetchChanges(ctx context.Context, ref api.ShardRef, src Source, dog *watchdog) (f api.Fetched, done bool) {
	cs, ok := src.(ChangesSource)
	if !ok {
		return api.Fetched{}, false
	}
	base, baseEpoch, sums, ok := s.base(ref)
	if !ok {
		return api.Fetched{}, false
	}
	defer base.Close()
	var link float64
	if s.LinkRate != nil {
		link = s.LinkRate(src.Addr())
	}
	rc, size, err := cs.GetShardChanges(ctx, ref, link, sums)
	if err != nil {
		s.logWhole(slog.LevelInfo, ref, src, err)
		return api.Fetched{}, false
	}
	defer rc.Close()
	a := &assembled{body: rc, base: base, nb: len(sums), size: size, what: fmt.Sprintf("changes of shard %s from %s", ref, src.Addr())}
	info, err := s.put(ref, dog.wrap(a), size)
	var vf *verifyFailure
	switch {
	case errors.As(err, &vf):
		s.logWhole(slog.LevelWarn, ref, src, fmt.Errorf("the shard assembled from them fails verification (this node's shard of epoch %d changed since it was verified?): %w", baseEpoch, err))
		return api.Fetched{}, false
	case err != nil:
		s.logWhole(slog.LevelInfo, ref, src, err)
		return api.Fetched{}, false
	}
	wire := a.sent // what a body that does not count its compressed bytes carried
	if w, ok := rc.(interface{ Wire() int64 }); ok {
		wire = w.Wire()
	}
	return api.Fetched{Shard: info, Copied: true, Wire: wire, Changed: a.sent}, true
}
