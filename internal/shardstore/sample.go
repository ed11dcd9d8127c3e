package shardstore

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"shoal/internal/api"
	"shoal/internal/compress"
	"shoal/internal/shard"
)

// SampleSize is how much of a shard OpenToSend compresses to learn how the
// whole would: samplePieces pieces spread evenly from its start to its end, or
// all of it when smaller. About 7 ms of one core, once per version of a shard
// file (the first 4 MiB took 26 ms, 5 % of what an agent spent copying a
// 256 MB shard, bench/copy-cost).
const SampleSize = 1 << 20

const samplePieces = 4

// OpenToSend is Open for a receiver whose link from this node carries link
// bytes/s (0: unknown), and says whether the shard pays to cross it
// compressed ([compress.Decide]). The first time a version of the shard file
// is sent over a known link, a sample of it is compressed and decompressed
// with the settings of the stream ([api.ShardEncoderOptions]), unless an
// earlier shard of the rank had one measured recently (ResampleEpochs), and
// what that showed is kept with the file's verification. The caller reads info.Size raw
// bytes from f and closes it. Errors are as for Open.
func (s *Store) OpenToSend(ref shard.Ref, link float64) (f *os.File, info shard.Info, compressIt bool, err error) {
	f, e, compressIt, err := s.openToSend(ref, link)
	return f, e.info, compressIt, err
}

// openToSend is OpenToSend that returns the file's verification.
func (s *Store) openToSend(ref shard.Ref, link float64) (*os.File, entry, bool, error) {
	f, e, err := s.open(ref)
	if err != nil || !(link > 0) {
		return f, e, false, err
	}
	smp, err := s.sample(ref, f, e)
	if err != nil {
		f.Close()
		return nil, entry{}, false, fmt.Errorf("sampling shard %s: %w", ref, err)
	}
	return f, e, compress.Decide(e.info.Size, link, smp).Compress, nil
}

// ResampleEpochs is how many epochs of a rank's shards on a node share one
// measured sample: a shard without one takes that of the rank's newest earlier
// shard on the node, if it was measured fewer than ResampleEpochs epochs before
// the shard's. A rank's state keeps its character from one checkpoint to the
// next (a field of doubles stays one), and a measure costs 7 to 10 ms of a core
// for each shard: 3 % of what two-core nodes' agents spent copying when all of
// the state changed at every checkpoint (perf, 128 MB shards).
const ResampleEpochs = 8

// sample returns how a sample of the open shard file f, verified as e,
// compresses: measured once per version of the file, or taken from an earlier
// shard of the rank (ResampleEpochs).
func (s *Store) sample(ref shard.Ref, f *os.File, e entry) (compress.Sample, error) {
	if e.sample != nil {
		return *e.sample, nil
	}
	if smp, at, ok := s.earlierSample(ref); ok {
		s.rememberSample(ref.Job, s.path(ref), e.key, smp, at)
		return smp, nil
	}
	b, err := ReadSample(f, e.info.Size)
	if err != nil {
		return compress.Sample{}, err
	}
	smp, err := Measure(b)
	if err != nil {
		// Not a failure of the shard: it is sent raw, and sampled again next time.
		return compress.Sample{}, nil
	}
	s.rememberSample(ref.Job, s.path(ref), e.key, smp, ref.Epoch)
	return smp, nil
}

// earlierSample returns the sample of the newest shard of ref's rank on this
// node from an epoch before ref's, with the epoch it was measured at, when that
// is fewer than ResampleEpochs before ref's.
func (s *Store) earlierSample(ref shard.Ref) (smp compress.Sample, at uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, best := s.newestEarlierLocked(ref, func(_ string, e entry) bool { return e.sample != nil })
	if best.sample == nil || ref.Epoch-best.sampledAt >= ResampleEpochs {
		return compress.Sample{}, 0, false
	}
	return *best.sample, best.sampledAt, true
}

// ReadSample reads the sample OpenToSend measures of a file of size bytes:
// all of it up to SampleSize, else samplePieces pieces of equal length, the
// first at its start, the last at its end, the others evenly between, each at
// a multiple of 4 KiB but the last. With ReadAt, f's offset stays where the
// sender starts.
func ReadSample(f io.ReaderAt, size int64) ([]byte, error) {
	if size <= SampleSize {
		b := make([]byte, size)
		n, err := f.ReadAt(b, 0)
		if err == io.EOF {
			err = nil
		}
		return b[:n], err
	}
	const piece = SampleSize / samplePieces
	b := make([]byte, SampleSize)
	for i := range int64(samplePieces) {
		off := (size - piece) * i / (samplePieces - 1)
		if i < samplePieces-1 {
			off &^= 4<<10 - 1
		}
		if _, err := f.ReadAt(b[i*piece:(i+1)*piece], off); err != nil {
			return nil, err // the file shrank: EOF too is a failure
		}
	}
	return b, nil
}

// rememberSample keeps smp, measured on a shard of epoch at, with the cached
// verification of path's version key, if that is still the one cached.
func (s *Store) rememberSample(job, path string, key fileKey, smp compress.Sample, at uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.cache[job][path]; ok && e.key == key {
		e.sample, e.sampledAt = &smp, at
		s.cache[job][path] = e
	}
}

// samplers are the zstd encoder and decoder Measure uses, made once and warmed
// up so that no measure pays for their tables. Each EncodeAll and DecodeAll
// runs on one goroutine, and as many run at once as there are cores, so
// concurrent measures do not wait for each other.
var samplers = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	enc, err := zstd.NewWriter(nil, append(api.ShardEncoderOptions(), zstd.WithEncoderConcurrency(0))...)
	if err != nil {
		panic(err) // the options are constant
	}
	dec, err := zstd.NewReader(nil, append(api.ShardDecoderOptions(), zstd.WithDecoderConcurrency(0))...)
	if err != nil {
		panic(err)
	}
	warm := make([]byte, 64<<10)
	dec.DecodeAll(enc.EncodeAll(warm, nil), nil)
	return enc, dec
})

// Measure compresses and decompresses b, a sample of a shard, as a shard's
// stream is, and returns the ratio and both throughputs on this machine, on
// one core. The decompression is timed here too, on the sender: the nodes of a
// cluster are assumed alike, and the receiver's speed on this very data is
// what matters (it is faster the better the data compresses).
func Measure(b []byte) (compress.Sample, error) {
	if len(b) == 0 {
		return compress.Sample{}, fmt.Errorf("measure compression: empty sample")
	}
	enc, dec := samplers()
	start := time.Now()
	z := enc.EncodeAll(b, make([]byte, 0, len(b)/2))
	tc := max(time.Since(start), time.Microsecond)
	start = time.Now()
	out, err := dec.DecodeAll(z, make([]byte, 0, len(b)))
	td := max(time.Since(start), time.Microsecond)
	if err != nil {
		return compress.Sample{}, fmt.Errorf("measure compression: decoding the sample: %w", err)
	}
	if len(out) != len(b) {
		return compress.Sample{}, fmt.Errorf("measure compression: the sample decoded to %d bytes, want %d", len(out), len(b))
	}
	n := float64(len(b))
	return compress.Sample{Ratio: float64(len(z)) / n, Compress: n / tc.Seconds(), Decompress: n / td.Seconds()}, nil
}
