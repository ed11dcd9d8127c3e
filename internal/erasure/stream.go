package erasure

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/reedsolomon"
	"github.com/zeebo/xxh3"
)

// ChunkSize is how many bytes of each piece [Encode] and [Rebuild] hold at a time.
const ChunkSize = 1 << 20 // bytes per shard per step

// Encode writes the parity file h describes (row h.Index) to w, reading the K data
// shard files from data[i], each exactly h.Data[i].Bytes bytes long and ending in
// h.Data[i].Sum; a stream that differs is an [ErrMismatch] naming the rank. It reads
// [ChunkSize] bytes per shard at a time, so memory stays (K+M)·ChunkSize whatever the
// shards' sizes, and returns the parity file's checksum.
//
// The checksum is written last, after every data stream has been checked, so a failed
// Encode never leaves a parity file that verifies.
func Encode(w io.Writer, h Header, data []io.Reader) (sum uint64, err error) {
	sums, err := EncodeRows([]io.Writer{w}, []int{h.Index}, h, data)
	if err != nil {
		return 0, err
	}
	return sums[0], nil
}

// EncodeRows is [Encode] for several rows of the group at once: rows[i] is
// written to ws[i] (h.Index is ignored), from one reading of the data shards.
// One node computing all M rows reads the group's K shards once, where M nodes
// each computing its own row would read them M times. It returns each file's
// checksum.
func EncodeRows(ws []io.Writer, rows []int, h Header, data []io.Reader) ([]uint64, error) {
	if len(ws) != len(rows) || len(rows) == 0 {
		return nil, fmt.Errorf("erasure: %d writers for %d rows", len(ws), len(rows))
	}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	for i, row := range rows {
		if row < 0 || row >= h.M || slices.Contains(rows[:i], row) {
			return nil, fmt.Errorf("erasure: rows %v: want distinct rows from 0 to %d", rows, h.M-1)
		}
	}
	if len(data) != h.K {
		return nil, fmt.Errorf("erasure: %d data streams for a group of %d", len(data), h.K)
	}
	enc, err := reedsolomon.New(h.K, h.M)
	if err != nil {
		return nil, fmt.Errorf("erasure: rs %d+%d: %w", h.K, h.M, err)
	}
	hashes := make([]*xxh3.Hasher, len(rows))
	outs := make([]io.Writer, len(rows))
	for i, row := range rows {
		hashes[i] = xxh3.New()
		outs[i] = io.MultiWriter(ws[i], hashes[i])
		rh := h
		rh.Index = row
		if _, err := outs[i].Write(rh.marshal()); err != nil {
			return nil, fmt.Errorf("erasure: write parity row %d: %w", row, err)
		}
	}
	shards := make([]*shardReader, h.K)
	for i, r := range data {
		shards[i] = newShardReader(r, h.Data[i])
	}
	bufs := chunkBuffers(h.K+h.M, h.Stripe)
	pieces := make([][]byte, h.K+h.M)
	for off := int64(0); off < h.Stripe; {
		n := min(int64(len(bufs[0])), h.Stripe-off)
		for i := range pieces {
			pieces[i] = bufs[i][:n]
		}
		for i, s := range shards {
			if err := s.fill(pieces[i]); err != nil {
				return nil, err
			}
		}
		if err := enc.Encode(pieces); err != nil {
			return nil, fmt.Errorf("erasure: encode: %w", err)
		}
		for i, row := range rows {
			if _, err := outs[i].Write(pieces[h.K+row]); err != nil {
				return nil, fmt.Errorf("erasure: write parity row %d: %w", row, err)
			}
		}
		off += n
	}
	sums := make([]uint64, len(rows))
	for i, row := range rows {
		sums[i] = hashes[i].Sum64()
		if _, err := ws[i].Write(binary.LittleEndian.AppendUint64(nil, sums[i])); err != nil {
			return nil, fmt.Errorf("erasure: write parity row %d: %w", row, err)
		}
	}
	return sums, nil
}

