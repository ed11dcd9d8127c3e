package shardstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/zeebo/xxh3"

	"shoal/internal/api"
	"shoal/internal/shard"
)

// A copy of a shard whose receiver holds the rank's shard of an earlier epoch
// crosses the network as its changes: the blocks of BlockSize bytes whose
// XXH3-64 differs from the earlier shard's block at the same offset
// (docs/api.md, POST /v1/shards/{job}/{epoch}/{rank}/changes), each with its
// sum. A state with parts that stay as they were between checkpoints (a mesh,
// tables, a converged field) pays for those parts once on the network, and
// once on the receiver's disk: the receiver writes the new shard over the
// rank's spare, an older shard of the rank (patch), and writes only the
// blocks whose sums differ from the spare's, taken from what arrives and from
// its copy of the earlier shard. Each block written is checked against its
// sum, and each sum against the holder's, which the holder took as it
// verified its shard; a block that differs from its sum (an earlier copy
// damaged since it was verified, bytes changed on the holder after its
// verification) ends the attempt, and the shard is then copied whole.

// BlockSize is the length of the blocks a shard's changes are counted in: the
// last block of a shard may be shorter.
const BlockSize = shard.BlockSize

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
// blocks sent (changedBlocks), the sums of those blocks (8 bytes each, little
// endian), then those blocks of the shard in order, n bytes in all; size is
// the shard's. The caller closes r. Errors are as for Open.
func (s *Store) OpenChanges(ref shard.Ref, link float64, base []uint64) (r io.ReadCloser, size, n int64, compressIt bool, err error) {
	f, e, compressIt, err := s.openToSend(ref, link)
	if err != nil {
		return nil, 0, 0, false, err
	}
	bits := changedBlocks(e.blocks, base)
	var sums []byte
	for i, sum := range e.blocks {
		if sent(bits, i) {
			sums = binary.LittleEndian.AppendUint64(sums, sum)
		}
	}
	parts := []io.Reader{bytes.NewReader(bits), bytes.NewReader(sums)}
	n = int64(len(bits) + len(sums))
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
	GetShardChanges(ctx context.Context, ref shard.Ref, link float64, base []uint64) (r io.ReadCloser, size int64, err error)
}

var _ ChangesSource = (*api.Client)(nil)

