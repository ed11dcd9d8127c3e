// Package shard reads, verifies and encodes checkpoint shards. The shard format is
// specified in docs/shard-format.md; libshoal writes shards (version 3), this package
// verifies every shard the agent handles, of version 1, 2 or 3.
package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// Format constants from docs/shard-format.md.
const (
	Magic = "SHOALSHD"
	// Version is the version libshoal writes; MinVersion the oldest a reader takes
	// (version 1: every region plain, of bytes, without descriptors).
	Version     = 3
	MinVersion  = 1
	HeaderSize  = 128
	RegionSize  = 32
	TrailerSize = 8
	// MaxJobLen is the longest job id a shard can carry (64-byte field, NUL-terminated).
	MaxJobLen = 63
	// MaxDims is the most dimensions a subarray region has.
	MaxDims = 32
	// BlockDescSize is the size of a block region's descriptor.
	BlockDescSize = 16
)

// Kind says how a region lies across the ranks (docs/shard-format.md, "Region kinds").
type Kind uint16

const (
	// KindPlain is one rank's own memory: it can be restored onto that rank only.
	KindPlain Kind = 0
	// KindBlock is Count elements at Block.Offset of a 1-D array of Block.Global.
	KindBlock Kind = 1
	// KindSubarray is a box of an N-d array, as MPI_Type_create_subarray describes it.
	KindSubarray Kind = 2
	// KindReplicated is the same bytes on every rank.
	KindReplicated Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindPlain:
		return "plain"
	case KindBlock:
		return "block"
	case KindSubarray:
		return "subarray"
	case KindReplicated:
		return "replicated"
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// Order is a subarray's element order in memory.
type Order uint32

const (
	OrderC       Order = 0 // the last dimension varies fastest (MPI_ORDER_C)
	OrderFortran Order = 1 // the first dimension varies fastest (MPI_ORDER_FORTRAN)
)

// Block places a KindBlock region in its global array, in elements.
type Block struct {
	Global, Offset uint64
}

// Subarray places a KindSubarray region: the box Starts[d] + [0, Subsizes[d]) of an
// array of Sizes, all of len 1 to MaxDims.
type Subarray struct {
	Order                   Order
	Sizes, Subsizes, Starts []uint64
}

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
	Kind     Kind
	// Datatype is the code of the region's MPI basic datatype (docs/shard-format.md,
	// "Datatype codes"); 0 is bytes: a derived or unknown type, and every region of
	// a version 1 shard.
	Datatype uint16
	// Flags (version 3) say what of a derived datatype's region only the writer's
	// kind of machine can read: [FlagLongDouble], [FlagABIBound].
	Flags    uint8
	Block    Block    // KindBlock only
	Subarray Subarray // KindSubarray only
	Data     []byte   // ElemSize × Count bytes; aliases the shard buffer when parsed
}

// Header is the identity of a shard, its version, and the id and kind of each of
// its regions ([Header.Regions]).
type Header struct {
	Job       string
	Epoch     uint64
	Rank      uint32
	NRanks    uint32
	CreatedNs uint64
	// Version is the format's version: 1, 2 or 3. [Encode] takes 0 for the oldest
	// version that holds the regions and the ABI.
	Version uint32
	// ABI is the machine that wrote the shard (version 3; zero before: not recorded).
	ABI ABI
	// regions packs each region's id and kind, 6 bytes each, so that a Header stays
	// a comparable value that callers copy and compare.
	regions string
}

// ABI is what a version 3 shard records of the machine that wrote it: what a reader
// needs to decide whether a region's bytes mean the same on its own machine
// (docs/shard-format.md, "Portability").
type ABI struct {
	ISA        uint8 // ISAAMD64, ISAARM64; 0: unknown
	LongDouble uint8 // LongDoubleX87, LongDoubleBinary128...; 0: unknown
}