// Piece is one available piece of a group for [Rebuild]: a data shard (Parity false,
// Member the index into Header.Data) or a whole parity file (Parity true, Row its
// index), as a stream from its start.
type Piece struct {
	Parity bool
	Member int // when !Parity
	Row    int // when Parity
	R      io.Reader
}

// Rebuild writes data shard want (an index into h.Data) of the group h describes to w,
// exactly h.Data[want].Bytes bytes, from at least h.K distinct pieces. It uses data
// shards before parity files and ignores the pieces beyond the K it needs; a piece given
// twice is an error. Data streams are checked as in [Encode]; parity streams must carry
// h's group ([ErrWrongGroup] if not) and their own checksum, checked at their end. The
// rebuilt shard must end in h.Data[want].Sum and that must be the XXH3-64 of the bytes
// before it, as in every shard ([ErrMismatch] if not), which catches a data piece that
// is damaged before its last 8 bytes. Pieces are read chunk by chunk, so memory stays
// (K+1)·[ChunkSize].
//
// Checks at the end of a stream come after bytes have been written to w: on error,
// discard what w received (write to a temporary file and rename only on success).
func Rebuild(w io.Writer, h Header, want int, pieces []Piece) error {
	if err := h.Validate(); err != nil {
		return err
	}
	if want < 0 || want >= h.K {
		return fmt.Errorf("erasure: want member %d of a group of %d", want, h.K)
	}
	use, err := choosePieces(h, pieces)
	if err != nil {
		return err
	}
	enc, err := reedsolomon.New(h.K, h.M)
	if err != nil {
		return fmt.Errorf("erasure: rs %d+%d: %w", h.K, h.M, err)
	}
	var (
		readers = make([]chunkReader, len(use)) // readers[i] fills row slot[i] of the code
		slot    = make([]int, len(use))
		parity  []*parityReader
	)
	for i, p := range use {
		if !p.Parity {
			readers[i], slot[i] = newShardReader(p.R, h.Data[p.Member]), p.Member
			continue
		}
		pr, err := openParity(h, p)
		if err != nil {
			return err
		}
		readers[i], slot[i] = pr, h.K+p.Row
		parity = append(parity, pr)
	}

	bufs := chunkBuffers(len(use)+1, h.Stripe)
	rows := make([][]byte, h.K+h.M)
	required := make([]bool, h.K)
	required[want] = true
	rebuilt := newShardCheck(h.Data[want].Bytes)
	for off := int64(0); off < h.Stripe; {
		n := min(int64(len(bufs[0])), h.Stripe-off)
		clear(rows)
		for i, r := range readers {
			rows[slot[i]] = bufs[i][:n]
			if err := r.fill(rows[slot[i]]); err != nil {
				return err
			}
		}
		// Past the wanted shard's end the pieces are read only to be checked.
		if size := h.Data[want].Bytes; off < size {
			if rows[want] == nil {
				rows[want] = bufs[len(use)][:0] // reconstructed in place
			}
			if err := enc.ReconstructSome(rows, required); err != nil {
				return fmt.Errorf("erasure: reconstruct: %w", err)
			}
			out := rows[want][:min(n, size-off)]
			if _, err := w.Write(out); err != nil {
				return err
			}
			rebuilt.see(off, out)
		}
		off += n
	}
	for _, pr := range parity {
		if err := pr.finish(); err != nil {
			return err
		}
	}
	if !rebuilt.ok(h.Data[want].Sum) {
		return fmt.Errorf("%w: rebuilt shard of rank %d does not match its checksum", ErrMismatch, h.Data[want].Rank)
	}
	return nil
}

// choosePieces returns the K pieces Rebuild reads: data shards first, then parity rows,
// each in order. It rejects pieces out of range or given twice, and too few of them.
func choosePieces(h Header, pieces []Piece) ([]Piece, error) {
	data := make([]*Piece, h.K)
	parity := make([]*Piece, h.M)
	for i := range pieces {
		p := &pieces[i]
		switch {
		case p.R == nil:
			return nil, fmt.Errorf("erasure: piece %d has no stream", i)
		case p.Parity && (p.Row < 0 || p.Row >= h.M):
			return nil, fmt.Errorf("erasure: parity row %d of a group with %d", p.Row, h.M)
		case p.Parity && parity[p.Row] != nil:
			return nil, fmt.Errorf("erasure: parity row %d given twice", p.Row)
		case p.Parity:
			parity[p.Row] = p
		case p.Member < 0 || p.Member >= h.K:
			return nil, fmt.Errorf("erasure: member %d of a group of %d", p.Member, h.K)
		case data[p.Member] != nil:
			return nil, fmt.Errorf("erasure: data shard of rank %d given twice", h.Data[p.Member].Rank)
		default:
			data[p.Member] = p
		}
	}
	use := make([]Piece, 0, h.K)
	for _, p := range append(data, parity...) {
		if p != nil && len(use) < h.K {
			use = append(use, *p)
		}
	}
	if len(use) < h.K {
		return nil, fmt.Errorf("%w: have %d pieces, need %d", ErrTooFewPieces, len(use), h.K)
	}
	return use, nil
}

// chunkBuffers returns n buffers of one chunk each, a chunk being ChunkSize bytes or
// the whole stripe when shorter.
func chunkBuffers(n int, stripe int64) [][]byte {
	size := int(min(ChunkSize, stripe))
	all := make([]byte, n*size)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = all[i*size : (i+1)*size : (i+1)*size]
	}
	return bufs
}

// chunkReader fills the next chunk of one piece of a group.
type chunkReader interface {
	fill(p []byte) error
}

// shardReader reads one data shard file as its row of the code: the file's bytes, then
// zeros to the stripe. It checks the file's length and trailing checksum against its
// member entry when it reaches the file's end.
type shardReader struct {
	r   io.Reader
	m   Member
	pos int64
	end tail
}

func newShardReader(r io.Reader, m Member) *shardReader {
	return &shardReader{r: r, m: m, end: tail{size: m.Bytes}}
}

func (s *shardReader) fill(p []byte) error {
	n := max(0, min(int64(len(p)), s.m.Bytes-s.pos))
	clear(p[n:])
	if n == 0 {
		return nil
	}
	switch _, err := io.ReadFull(s.r, p[:n]); {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w: data shard of rank %d is shorter than its %d bytes", ErrMismatch, s.m.Rank, s.m.Bytes)
	case err != nil:
		return fmt.Errorf("erasure: read data shard of rank %d: %w", s.m.Rank, err)
	}
	s.end.see(s.pos, p[:n])
	s.pos += n
	if s.pos < s.m.Bytes {
		return nil
	}
	switch more, err := moreToRead(s.r); {
	case err != nil:
		return fmt.Errorf("erasure: read data shard of rank %d: %w", s.m.Rank, err)
	case more:
		return fmt.Errorf("%w: data shard of rank %d is longer than its %d bytes", ErrMismatch, s.m.Rank, s.m.Bytes)
	}
	if got := s.end.sum(); got != s.m.Sum {
		return fmt.Errorf("%w: data shard of rank %d ends in checksum %#016x, its member entry says %#016x",
			ErrMismatch, s.m.Rank, got, s.m.Sum)
	}
	return nil
}

// parityReader reads the payload of one parity file, hashing every byte it passes so
// that finish can check the file's checksum.
type parityReader struct {
	r    io.Reader // the file, for the trailer
	body io.Reader // the file through the hash
	hash *xxh3.Hasher
	row  int
	size int64
}