// base returns the newest shard of ref's rank on this node from an epoch
// before ref's, verified and unchanged since, opened, with its epoch and its
// blocks' sums; ok is false when there is none. The rank's spare is not one:
// the shard is written over it.
func (s *Store) base(ref shard.Ref) (f *os.File, epoch uint64, sums []uint64, ok bool) {
	s.mu.Lock()
	path, best := s.newestEarlierLocked(ref, func(p string, e entry) bool {
		return !isSpare(p) && e.err == nil && e.blocks != nil
	})
	s.mu.Unlock()
	if path == "" {
		return nil, 0, nil, false
	}
	f, err := s.tree().Open(path)
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
func (s *Store) logWhole(level slog.Level, ref shard.Ref, src Source, err error) {
	if s.Log != nil {
		s.Log.Log(context.Background(), level, "shard's changes not used; copying it whole", "shard", ref.String(), "from", src.Addr(), "err", err)
	}
}

// A block of a shard being stored from its changes comes from one of three
// places (plan).
type blockSource uint8

const (
	fromBody  blockSource = iota // sent
	fromSpare                    // already in the file written over
	fromBase                     // copied from this node's earlier shard
)

// changesHead is what precedes the blocks in the body of a shard's changes:
// the bitmap of the blocks sent, and each sent block's sum.
type changesHead struct {
	bits []byte
	sent []uint64 // by block sent, in order
}

// readChangesHead reads the bitmap and the sums of the blocks sent of a shard
// of n blocks.
func readChangesHead(body io.Reader, n int) (changesHead, error) {
	h := changesHead{bits: make([]byte, (n+7)/8)}
	if _, err := io.ReadFull(body, h.bits); err != nil {
		return h, fmt.Errorf("reading the blocks' bitmap: %w", err)
	}
	k := 0
	for i := range len(h.bits) * 8 {
		if sent(h.bits, i) {
			if i >= n {
				return h, fmt.Errorf("the bitmap sends block %d of a shard of %d", i, n)
			}
			k++
		}
	}
	raw := make([]byte, 8*k)
	if _, err := io.ReadFull(body, raw); err != nil {
		return h, fmt.Errorf("reading the sums of the %d blocks sent: %w", k, err)
	}
	for len(raw) > 0 {
		h.sent = append(h.sent, binary.LittleEndian.Uint64(raw))
		raw = raw[8:]
	}
	return h, nil
}

// sums returns the new shard's blocks' sums: those sent for the blocks sent,
// base's (the earlier shard's) for the others. A block neither sent nor in
// base is an error.
func (h changesHead) sums(n int, base []uint64) ([]uint64, error) {
	out := make([]uint64, n)
	next := 0
	for i := range out {
		switch {
		case sent(h.bits, i):
			out[i] = h.sent[next]
			next++
		case i < len(base):
			out[i] = base[i]
		default:
			return nil, fmt.Errorf("block %d not sent and not in the earlier shard's %d", i, len(base))
		}
	}
	return out, nil
}

// plan says where each block of a new shard of size bytes with the sums want
// comes from, written over a spare of spareSize bytes whose blocks have the
// sums spare (none when the file is new): the body when it was sent, the
// spare when the spare's block has the same sum and length, else the earlier
// shard. A state whose changing part is the same at every checkpoint writes
// only that part.
func plan(bits []byte, size int64, want, spare []uint64, spareSize int64) []blockSource {
	out := make([]blockSource, len(want))
	for i := range want {
		off := int64(i) * BlockSize
		switch {
		case sent(bits, i):
			out[i] = fromBody
		case i < len(spare) && spare[i] == want[i] && min(BlockSize, spareSize-off) == min(BlockSize, size-off):
			out[i] = fromSpare
		default:
			out[i] = fromBase
		}
	}
	return out
}

// patch stores ref, of size bytes, from body, its changes since base (this
// node's shard of an earlier epoch, whose blocks have the sums baseSums). The
// file is written over the rank's spare when there is one (commit), and only
// the blocks that differ from the spare's are written: those sent, checked
// against the sums the holder sent with them, and those copied from base,
// checked against base's sums. The result is verified by its blocks' sums,
// each equal to that of the holder's verified shard, and by its header.
// Blocks kept from the spare are trusted by the sums recorded when the spare
// was verified; a spare damaged in place since, with its size and time kept,
// carries the damage into the copy, which is then found when a restart reads
// it (every reader verifies).
func (s *Store) patch(ref shard.Ref, body io.Reader, base *os.File, baseSums []uint64, size int64, what string) (shard.Info, error) {
	if err := checkRef(ref); err != nil {
		return shard.Info{}, err
	}
	n := blockCount(size)
	if size < shard.HeaderSize+shard.TrailerSize || n > api.MaxChangesBlocks {
		return shard.Info{}, fmt.Errorf("%s: a shard of %d bytes cannot be sent as changes", what, size)
	}
	head, err := readChangesHead(body, n)
	if err != nil {
		return shard.Info{}, fmt.Errorf("%s: %w", what, err)
	}
	want, err := head.sums(n, baseSums)
	if err != nil {
		return shard.Info{}, fmt.Errorf("%s: %w", what, err)
	}
	sparePath := s.jobDir(ref.Job).SparePath(ref.Rank)
	write := func(f *os.File, reused bool) (int64, error) {
		var spare []uint64
		var spareSize int64
		if reused {
			if fi, err := f.Stat(); err == nil {
				if e, ok := s.cached(ref.Job, sparePath, keyOf(fi)); ok && e.err == nil {
					spare, spareSize = e.blocks, e.info.Size
				}
			}
		}
		buf := make([]byte, BlockSize)
		for i, from := range plan(head.bits, size, want, spare, spareSize) {
			off := int64(i) * BlockSize
			b := buf[:min(BlockSize, size-off)]
			switch from {
			case fromSpare:
				continue
			case fromBody:
				if _, err := io.ReadFull(body, b); err != nil {
					return 0, &readFailure{fmt.Errorf("%s: ends in block %d: %w", what, i, err)}
				}
				if xxh3.Hash(b) != want[i] {
					return 0, &verifyFailure{fmt.Errorf("%s: block %d differs from its sum: %w", what, i, shard.ErrChecksum)}
				}
			case fromBase:
				if _, err := base.ReadAt(b, off); err != nil {
					return 0, fmt.Errorf("%s: reading block %d of the earlier shard: %w", what, i, err)
				}
				if xxh3.Hash(b) != want[i] {
					return 0, &verifyFailure{fmt.Errorf("%s: block %d of the earlier shard differs from its sum: %w", what, i, shard.ErrChecksum)}
				}
			}
			if _, err := f.WriteAt(b, off); err != nil {
				return 0, fmt.Errorf("writing shard %s: %w", ref, err)
			}
		}
		// Nothing may follow the last block.
		var one [1]byte
		if k, err := body.Read(one[:]); k > 0 || (err != nil && err != io.EOF) {
			if err == nil || err == io.EOF {
				err = errors.New("more bytes than its blocks")
			}
			return 0, &readFailure{fmt.Errorf("%s: %w", what, err)}
		}
		return size, nil
	}
	verify := func(path string, f *os.File) (entry, error) {
		fi, err := f.Stat()
		if err != nil {
			return entry{}, err
		}
		h, sum, err := readHeadAndSum(f, size)
		if err != nil && shard.ShortName(err) != "" {
			return s.record(ref, path, fi, h, 0, nil, &verifyFailure{err})
		}
		if err != nil {
			return entry{}, err
		}
		return s.record(ref, path, fi, h, sum, want, nil)
	}
	e, err := s.commit(ref.Job, s.path(ref), sparePath, ref.Epoch, write, verify)
	return e.info, err
}

// fetchChanges is Fetch's first try when this node holds an earlier shard of
// ref's rank and src can send changes: the shard stored from them (patch).
// done is false when it was not tried or failed; then Fetch copies the shard
// whole, and reports any failure of that (a source gone, a stall, the
// caller's cancellation) as its own.
func (s *Store) fetchChanges(ctx context.Context, ref shard.Ref, src Source, dog *watchdog) (f api.Fetched, done bool) {
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
	body := dog.wrap(rc)
	info, err := s.patch(ref, body, base, sums, size, fmt.Sprintf("changes of shard %s from %s", ref, src.Addr()))
	var vf *verifyFailure
	switch {
	case errors.As(err, &vf):
		s.logWhole(slog.LevelWarn, ref, src, fmt.Errorf("the shard stored from them fails verification (this node's shard of epoch %d changed since it was verified?): %w", baseEpoch, err))
		return api.Fetched{}, false
	case err != nil:
		s.logWhole(slog.LevelInfo, ref, src, err)
		return api.Fetched{}, false
	}
	wire := body.n // what a body that does not count its compressed bytes carried
	if w, ok := rc.(interface{ Wire() int64 }); ok {
		wire = w.Wire()
	}
	return api.Fetched{Shard: info, Copied: true, Wire: wire, Changed: body.n}, true
}
