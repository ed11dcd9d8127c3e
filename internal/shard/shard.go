// Package ckpt reads, verifies and stores checkpoint shards and decides which epoch a
// job restarts from. The shard format is specified in docs/shard-format.md; libshoal
// writes shards, this package verifies every shard the agent handles.
package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// Format constants from docs/shard-format.md.
const (
	Magic       = "SHOALSHD"
	Version     = 1
	HeaderSize  = 128
	RegionSize  = 32
	TrailerSize = 8
	// MaxJobLen is the longest job id a shard can carry (64-byte field, NUL-terminated).
	MaxJobLen = 63
)

// Verification failures, in the order docs/shard-format.md checks them. Callers match
// them with errors.Is; a *Error adds which shard and why.
var (
	ErrTruncated   = errors.New("shard: truncated")
	ErrBadMagic    = errors.New("shard: bad magic")
	ErrVersion     = errors.New("shard: unsupported version")
	ErrChecksum    = errors.New("shard: checksum mismatch")
	ErrBadHeader   = errors.New("shard: bad header")
	ErrRegionTable = errors.New("shard: bad region table")
	ErrWrongShard  = errors.New("shard: wrong shard")
)

// ShortName is the name docs/shard-format.md and the test vectors use for a
// verification error ("checksum mismatch"), or "" when err is none of them.
func ShortName(err error) string {
	for _, e := range []error{ErrTruncated, ErrBadMagic, ErrVersion, ErrChecksum,
		ErrBadHeader, ErrRegionTable, ErrWrongShard} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "shard: ")
		}
	}
	return ""
}

// Region is one protected memory region of a rank.
type Region struct {
	ID       int32
	ElemSize uint32
	Count    uint64
	Data     []byte // ElemSize × Count bytes; aliases the shard buffer when parsed
}

// Header is the identity of a shard.
type Header struct {
	Job       string
	Epoch     uint64
	Rank      uint32
	NRanks    uint32
	CreatedNs uint64
}

// Shard is a verified, parsed shard.
type Shard struct {
	Header
	Regions  []Region
	Checksum uint64
}

// Parse verifies b as a complete shard and returns it. The regions alias b.
func Parse(b []byte) (*Shard, error) {
	if len(b) < HeaderSize+TrailerSize {
		return nil, ErrTruncated
	}
	if err := checkVersion(b); err != nil {
		return nil, err
	}
	want := binary.LittleEndian.Uint64(b[len(b)-TrailerSize:])
	if got := Checksum(b[:len(b)-TrailerSize]); got != want {
		return nil, checksumError(want, got)
	}
	return parseLayout(b, uint64(len(b)), b, want)
}

// verifyChunk is how much of a shard [Verify] reads at a time.
const verifyChunk = 1 << 20

// Verify reads a shard of size bytes from r, verifies it as [Parse] does, in
// the same order, and returns its header and checksum. It holds no more than
// the header, the region table and 1 MiB of the shard in memory at a time, and
// reads with r's Read calls: a shard verified through a mapping of its file
// instead faults its pages in from disk inside the hashing, where the Go
// runtime cannot stop the goroutine, and a garbage collection waiting for it
// stops every other goroutine of the agent for as long (see [Checksum]). r
// ending before size bytes is [ErrTruncated].
func Verify(r io.Reader, size int64) (Header, uint64, error) {
	if size < HeaderSize+TrailerSize {
		return Header{}, 0, ErrTruncated
	}
	// The header is checked first, alone: a file that is no shard of this
	// version is told apart before its size is read.
	head := make([]byte, HeaderSize)
	if err := readFull(r, head, size); err != nil {
		return Header{}, 0, err
	}
	if err := checkVersion(head); err != nil {
		return Header{}, 0, err
	}
	v := NewVerifier(size)
	v.Write(head)
	left := size - HeaderSize
	buf := make([]byte, min(left, verifyChunk))
	for left > 0 {
		n := min(left, verifyChunk)
		if err := readFull(r, buf[:n], size); err != nil {
			return Header{}, 0, err
		}
		v.Write(buf[:n])
		left -= n
	}
	return v.Sum()
}

// A Verifier verifies a shard written to it a piece at a time, as [Verify] does
// one read from a reader: a copy of a shard being received is verified as it is
// written, instead of read back afterwards. Write never fails; [Verifier.Sum]
// gives the verdict on what was written. It holds the header and the region table.
type Verifier struct {
	head     []byte // the header, then the region table
	headWant int    // len(head) wanted: HeaderSize until the header is in
	h        *xxh3.Hasher
	tail     [TrailerSize]byte // the last bytes written, held back: maybe the trailer
	ntail    int
	n        int64
	size     int64 // the shard's size when known, else -1
}

