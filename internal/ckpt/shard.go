// Package ckpt reads, verifies and stores checkpoint shards and decides which epoch a
// job restarts from. The shard format is specified in docs/shard-format.md; libshoal
// writes shards, this package verifies every shard the agent handles.
package ckpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
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
// them with errors.Is; a *ShardError adds which shard and why.
var (
	ErrTruncated   = errors.New("ckpt: truncated")
	ErrBadMagic    = errors.New("ckpt: bad magic")
	ErrVersion     = errors.New("ckpt: unsupported version")
	ErrChecksum    = errors.New("ckpt: checksum mismatch")
	ErrBadHeader   = errors.New("ckpt: bad header")
	ErrRegionTable = errors.New("ckpt: bad region table")
	ErrWrongShard  = errors.New("ckpt: wrong shard")
)

// ShortName is the name docs/shard-format.md and the test vectors use for a
// verification error ("checksum mismatch"), or "" when err is none of them.
func ShortName(err error) string {
	for _, e := range []error{ErrTruncated, ErrBadMagic, ErrVersion, ErrChecksum,
		ErrBadHeader, ErrRegionTable, ErrWrongShard} {
		if errors.Is(err, e) {
			return e.Error()[len("ckpt: "):]
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
	le := binary.LittleEndian
	if len(b) < HeaderSize+TrailerSize {
		return nil, ErrTruncated
	}
	if string(b[:8]) != Magic {
		return nil, ErrBadMagic
	}
	if v, hs := le.Uint32(b[8:]), le.Uint32(b[12:]); v != Version || hs != HeaderSize {
		return nil, fmt.Errorf("%w: version %d, header size %d", ErrVersion, v, hs)
	}
	body := b[:len(b)-TrailerSize]
	want := le.Uint64(b[len(b)-TrailerSize:])
	if got := xxh3.Hash(body); got != want {
		return nil, fmt.Errorf("%w: stored %#016x, computed %#016x", ErrChecksum, want, got)
	}
	s := &Shard{Checksum: want}
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
	// Compare sizes without overflow: both terms are bounded by len(b) first.
	rest := uint64(len(b) - HeaderSize - TrailerSize)
	if nregions > rest/RegionSize || payload != rest-nregions*RegionSize {
		return nil, fmt.Errorf("%w: %d regions and %d payload bytes do not fit a %d-byte file",
			ErrBadHeader, nregions, payload, len(b))
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
		r.Data = b[off+sum : off+sum+n]
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
	return le.AppendUint64(b, xxh3.Hash(b)), nil
}

// productIs reports whether elemSize × count == n without overflowing.
func productIs(elemSize uint32, count, n uint64) bool {
	hi, lo := bits.Mul64(uint64(elemSize), count)
	return hi == 0 && lo == n
}