// The instruction sets and long double formats of [ABI].
const (
	ISAUnknown = 0
	ISAAMD64   = 1
	ISAARM64   = 2

	LongDoubleUnknown      = 0
	LongDoubleX87          = 1 // x87 80-bit extended, in 16 bytes
	LongDoubleBinary128    = 2 // IEEE 754 binary128
	LongDoubleBinary64     = 3 // the same as double
	LongDoubleDoubleDouble = 4
)

// A version 3 region's flags.
const (
	// FlagLongDouble marks a derived datatype that holds long double.
	FlagLongDouble uint8 = 1
	// FlagABIBound marks a derived datatype with holes (a struct's padding), saved as
	// laid out by the writer's compiler.
	FlagABIBound uint8 = 2
	flagsKnown         = FlagLongDouble | FlagABIBound
)

// RegionKind is the id and kind of one region of a shard.
type RegionKind struct {
	ID   int32
	Kind Kind
}

// Regions lists the id and kind of each region, in table order.
func (h Header) Regions() []RegionKind {
	out := make([]RegionKind, 0, len(h.regions)/6)
	for i := 0; i+6 <= len(h.regions); i += 6 {
		b := []byte(h.regions[i : i+6])
		out = append(out, RegionKind{ID: int32(binary.LittleEndian.Uint32(b)), Kind: Kind(binary.LittleEndian.Uint16(b[4:]))})
	}
	return out
}