// NewVerifier returns a Verifier of one shard of size bytes, or of a size not
// known in advance when size is negative. A known size bounds the region
// table it holds by what that size can hold (a corrupt count in a header
// otherwise has it hold up to the whole shard), and a shard written other
// than size bytes is [ErrTruncated].
func NewVerifier(size int64) *Verifier {
	return &Verifier{head: make([]byte, 0, HeaderSize), headWant: HeaderSize, h: xxh3.New(), size: max(size, -1)}
}

// Write takes the next bytes of the shard.
func (v *Verifier) Write(p []byte) (int, error) {
	v.n += int64(len(p))
	if v.ntail+len(p) <= TrailerSize {
		v.ntail += copy(v.tail[v.ntail:], p)
		return len(p), nil
	}
	// Everything but the last TrailerSize bytes so far is body: the held-back
	// bytes that p pushes out first, then p's own.
	if len(p) >= TrailerSize {
		v.body(v.tail[:v.ntail])
		v.body(p[:len(p)-TrailerSize])
		v.ntail = copy(v.tail[:], p[len(p)-TrailerSize:])
		return len(p), nil
	}
	out := v.ntail + len(p) - TrailerSize
	v.body(v.tail[:out])
	v.ntail = copy(v.tail[:], v.tail[out:v.ntail])
	v.ntail += copy(v.tail[v.ntail:], p)
	return len(p), nil
}

// body hashes b and keeps what of it belongs to the header and region table.
func (v *Verifier) body(b []byte) {
	v.h.Write(b)
	for len(b) > 0 && len(v.head) < v.headWant {
		k := min(len(b), v.headWant-len(v.head))
		v.head = append(v.head, b[:k]...)
		b = b[k:]
		if len(v.head) == HeaderSize && v.headWant == HeaderSize && checkVersion(v.head) == nil {
			// A table larger than a known size holds is not kept: parseLayout
			// refuses its count from the header alone.
			table := int64(binary.LittleEndian.Uint32(v.head[32:])) * RegionSize
			if v.size < 0 || table <= v.size-HeaderSize-TrailerSize {
				v.headWant += int(table)
			}
		}
	}
}

// Sum returns the header and checksum of the shard written so far, or why it is
// not a valid one, as [Verify] would of the same bytes.
func (v *Verifier) Sum() (Header, uint64, error) {
	size := v.n
	if v.size >= 0 && size != v.size {
		return Header{}, 0, fmt.Errorf("%w: %d bytes of a shard of %d", ErrTruncated, size, v.size)
	}
	if size < HeaderSize+TrailerSize {
		return Header{}, 0, ErrTruncated
	}
	if err := checkVersion(v.head); err != nil {
		return Header{}, 0, err
	}
	head := v.head
	if len(head) < v.headWant {
		head = head[:HeaderSize] // a table the size cannot hold: parseLayout refuses it
	}
	want := binary.LittleEndian.Uint64(v.tail[:])
	if got := v.h.Sum64(); got != want {
		return Header{}, 0, checksumError(want, got)
	}
	s, err := parseLayout(head, uint64(size), nil, want)
	if err != nil {
		return Header{}, 0, err
	}
	return s.Header, want, nil
}

// ReadHeader reads the header and the region table at the start of r, a shard
// of size bytes, and checks them as [Verify] does, except for the checksum: the
// payload is not read. It says that a file is a whole shard as its header
// describes it, not that its bytes are the ones written.
func ReadHeader(r io.Reader, size int64) (Header, error) {
	head, err := readHead(r, size)
	if err != nil {
		return Header{}, err
	}
	s, err := parseLayout(head, uint64(size), nil, 0)
	if err != nil {
		return Header{}, err
	}
	return s.Header, nil
}

// readHead reads the header of a shard of size bytes from r, checks its
// version, and returns it joined by the region table.
func readHead(r io.Reader, size int64) ([]byte, error) {
	if size < HeaderSize+TrailerSize {
		return nil, ErrTruncated
	}
	head := make([]byte, HeaderSize)
	if err := readFull(r, head, size); err != nil {
		return nil, err
	}
	if err := checkVersion(head); err != nil {
		return nil, err
	}
	// The region table joins the header in memory. A count too large for the
	// size is parseLayout's to refuse, once the checksum is known: until then
	// those bytes are hashed like the payload.
	body := uint64(size) - TrailerSize
	table := uint64(binary.LittleEndian.Uint32(head[32:])) * RegionSize
	if table > body-HeaderSize {
		table = 0
	}
	head = append(head, make([]byte, table)...)
	if err := readFull(r, head[HeaderSize:], size); err != nil {
		return nil, err
	}
	return head, nil
}