// openParity reads the header of parity piece p and checks that it is row p.Row of the
// group h describes.
func openParity(h Header, p Piece) (*parityReader, error) {
	pr := &parityReader{r: p.R, hash: xxh3.New(), row: p.Row, size: h.Size()}
	pr.body = io.TeeReader(p.R, pr.hash)
	got, err := ReadHeader(pr.body)
	switch {
	case err != nil:
		return nil, fmt.Errorf("erasure: parity row %d: %w", p.Row, err)
	case !got.SameGroup(h):
		return nil, fmt.Errorf("%w: parity row %d holds job %q epoch %d group %d, expected job %q epoch %d group %d (or other members)",
			ErrWrongGroup, p.Row, got.Job, got.Epoch, got.Group, h.Job, h.Epoch, h.Group)
	case got.Index != p.Row:
		return nil, fmt.Errorf("%w: parity row %d holds row %d", ErrWrongGroup, p.Row, got.Index)
	}
	return pr, nil
}

func (pr *parityReader) fill(p []byte) error {
	switch _, err := io.ReadFull(pr.body, p); {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w: parity row %d is shorter than its %d bytes", ErrTruncated, pr.row, pr.size)
	case err != nil:
		return fmt.Errorf("erasure: read parity row %d: %w", pr.row, err)
	}
	return nil
}

// finish reads the trailing checksum once the payload has been read, and checks it and
// that the stream ends there.
func (pr *parityReader) finish() error {
	trailer := make([]byte, trailerSize)
	switch _, err := io.ReadFull(pr.r, trailer); {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w: parity row %d is shorter than its %d bytes", ErrTruncated, pr.row, pr.size)
	case err != nil:
		return fmt.Errorf("erasure: read parity row %d: %w", pr.row, err)
	}
	if want, got := binary.LittleEndian.Uint64(trailer), pr.hash.Sum64(); got != want {
		return fmt.Errorf("%w: parity row %d: stored %#016x, computed %#016x", ErrChecksum, pr.row, want, got)
	}
	switch more, err := moreToRead(pr.r); {
	case err != nil:
		return fmt.Errorf("erasure: read parity row %d: %w", pr.row, err)
	case more:
		return fmt.Errorf("%w: parity row %d is longer than the %d bytes its header implies", ErrBadHeader, pr.row, pr.size)
	}
	return nil
}

// moreToRead reports whether r holds another byte.
func moreToRead(r io.Reader) (bool, error) {
	var b [1]byte
	switch _, err := io.ReadFull(r, b[:]); err {
	case io.EOF:
		return false, nil
	case nil:
		return true, nil
	default:
		return false, err
	}
}

// tail keeps the last 8 bytes of a file of the given size, a shard's own checksum, as
// the file streams by.
type tail struct {
	size int64
	b    [trailerSize]byte
}

// see takes the bytes p found at offset off of the file.
func (t *tail) see(off int64, p []byte) {
	start := t.size - trailerSize
	if from := max(start, off); from < off+int64(len(p)) {
		copy(t.b[from-start:], p[from-off:])
	}
}

func (t *tail) sum() uint64 { return binary.LittleEndian.Uint64(t.b[:]) }

// shardCheck checks a shard file as it streams by: that it ends in the XXH3-64 of the
// bytes before.
type shardCheck struct {
	end  tail
	hash *xxh3.Hasher
}

func newShardCheck(size int64) *shardCheck {
	return &shardCheck{end: tail{size: size}, hash: xxh3.New()}
}

// see takes the bytes p found at offset off of the file, offsets in order.
func (c *shardCheck) see(off int64, p []byte) {
	c.end.see(off, p)
	body := max(0, min(int64(len(p)), c.end.size-trailerSize-off))
	c.hash.Write(p[:body])
}

// ok reports whether the file ended in sum and sum is its checksum.
func (c *shardCheck) ok(sum uint64) bool {
	return c.end.sum() == sum && c.hash.Sum64() == sum
}
