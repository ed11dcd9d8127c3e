// Package erasure computes Reed–Solomon parity for the checkpoint shards of an epoch and
// rebuilds lost shards from it: the pure part of the `--redundancy rs:K+M` mode.
//
// Instead of copying every shard to other nodes, the shards of an epoch are split into
// groups of up to K shards written on distinct nodes ([Plan]), and each group gets M
// parity files stored on M further nodes. A group of k shards then has k+M pieces on
// k+M distinct nodes, any k of which rebuild the rest, so losing any M nodes leaves
// every shard recoverable, for M/K of the shards' size in parity instead of M copies.
//
// A parity file (docs/shard-format.md, "Parity files") carries one row of the code over
// the group's shard files, each zero-padded to the longest, behind a header naming the
// group's members. [Encode] writes one and [Rebuild] recovers one shard; both stream,
// holding [ChunkSize] bytes per piece whatever the shards' sizes, so the agent can run
// them on multi-gigabyte shards. [Verify] checks a parity file at rest.
package erasure

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/zeebo/xxh3"

	"shoal/internal/shard"
)

// Format constants from docs/shard-format.md.
const (
	magic       = "SHOALPAR"
	version     = 1
	fixedSize   = 128 // the header before the member table
	memberSize  = 24  // one member table entry
	trailerSize = 8
	maxPieces   = 256 // k + m: the code works over GF(2^8)
	// minShard is the length of the smallest valid shard file.
	minShard = shard.HeaderSize + shard.TrailerSize
)

// Failures of a parity file or of the pieces handed to [Encode] and [Rebuild]. Callers
// match them with errors.Is; the wrapping error says which file or rank and why. The
// first five follow the shard format's verification order.
var (
	// ErrCorrupt matches each of the errors below but ErrTooFewPieces: a piece's bytes
	// are not what its group says they are, as opposed to failing to read them.
	ErrCorrupt = errors.New("erasure: corrupt")

	ErrTruncated error = corrupt("truncated")
	ErrBadMagic  error = corrupt("bad magic")
	ErrVersion   error = corrupt("unsupported version")
	ErrChecksum  error = corrupt("checksum mismatch")
	ErrBadHeader error = corrupt("bad header")
	// ErrWrongGroup: a parity piece belongs to another group, or holds another row.
	ErrWrongGroup error = corrupt("parity of another group")
	// ErrMismatch: a data shard's length or trailing checksum differs from its member
	// entry, or a rebuilt shard does not end in its checksum.
	ErrMismatch error = corrupt("shard mismatch")
	// ErrTooFewPieces: fewer than K distinct pieces were given to [Rebuild].
	ErrTooFewPieces = errors.New("erasure: too few pieces")
)

// corrupt is an error that also matches [ErrCorrupt].
type corrupt string

func (e corrupt) Error() string        { return "erasure: " + string(e) }
func (e corrupt) Is(target error) bool { return target == ErrCorrupt }

// Member is one data shard of a group.
type Member struct {
	Rank  int
	Bytes int64  // the shard file's length
	Sum   uint64 // the shard's trailing checksum
}

// Header describes one parity file.
type Header struct {
	Job    string
	Epoch  uint64
	Group  int
	Index  int // parity row, 0 ≤ Index < M
	K, M   int // K == len(Data)
	Stripe int64
	Data   []Member
}

// Size is the parity file's total length: header, member table, Stripe bytes of
// parity and the checksum.
func (h Header) Size() int64 {
	return h.headerSize() + h.Stripe + trailerSize
}

func (h Header) headerSize() int64 { return fixedSize + memberSize*int64(len(h.Data)) }

// Validate checks the constraints of docs/shard-format.md. Its errors wrap
// [ErrBadHeader] and name the field and its value.
func (h Header) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadHeader}, args...)...)
	}
	switch {
	case len(h.Job) == 0 || len(h.Job) > shard.MaxJobLen || !utf8.ValidString(h.Job) ||
		strings.IndexByte(h.Job, 0) >= 0:
		return bad("Job %q: must be 1 to %d bytes of UTF-8 without NUL", h.Job, shard.MaxJobLen)
	case h.Epoch == 0:
		return bad("Epoch 0: must be at least 1")
	case h.Group < 0 || h.Group > math.MaxUint32:
		return bad("Group %d: must be 0 to %d", h.Group, uint32(math.MaxUint32))
	case h.K < 1 || h.M < 1 || h.K+h.M > maxPieces:
		return bad("K %d, M %d: need K ≥ 1, M ≥ 1 and K+M ≤ %d", h.K, h.M, maxPieces)
	case h.Index < 0 || h.Index >= h.M:
		return bad("Index %d: must be 0 to M-1 (M %d)", h.Index, h.M)
	case len(h.Data) != h.K:
		return bad("Data: %d members, K %d", len(h.Data), h.K)
	}
	var longest int64
	for i, d := range h.Data {
		switch {
		case d.Rank < 0 || d.Rank > math.MaxUint32:
			return bad("Data[%d].Rank %d: must be 0 to %d", i, d.Rank, uint32(math.MaxUint32))
		case i > 0 && d.Rank <= h.Data[i-1].Rank:
			return bad("Data[%d].Rank %d: ranks must be strictly increasing", i, d.Rank)
		case d.Bytes < minShard:
			return bad("Data[%d].Bytes %d: a shard has at least %d bytes", i, d.Bytes, minShard)
		}
		longest = max(longest, d.Bytes)
	}
	switch {
	case h.Stripe != longest:
		return bad("Stripe %d: must be the longest member's %d bytes", h.Stripe, longest)
	case h.Stripe > math.MaxInt64-h.headerSize()-trailerSize:
		return bad("Stripe %d: the file would be too large", h.Stripe)
	}
	return nil
}

// SameGroup reports whether h and o are parity files of the same group: everything but
// the row may differ.
func (h Header) SameGroup(o Header) bool {
	return h.Job == o.Job && h.Epoch == o.Epoch && h.Group == o.Group && h.K == o.K &&
		h.M == o.M && h.Stripe == o.Stripe && slices.Equal(h.Data, o.Data)
}

// marshal returns the header and member table of a valid h.
func (h Header) marshal() []byte {
	le := binary.LittleEndian
	b := make([]byte, fixedSize, h.headerSize())
	copy(b, magic)
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], uint32(h.headerSize()))
	le.PutUint64(b[16:], h.Epoch)
	le.PutUint32(b[24:], uint32(h.Group))
	le.PutUint16(b[28:], uint16(h.Index))
	le.PutUint16(b[30:], uint16(h.K))
	le.PutUint16(b[32:], uint16(h.M))
	le.PutUint64(b[40:], uint64(h.Stripe))
	copy(b[48:112], h.Job)
	for _, d := range h.Data {
		b = le.AppendUint32(b, uint32(d.Rank))
		b = le.AppendUint32(b, 0)
		b = le.AppendUint64(b, uint64(d.Bytes))
		b = le.AppendUint64(b, d.Sum)
	}
	return b
}