// readFull fills b from r, a shard of size bytes; an early end is [ErrTruncated].
func readFull(r io.Reader, b []byte, size int64) error {
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: the shard ended before its %d bytes", ErrTruncated, size)
		}
		return err
	}
	return nil
}

// checkVersion checks the magic, the version and the header size at the start
// of b, which holds at least the header.
func checkVersion(b []byte) error {
	le := binary.LittleEndian
	if string(b[:8]) != Magic {
		return ErrBadMagic
	}
	if v, hs := le.Uint32(b[8:]), le.Uint32(b[12:]); v != Version || hs != HeaderSize {
		return fmt.Errorf("%w: version %d, header size %d", ErrVersion, v, hs)
	}
	return nil
}

func checksumError(want, got uint64) error {
	return fmt.Errorf("%w: stored %#016x, computed %#016x", ErrChecksum, want, got)
}

// parseLayout checks the header and the region table of a shard of size bytes
// whose checksum is verified, and returns it. b holds the header and, if the
// size leaves room for it, the whole region table. With the whole
// shard in data, the regions alias it; with data nil, they carry no Data.
func parseLayout(b []byte, size uint64, data []byte, checksum uint64) (*Shard, error) {
	le := binary.LittleEndian
	s := &Shard{Checksum: checksum}
	s.Epoch = le.Uint64(b[16:])
	s.Rank = le.Uint32(b[24:])
	s.NRanks = le.Uint32(b[28:])
	nregions := uint64(le.Uint32(b[32:]))
	payload := le.Uint64(b[40:])
	s.CreatedNs = le.Uint64(b[112:])
	job := b[48:112]
	end := bytes.IndexByte(job, 0)
	switch {
	case s.NRanks == 0 || s.Rank >= s.NRanks:
		return nil, fmt.Errorf("%w: rank %d of %d", ErrBadHeader, s.Rank, s.NRanks)
	case s.Epoch == 0:
		return nil, fmt.Errorf("%w: epoch 0", ErrBadHeader)
	case end <= 0:
		return nil, fmt.Errorf("%w: job id empty or not terminated", ErrBadHeader)
	case !utf8.Valid(job[:end]):
		return nil, fmt.Errorf("%w: job id %q is not UTF-8", ErrBadHeader, job[:end])
	case bytes.IndexFunc(job[end:], func(r rune) bool { return r != 0 }) >= 0:
		return nil, fmt.Errorf("%w: job id padding holds bytes other than NUL", ErrBadHeader)
	case le.Uint32(b[36:]) != 0 || le.Uint64(b[120:]) != 0:
		return nil, fmt.Errorf("%w: reserved field not zero", ErrBadHeader)
	}
	s.Job = string(job[:end])
	// Compare sizes without overflow: both terms are bounded by size first.
	rest := size - HeaderSize - TrailerSize
	if nregions > rest/RegionSize || payload != rest-nregions*RegionSize {
		return nil, fmt.Errorf("%w: %d regions and %d payload bytes do not fit a %d-byte file",
			ErrBadHeader, nregions, payload, size)
	}
	off := uint64(HeaderSize + nregions*RegionSize)
	var sum uint64
	for i := uint64(0); i < nregions; i++ {
		e := b[HeaderSize+i*RegionSize:]
		r := Region{ID: int32(le.Uint32(e)), ElemSize: le.Uint32(e[4:]), Count: le.Uint64(e[8:])}
		n := le.Uint64(e[16:])
		switch {
		case r.ElemSize == 0:
			return nil, fmt.Errorf("%w: region %d has element size 0", ErrRegionTable, r.ID)
		case !productIs(r.ElemSize, r.Count, n):
			return nil, fmt.Errorf("%w: region %d: %d bytes is not %d × %d", ErrRegionTable, r.ID, n, r.ElemSize, r.Count)
		case le.Uint64(e[24:]) != 0:
			return nil, fmt.Errorf("%w: region %d: reserved field not zero", ErrRegionTable, r.ID)
		case i > 0 && r.ID <= s.Regions[i-1].ID:
			return nil, fmt.Errorf("%w: region ids not strictly increasing at %d", ErrRegionTable, r.ID)
		case n > payload-sum:
			return nil, fmt.Errorf("%w: regions exceed the %d payload bytes", ErrRegionTable, payload)
		}
		if data != nil {
			r.Data = data[off+sum : off+sum+n]
		}
		sum += n
		s.Regions = append(s.Regions, r)
	}
	if sum != payload {
		return nil, fmt.Errorf("%w: regions add up to %d bytes, header says %d", ErrRegionTable, sum, payload)
	}
	return s, nil
}