// PerRank lists the ids of the shard's plain (per-rank) regions: those a restart on
// another number of ranks cannot restore. An epoch whose shards have none can be
// restored onto any count.
func (h Header) PerRank() []int32 {
	var ids []int32
	for _, r := range h.Regions() {
		if r.Kind == KindPlain {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func packRegions(regions []Region) string {
	b := make([]byte, 0, 6*len(regions))
	for _, r := range regions {
		b = binary.LittleEndian.AppendUint32(b, uint32(r.ID))
		b = binary.LittleEndian.AppendUint16(b, uint16(r.Kind))
	}
	return string(b)
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
			table, ok := tableSize(v.head)
			if ok && (v.size < 0 || table <= uint64(v.size-HeaderSize-TrailerSize)) && table <= maxHeld {
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
	// The region table and the descriptors join the header in memory. A count too
	// large for the size is parseLayout's to refuse, once the checksum is known:
	// until then those bytes are hashed like the payload.
	body := uint64(size) - TrailerSize
	table, ok := tableSize(head)
	if !ok || table > body-HeaderSize {
		table = 0
	}
	head = append(head, make([]byte, table)...)
	if err := readFull(r, head[HeaderSize:], size); err != nil {
		return nil, err
	}
	return head, nil
}

// maxHeld bounds what a Verifier of a shard of unknown size holds of a table: a
// corrupt header cannot have it hold more.
const maxHeld = 1 << 30

// tableSize is the size of the region table and the descriptor area that follow the
// header b (its version checked); ok is false when it overflows.
func tableSize(b []byte) (uint64, bool) {
	table := uint64(binary.LittleEndian.Uint32(b[32:])) * RegionSize
	desc := binary.LittleEndian.Uint64(b[120:])
	if binary.LittleEndian.Uint32(b[8:]) == 1 {
		desc = 0 // reserved in version 1: parseLayout refuses it unless 0
	}
	if desc > math.MaxUint64-table {
		return 0, false
	}
	return table + desc, true
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
	if v, hs := le.Uint32(b[8:]), le.Uint32(b[12:]); v < MinVersion || v > Version || hs != HeaderSize {
		return fmt.Errorf("%w: version %d, header size %d", ErrVersion, v, hs)
	}
	return nil
}

func checksumError(want, got uint64) error {
	return fmt.Errorf("%w: stored %#016x, computed %#016x", ErrChecksum, want, got)
}

// parseLayout checks the header, the region table and the descriptors of a shard
// of size bytes whose checksum is verified, and returns it. b holds the header and,
// if the size leaves room for them, the whole region table and descriptor area.
// With the whole shard in data, the regions alias it; with data nil, they carry no
// Data.
func parseLayout(b []byte, size uint64, data []byte, checksum uint64) (*Shard, error) {
	le := binary.LittleEndian
	s := &Shard{Checksum: checksum}
	s.Version = le.Uint32(b[8:])
	s.Epoch = le.Uint64(b[16:])
	s.Rank = le.Uint32(b[24:])
	s.NRanks = le.Uint32(b[28:])
	nregions := uint64(le.Uint32(b[32:]))
	payload := le.Uint64(b[40:])
	s.CreatedNs = le.Uint64(b[112:])
	desc := le.Uint64(b[120:])
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
	case s.Version < 3 && le.Uint32(b[36:]) != 0, s.Version >= 3 && le.Uint16(b[38:]) != 0, s.Version == 1 && desc != 0:
		return nil, fmt.Errorf("%w: reserved field not zero", ErrBadHeader)
	}
	if s.Version >= 3 {
		s.ABI = ABI{ISA: b[36], LongDouble: b[37]}
	}
	s.Job = string(job[:end])
	// Compare sizes without overflow: each term is bounded by what is left first.
	rest := size - HeaderSize - TrailerSize
	if nregions > rest/RegionSize || desc > rest-nregions*RegionSize || payload != rest-nregions*RegionSize-desc {
		return nil, fmt.Errorf("%w: %d regions, %d descriptor bytes and %d payload bytes do not fit a %d-byte file",
			ErrBadHeader, nregions, desc, payload, size)
	}
	if uint64(len(b)) < HeaderSize+nregions*RegionSize+desc {
		// Only a Verifier of a size not known in advance, whose header claims more
		// of a table than it holds (maxHeld), gets here.
		return nil, fmt.Errorf("%w: a region table and descriptors of %d bytes", ErrBadHeader, nregions*RegionSize+desc)
	}
	descs := b[HeaderSize+nregions*RegionSize : HeaderSize+nregions*RegionSize+desc]
	off := uint64(HeaderSize + nregions*RegionSize + desc)
	var sum, used uint64
	for i := uint64(0); i < nregions; i++ {
		e := b[HeaderSize+i*RegionSize:]
		r := Region{ID: int32(le.Uint32(e)), ElemSize: le.Uint32(e[4:]), Count: le.Uint64(e[8:])}
		n := le.Uint64(e[16:])
		r.Kind, r.Datatype = Kind(le.Uint16(e[24:])), le.Uint16(e[26:])
		if s.Version >= 3 {
			r.Kind, r.Flags = Kind(e[24]), e[25]
		}
		dlen := uint64(le.Uint32(e[28:]))
		switch {
		case r.ElemSize == 0:
			return nil, fmt.Errorf("%w: region %d has element size 0", ErrRegionTable, r.ID)
		case !productIs(r.ElemSize, r.Count, n):
			return nil, fmt.Errorf("%w: region %d: %d bytes is not %d × %d", ErrRegionTable, r.ID, n, r.ElemSize, r.Count)
		case s.Version == 1 && le.Uint64(e[24:]) != 0:
			return nil, fmt.Errorf("%w: region %d: reserved field not zero", ErrRegionTable, r.ID)
		case r.Flags&^flagsKnown != 0:
			return nil, fmt.Errorf("%w: region %d: unknown flags %#x", ErrRegionTable, r.ID, r.Flags)
		case i > 0 && r.ID <= s.Regions[i-1].ID:
			return nil, fmt.Errorf("%w: region ids not strictly increasing at %d", ErrRegionTable, r.ID)
		case n > payload-sum:
			return nil, fmt.Errorf("%w: regions exceed the %d payload bytes", ErrRegionTable, payload)
		case dlen > desc-used:
			return nil, fmt.Errorf("%w: region %d: its descriptor runs past the %d bytes of descriptors", ErrRegionTable, r.ID, desc)
		}
		if err := r.parseDesc(descs[used : used+dlen]); err != nil {
			return nil, fmt.Errorf("%w: region %d: %v", ErrRegionTable, r.ID, err)
		}
		if data != nil {
			r.Data = data[off+sum : off+sum+n]
		}
		sum += n
		used += dlen
		s.Regions = append(s.Regions, r)
	}
	if sum != payload {
		return nil, fmt.Errorf("%w: regions add up to %d bytes, header says %d", ErrRegionTable, sum, payload)
	}
	if used != desc {
		return nil, fmt.Errorf("%w: descriptors add up to %d bytes, header says %d", ErrRegionTable, used, desc)
	}
	s.regions = packRegions(s.Regions)
	return s, nil
}

// parseDesc reads the region's descriptor d and checks it against its kind and
// count (docs/shard-format.md, "bad region table").
func (r *Region) parseDesc(d []byte) error {
	le := binary.LittleEndian
	switch r.Kind {
	case KindPlain, KindReplicated:
		if len(d) != 0 {
			return fmt.Errorf("a %s region with a descriptor of %d bytes", r.Kind, len(d))
		}
	case KindBlock:
		if len(d) != BlockDescSize {
			return fmt.Errorf("a block descriptor of %d bytes", len(d))
		}
		r.Block = Block{Global: le.Uint64(d), Offset: le.Uint64(d[8:])}
		if r.Block.Offset > r.Block.Global || r.Count > r.Block.Global-r.Block.Offset {
			return fmt.Errorf("elements %d + %d beyond the %d of its array", r.Block.Offset, r.Count, r.Block.Global)
		}
	case KindSubarray:
		if len(d) < 8 {
			return fmt.Errorf("a subarray descriptor of %d bytes", len(d))
		}
		ndims, order := le.Uint32(d), Order(le.Uint32(d[4:]))
		if ndims < 1 || ndims > MaxDims || uint64(len(d)) != subarrayDescSize(int(ndims)) {
			return fmt.Errorf("a subarray of %d dimensions in a descriptor of %d bytes", ndims, len(d))
		}
		if order != OrderC && order != OrderFortran {
			return fmt.Errorf("subarray order %d", order)
		}
		sa := Subarray{Order: order, Sizes: make([]uint64, ndims), Subsizes: make([]uint64, ndims), Starts: make([]uint64, ndims)}
		for k := range ndims {
			sa.Sizes[k] = le.Uint64(d[8+8*k:])
			sa.Subsizes[k] = le.Uint64(d[8+8*(ndims+k):])
			sa.Starts[k] = le.Uint64(d[8+8*(2*ndims+k):])
		}
		if err := sa.check(r.Count); err != nil {
			return err
		}
		r.Subarray = sa
	default:
		return fmt.Errorf("unknown kind %d", uint16(r.Kind))
	}
	return nil
}

func subarrayDescSize(ndims int) uint64 { return 8 + 24*uint64(ndims) }

// check says whether sa is a box of its array that holds count elements.
func (sa Subarray) check(count uint64) error {
	n := len(sa.Sizes)
	if n < 1 || n > MaxDims || len(sa.Subsizes) != n || len(sa.Starts) != n {
		return fmt.Errorf("a subarray of %d, %d and %d dimensions", n, len(sa.Subsizes), len(sa.Starts))
	}
	global, local := uint64(1), uint64(1)
	for k := range n {
		size, sub, start := sa.Sizes[k], sa.Subsizes[k], sa.Starts[k]
		if size == 0 || start > size || sub > size-start {
			return fmt.Errorf("dimension %d: %d + %d beyond its size %d", k, start, sub, size)
		}
		var hi uint64
		if hi, global = bits.Mul64(global, size); hi != 0 {
			return fmt.Errorf("an array of more than 2^64 elements")
		}
		local *= sub // at most global
	}
	if local != count {
		return fmt.Errorf("a box of %d elements, count %d", local, count)
	}
	return nil
}

func (r Region) descBytes() []byte {
	le := binary.LittleEndian
	switch r.Kind {
	case KindBlock:
		return le.AppendUint64(le.AppendUint64(nil, r.Block.Global), r.Block.Offset)
	case KindSubarray:
		sa := r.Subarray
		b := le.AppendUint32(le.AppendUint32(nil, uint32(len(sa.Sizes))), uint32(sa.Order))
		for _, list := range [][]uint64{sa.Sizes, sa.Subsizes, sa.Starts} {
			for _, v := range list {
				b = le.AppendUint64(b, v)
			}
		}
		return b
	}
	return nil
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
// unique IDs, each with a descriptor that fits its kind and count. h.Version 0 writes
// the oldest version that holds the regions and h.ABI: 1 when they are all plain, of
// bytes, 3 when the ABI or a region's flags are set.
// libshoal is the production writer; Encode serves tools and tests.
func Encode(h Header, regions []Region) ([]byte, error) {
	if len(h.Job) == 0 || len(h.Job) > MaxJobLen {
		return nil, fmt.Errorf("%w: job id %q must be 1 to %d bytes", ErrBadHeader, h.Job, MaxJobLen)
	}
	version := h.Version
	if version == 0 {
		version = 1
		if h.ABI != (ABI{}) {
			version = 3
		}
		for _, r := range regions {
			if r.Flags != 0 {
				version = 3
			} else if (r.Kind != KindPlain || r.Datatype != 0) && version < 2 {
				version = 2
			}
		}
	}
	if version < 3 && h.ABI != (ABI{}) {
		return nil, fmt.Errorf("%w: version %d records no ABI", ErrBadHeader, version)
	}
	if version < MinVersion || version > Version {
		return nil, fmt.Errorf("%w: version %d", ErrVersion, version)
	}
	le := binary.LittleEndian
	var payload, desc uint64
	for i, r := range regions {
		if i > 0 && r.ID <= regions[i-1].ID {
			return nil, fmt.Errorf("%w: region ids not strictly increasing at %d", ErrRegionTable, r.ID)
		}
		if r.ElemSize == 0 || uint64(len(r.Data)) != uint64(r.ElemSize)*r.Count {
			return nil, fmt.Errorf("%w: region %d: %d bytes is not %d × %d", ErrRegionTable, r.ID, len(r.Data), r.ElemSize, r.Count)
		}
		if version == 1 && (r.Kind != KindPlain || r.Datatype != 0) {
			return nil, fmt.Errorf("%w: region %d: version 1 holds plain regions of bytes only", ErrRegionTable, r.ID)
		}
		if r.Flags&^flagsKnown != 0 || (version < 3 && r.Flags != 0) {
			return nil, fmt.Errorf("%w: region %d: flags %#x in version %d", ErrRegionTable, r.ID, r.Flags, version)
		}
		check := r
		if err := check.parseDesc(r.descBytes()); err != nil {
			return nil, fmt.Errorf("%w: region %d: %v", ErrRegionTable, r.ID, err)
		}
		payload += uint64(len(r.Data))
		desc += uint64(len(r.descBytes()))
	}
	size := HeaderSize + RegionSize*len(regions) + int(desc) + int(payload) + TrailerSize
	b := make([]byte, HeaderSize, size)
	copy(b, Magic)
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], HeaderSize)
	le.PutUint64(b[16:], h.Epoch)
	le.PutUint32(b[24:], h.Rank)
	le.PutUint32(b[28:], h.NRanks)
	le.PutUint32(b[32:], uint32(len(regions)))
	b[36], b[37] = h.ABI.ISA, h.ABI.LongDouble
	le.PutUint64(b[40:], payload)
	copy(b[48:112], h.Job)
	le.PutUint64(b[112:], h.CreatedNs)
	le.PutUint64(b[120:], desc)
	for _, r := range regions {
		var e [RegionSize]byte
		le.PutUint32(e[0:], uint32(r.ID))
		le.PutUint32(e[4:], r.ElemSize)
		le.PutUint64(e[8:], r.Count)
		le.PutUint64(e[16:], uint64(len(r.Data)))
		le.PutUint16(e[24:], uint16(r.Kind))
		e[25] = r.Flags // 0 before version 3
		le.PutUint16(e[26:], r.Datatype)
		le.PutUint32(e[28:], uint32(len(r.descBytes())))
		b = append(b, e[:]...)
	}
	for _, r := range regions {
		b = append(b, r.descBytes()...)
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