// checkPrefix checks the magic and version at the start of a parity file.
func checkPrefix(b []byte) error {
	if string(b[:8]) != magic {
		return ErrBadMagic
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != version {
		return fmt.Errorf("%w: version %d", ErrVersion, v)
	}
	return nil
}

// ReadHeader reads and checks the header and member table from the start of r
// (it does not check the trailing checksum): used when streaming. It reads exactly
// the header's bytes, leaving r at the start of the parity payload.
func ReadHeader(r io.Reader) (Header, error) {
	le := binary.LittleEndian
	fixed := make([]byte, fixedSize)
	if err := readHeaderBytes(r, fixed); err != nil {
		return Header{}, err
	}
	if err := checkPrefix(fixed); err != nil {
		return Header{}, err
	}
	bad := func(format string, args ...any) (Header, error) {
		return Header{}, fmt.Errorf("%w: "+format, append([]any{ErrBadHeader}, args...)...)
	}
	h := Header{
		Epoch: le.Uint64(fixed[16:]),
		Group: int(le.Uint32(fixed[24:])),
		Index: int(le.Uint16(fixed[28:])),
		K:     int(le.Uint16(fixed[30:])),
		M:     int(le.Uint16(fixed[32:])),
	}
	headerSize := le.Uint32(fixed[12:])
	stripe := le.Uint64(fixed[40:])
	job := fixed[48:112]
	end := bytes.IndexByte(job, 0)
	switch {
	case headerSize != uint32(fixedSize+memberSize*h.K):
		return bad("header_size %d, want %d for k %d", headerSize, fixedSize+memberSize*h.K, h.K)
	case le.Uint16(fixed[34:]) != 0 || le.Uint32(fixed[36:]) != 0 ||
		!allZero(fixed[112:fixedSize]):
		return bad("reserved field not zero")
	case stripe > math.MaxInt64:
		return bad("stripe %d too large", stripe)
	case end <= 0:
		return bad("job id empty or not terminated")
	case !allZero(job[end:]):
		return bad("job id padding holds bytes other than NUL")
	}
	h.Stripe = int64(stripe)
	h.Job = string(job[:end])
	table := make([]byte, memberSize*h.K)
	if err := readHeaderBytes(r, table); err != nil {
		return Header{}, err
	}
	h.Data = make([]Member, h.K)
	for i := range h.Data {
		e := table[memberSize*i:]
		if le.Uint32(e[4:]) != 0 {
			return bad("member %d: reserved field not zero", i)
		}
		n := le.Uint64(e[8:])
		if n > math.MaxInt64 {
			return bad("member %d: %d bytes", i, n)
		}
		h.Data[i] = Member{Rank: int(le.Uint32(e)), Bytes: int64(n), Sum: le.Uint64(e[16:])}
	}
	if err := h.Validate(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// Verify reads a whole parity file of the given size, checks the checksum and
// the header, and returns the header. Errors follow the shard format's order:
// [ErrTruncated], [ErrBadMagic], [ErrVersion], [ErrChecksum], [ErrBadHeader].
func Verify(r io.ReaderAt, size int64) (Header, error) {
	if size < fixedSize+trailerSize {
		return Header{}, fmt.Errorf("%w: %d bytes", ErrTruncated, size)
	}
	fixed := make([]byte, fixedSize)
	if err := readAt(r, fixed, 0); err != nil {
		return Header{}, fmt.Errorf("erasure: read parity header: %w", err)
	}
	if err := checkPrefix(fixed); err != nil {
		return Header{}, err
	}
	body := io.NewSectionReader(r, 0, size-trailerSize)
	sum := xxh3.New()
	if _, err := io.Copy(sum, body); err != nil {
		return Header{}, fmt.Errorf("erasure: read parity file: %w", err)
	}
	trailer := make([]byte, trailerSize)
	if err := readAt(r, trailer, size-trailerSize); err != nil {
		return Header{}, fmt.Errorf("erasure: read parity checksum: %w", err)
	}
	if want, got := binary.LittleEndian.Uint64(trailer), sum.Sum64(); got != want {
		return Header{}, fmt.Errorf("%w: stored %#016x, computed %#016x", ErrChecksum, want, got)
	}
	h, err := ReadHeader(io.NewSectionReader(r, 0, size-trailerSize))
	switch {
	case errors.Is(err, ErrTruncated):
		// The checksum matched, so the file was written this short.
		return Header{}, fmt.Errorf("%w: member table runs past the end of a %d-byte file", ErrBadHeader, size)
	case err != nil:
		return Header{}, err
	case h.Size() != size:
		return Header{}, fmt.Errorf("%w: header implies %d bytes, file has %d", ErrBadHeader, h.Size(), size)
	}
	return h, nil
}

// readHeaderBytes fills b from r, reporting a short stream as [ErrTruncated].
func readHeaderBytes(r io.Reader, b []byte) error {
	switch _, err := io.ReadFull(r, b); {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w: stream ended inside the header", ErrTruncated)
	case err != nil:
		return fmt.Errorf("erasure: read parity header: %w", err)
	}
	return nil
}

// readAt fills b from off, accepting the io.EOF a ReaderAt may return with the last
// byte.
func readAt(r io.ReaderAt, b []byte, off int64) error {
	if n, err := r.ReadAt(b, off); n < len(b) {
		return err
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