// Check verifies that s is the shard the caller expected.
func (h Header) Check(want Header) error {
	if h.Job != want.Job || h.Epoch != want.Epoch || h.Rank != want.Rank || h.NRanks != want.NRanks {
		return fmt.Errorf("%w: holds job %q epoch %d rank %d of %d, expected job %q epoch %d rank %d of %d",
			ErrWrongShard, h.Job, h.Epoch, h.Rank, h.NRanks, want.Job, want.Epoch, want.Rank, want.NRanks)
	}
	return nil
}

// Encode returns the shard bytes for h and regions, which must be sorted by ID with
// unique IDs. libshoal is the production writer; Encode serves tools and tests.
func Encode(h Header, regions []Region) ([]byte, error) {
	if len(h.Job) == 0 || len(h.Job) > MaxJobLen {
		return nil, fmt.Errorf("%w: job id %q must be 1 to %d bytes", ErrBadHeader, h.Job, MaxJobLen)
	}
	le := binary.LittleEndian
	var payload uint64
	for i, r := range regions {
		if i > 0 && r.ID <= regions[i-1].ID {
			return nil, fmt.Errorf("%w: region ids not strictly increasing at %d", ErrRegionTable, r.ID)
		}
		if r.ElemSize == 0 || uint64(len(r.Data)) != uint64(r.ElemSize)*r.Count {
			return nil, fmt.Errorf("%w: region %d: %d bytes is not %d × %d", ErrRegionTable, r.ID, len(r.Data), r.ElemSize, r.Count)
		}
		payload += uint64(len(r.Data))
	}
	size := HeaderSize + RegionSize*len(regions) + int(payload) + TrailerSize
	b := make([]byte, HeaderSize, size)
	copy(b, Magic)
	le.PutUint32(b[8:], Version)
	le.PutUint32(b[12:], HeaderSize)
	le.PutUint64(b[16:], h.Epoch)
	le.PutUint32(b[24:], h.Rank)
	le.PutUint32(b[28:], h.NRanks)
	le.PutUint32(b[32:], uint32(len(regions)))
	le.PutUint64(b[40:], payload)
	copy(b[48:112], h.Job)
	le.PutUint64(b[112:], h.CreatedNs)
	for _, r := range regions {
		var e [RegionSize]byte
		le.PutUint32(e[0:], uint32(r.ID))
		le.PutUint32(e[4:], r.ElemSize)
		le.PutUint64(e[8:], r.Count)
		le.PutUint64(e[16:], uint64(len(r.Data)))
		b = append(b, e[:]...)
	}
	for _, r := range regions {
		b = append(b, r.Data...)
	}
	return le.AppendUint64(b, Checksum(b)), nil
}

// streamFrom is the size from which [Checksum] hashes through xxh3's streaming
// hasher: about 0.1 ms of hashing in one call at most.
const streamFrom = 1 << 20

// Checksum returns the XXH3-64 of b, the checksum a shard's trailer holds.
//
// xxh3.Hash hashes its whole input in one assembly call, which the Go runtime
// cannot preempt. Over a shard of 256 MB that is 25 ms on an idle core, far
// longer on a loaded one or when the shard is a mapping of a file not in the
// page cache, whose pages fault in from disk inside the call; and a garbage
// collection that starts meanwhile stops every other goroutine of the agent
// (the job store's heartbeats among them) until the call ends: 58 to 113 ms
// seen while agents verified copies of 256 MB shards on the loaded testbed. The
// streaming hasher gives the same sum from one short call per 1 KiB block, so
// the runtime can stop this goroutine between any two: about a fifth slower,
// and the longest stop seen in the same run was 10 ms.
func Checksum(b []byte) uint64 {
	if len(b) < streamFrom {
		return xxh3.Hash(b)
	}
	h := xxh3.New()
	h.Write(b)
	return h.Sum64()
}

// productIs reports whether elemSize × count == n without overflowing.
func productIs(elemSize uint32, count, n uint64) bool {
	hi, lo := bits.Mul64(uint64(elemSize), count)
	return hi == 0 && lo == n
}

// Error says which shard file failed verification; it unwraps to the sentinel.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }
