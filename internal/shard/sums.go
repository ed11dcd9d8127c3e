package shard

import (
	"encoding/binary"
	"fmt"
)

// A block sums file (rNNNNNN.sums beside rNNNNNN.shard, docs/shard-format.md) holds
// the XXH3-64 of each block of a shard file as libshoal wrote it, with the version of
// the file it describes (its inode and modification time as the writer saw them
// before renaming it into place), the file's size and its checksum. A node's agent
// that finds the shard it is about to verify still at that version takes its
// blocks' sums from here instead of reading the shard back.
const (
	SumsMagic     = "SHOALSUM"
	SumsVersion   = 1
	SumsFixedSize = 48
)

// Sums is a parsed block sums file.
type Sums struct {
	BlockSize uint32
	ShardSize int64
	// Checksum is the shard's own: the last 8 bytes of its file.
	Checksum uint64
	// Ino and MtimeNs are the shard file's inode and modification time (ns since
	// the epoch) when its writer took the sums.
	Ino     uint64
	MtimeNs int64
	// Blocks are the XXH3-64 (seed 0) of each BlockSize bytes of the shard file,
	// the last block possibly shorter.
	Blocks []uint64
}

// SumsFileSize is the length of the block sums file of a shard of size bytes in
// blocks of blockSize.
func SumsFileSize(size int64, blockSize uint32) int64 {
	return SumsFixedSize + 8*blocks(size, blockSize) + TrailerSize
}

func blocks(size int64, blockSize uint32) int64 {
	return (size + int64(blockSize) - 1) / int64(blockSize)
}

// Encode returns the block sums file of s.
func (s Sums) Encode() []byte {
	b := make([]byte, SumsFixedSize, SumsFixedSize+8*len(s.Blocks)+TrailerSize)
	copy(b, SumsMagic)
	binary.LittleEndian.PutUint32(b[8:], SumsVersion)
	binary.LittleEndian.PutUint32(b[12:], s.BlockSize)
	binary.LittleEndian.PutUint64(b[16:], uint64(s.ShardSize))
	binary.LittleEndian.PutUint64(b[24:], s.Checksum)
	binary.LittleEndian.PutUint64(b[32:], s.Ino)
	binary.LittleEndian.PutUint64(b[40:], uint64(s.MtimeNs))
	for _, sum := range s.Blocks {
		b = binary.LittleEndian.AppendUint64(b, sum)
	}
	return binary.LittleEndian.AppendUint64(b, Checksum(b))
}

// ParseSums parses and checks a block sums file: its magic, version and checksum,
// a block size that is not zero, a shard size that holds at least a shard's header
// and trailer, and as many sums as the shard has blocks. Failures wrap the shard
// format's sentinels (ErrTruncated, ErrBadMagic, ErrVersion, ErrChecksum,
// ErrBadHeader).
func ParseSums(b []byte) (Sums, error) {
	if len(b) < SumsFixedSize+TrailerSize {
		return Sums{}, fmt.Errorf("block sums: %d bytes: %w", len(b), ErrTruncated)
	}
	if string(b[:8]) != SumsMagic {
		return Sums{}, fmt.Errorf("block sums: %w", ErrBadMagic)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != SumsVersion {
		return Sums{}, fmt.Errorf("block sums: version %d: %w", v, ErrVersion)
	}
	body := len(b) - TrailerSize
	if want, got := binary.LittleEndian.Uint64(b[body:]), Checksum(b[:body]); want != got {
		return Sums{}, fmt.Errorf("block sums: %w", checksumError(want, got))
	}
	s := Sums{
		BlockSize: binary.LittleEndian.Uint32(b[12:]),
		ShardSize: int64(binary.LittleEndian.Uint64(b[16:])),
		Checksum:  binary.LittleEndian.Uint64(b[24:]),
		Ino:       binary.LittleEndian.Uint64(b[32:]),
		MtimeNs:   int64(binary.LittleEndian.Uint64(b[40:])),
	}
	if s.BlockSize == 0 || s.ShardSize < HeaderSize+TrailerSize {
		return Sums{}, fmt.Errorf("block sums: block size %d, shard size %d: %w", s.BlockSize, s.ShardSize, ErrBadHeader)
	}
	if n := blocks(s.ShardSize, s.BlockSize); int64(body-SumsFixedSize) != 8*n {
		return Sums{}, fmt.Errorf("block sums: %d bytes of sums for %d blocks: %w", body-SumsFixedSize, n, ErrBadHeader)
	}
	for off := SumsFixedSize; off < body; off += 8 {
		s.Blocks = append(s.Blocks, binary.LittleEndian.Uint64(b[off:]))
	}
	return s, nil
}
