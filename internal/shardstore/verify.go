package shardstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"syscall"

	"shoal/internal/api"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/userdir"
)

// verifyFile fully verifies the shard in f (size bytes) with ckpt.Verify and
// returns its header, checksum and blocks' sums. A verification failure (a file that shrank
// while it was read among them) is a *verifyFailure; other errors are failures
// to read.
//
// The file is read, not mapped: the agent's memory does not grow with the
// ranks' state either way, but the pages of a mapping fault in from disk where
// the Go runtime cannot stop the goroutine, and a garbage collection waiting
// for it stops the whole agent (ckpt.Verify).
func verifyFile(f *os.File, size int64) (shard.Header, uint64, []uint64, error) {
	blocks := newBlockSums()
	h, sum, err := shard.Verify(io.TeeReader(io.NewSectionReader(f, 0, size), blocks), size)
	if err != nil {
		if shard.ShortName(err) != "" {
			return shard.Header{}, 0, nil, &verifyFailure{err}
		}
		return shard.Header{}, 0, nil, err
	}
	return h, sum, blocks.Sums(), nil
}

// writersSums takes the blocks' sums of the shard file f at path (version fi)
// from the block sums file its writer left beside it (ckpt.Sums), with its header
// and checksum, without reading the rest of the shard: ok when that file parses,
// is in this store's block size and describes this very version of the shard
// (its inode, modification time and size) with the checksum it ends in, and the
// header reads. A new shard's bytes are then trusted as the writer hashed them
// before it renamed the shard into place, the bytes it wrote; reading them back
// at once would read the same pages of the page cache. A copy sent from it has
// each block checked against these sums by its receiver (patch), a whole copy and
// a restart verify the whole; a shard changed in place after its writer took the
// sums has another version, which is verified whole here.
func writersSums(t userdir.Tree, path string, f *os.File, fi os.FileInfo) (h shard.Header, sum uint64, blocks []uint64, ok bool) {
	st, isUnix := fi.Sys().(*syscall.Stat_t)
	size := fi.Size()
	if !isUnix || size > api.MaxChangesBlocks*BlockSize {
		return shard.Header{}, 0, nil, false
	}
	b, err := readSmall(t, jobdir.SumsPath(path), shard.SumsFileSize(size, BlockSize))
	if err != nil {
		return shard.Header{}, 0, nil, false
	}
	sums, err := shard.ParseSums(b)
	if err != nil || sums.BlockSize != BlockSize || sums.ShardSize != size ||
		sums.Ino != st.Ino || sums.MtimeNs != fi.ModTime().UnixNano() {
		return shard.Header{}, 0, nil, false
	}
	h, sum, err = readHeadAndSum(f, size)
	if err != nil || sum != sums.Checksum {
		return shard.Header{}, 0, nil, false
	}
	return h, sum, sums.Blocks, true
}

// readHeadAndSum reads the header (shard.ReadHeader: its checks, and the region
// table's and descriptors', which give the regions' kinds) and the trailing checksum
// of the shard file f of size bytes, without the rest of it. A header that fails its
// checks wraps a shard sentinel.
func readHeadAndSum(f *os.File, size int64) (shard.Header, uint64, error) {
	h, err := shard.ReadHeader(io.NewSectionReader(f, 0, size), size)
	if err != nil {
		return h, 0, err
	}
	var tail [shard.TrailerSize]byte
	if _, err := f.ReadAt(tail[:], size-shard.TrailerSize); err != nil {
		return shard.Header{}, 0, err
	}
	return h, binary.LittleEndian.Uint64(tail[:]), nil
}

// readSmall reads the file at path in t when it is exactly want bytes long.
func readSmall(t userdir.Tree, path string, want int64) ([]byte, error) {
	f, err := t.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, want+1)
	n, err := io.ReadFull(f, b)
	if err != io.ErrUnexpectedEOF || int64(n) != want {
		return nil, fmt.Errorf("%s: not %d bytes", path, want)
	}
	return b[:n], nil
}
