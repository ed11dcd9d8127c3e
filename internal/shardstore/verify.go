package shardstore

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"shoal/internal/ckpt"
)

// mmapMin is the size from which a shard is verified through a read-only
// mapping instead of a copy on the heap: the agent's memory does not grow with
// the ranks' state.
const mmapMin = 64 << 10

// verifyFile fully verifies the shard in f (size bytes) with ckpt.Parse and
// returns its header and checksum. A verification failure is a *verifyFailure;
// other errors are failures to read.
func verifyFile(f *os.File, size int64) (ckpt.Header, uint64, error) {
	if size < mmapMin {
		b := make([]byte, size)
		n, err := f.ReadAt(b, 0)
		if err != nil && err != io.EOF {
			return ckpt.Header{}, 0, err
		}
		b = b[:n] // shorter if the file shrank meanwhile
		s, err := ckpt.Parse(b)
		if err != nil {
			return ckpt.Header{}, 0, &verifyFailure{err}
		}
		return s.Header, s.Checksum, nil
	}
	if int64(int(size)) != size {
		return ckpt.Header{}, 0, fmt.Errorf("shard of %d bytes is too large to map", size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return ckpt.Header{}, 0, fmt.Errorf("mapping %s: %w", f.Name(), err)
	}
	defer unix.Munmap(b)
	unix.Madvise(b, unix.MADV_SEQUENTIAL)
	h, sum, err := parseMapped(b)
	if err != nil {
		return ckpt.Header{}, 0, &verifyFailure{err}
	}
	return h, sum, nil
}

// parseMapped runs ckpt.Parse over a mapped file. If the file is truncated
// while it is read, touching the pages beyond its new end faults (SIGBUS):
// that is turned into ckpt.ErrTruncated instead of a crash of the agent.
func parseMapped(b []byte) (h ckpt.Header, sum uint64, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = fmt.Errorf("%w: the file shrank while it was verified", ckpt.ErrTruncated)
		}
	}()
	s, err := ckpt.Parse(b)
	if err != nil {
		return ckpt.Header{}, 0, err
	}
	// s.Regions alias the mapping: keep only what outlives it.
	return s.Header, s.Checksum, nil
}
