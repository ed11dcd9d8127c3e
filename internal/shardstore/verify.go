package shardstore

import (
	"io"
	"os"

	"shoal/internal/ckpt"
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
func verifyFile(f *os.File, size int64) (ckpt.Header, uint64, []uint64, error) {
	blocks := newBlockSums()
	h, sum, err := ckpt.Verify(io.TeeReader(io.NewSectionReader(f, 0, size), blocks), size)
	if err != nil {
		if ckpt.ShortName(err) != "" {
			return ckpt.Header{}, 0, nil, &verifyFailure{err}
		}
		return ckpt.Header{}, 0, nil, err
	}
	return h, sum, blocks.Sums(), nil
}
