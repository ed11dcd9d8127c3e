// Package compress decides whether a shard should cross the network between
// two agents compressed: it predicts the transfer raw and compressed from the
// link's bandwidth and from what compressing a sample of the shard showed, and
// says compress only when that clearly pays. It does no I/O; the sending agent
// measures (internal/shardstore), the receiving agent knows its links
// (internal/links).
//
// # The model
//
// A raw transfer of size bytes over a link of L bytes/s takes size/L. A
// compressed one is streamed: the sender compresses a block while the previous
// one is on the wire and the receiver decompresses it, so the three stages
// overlap and the slowest one sets the pace:
//
//	max(size/C, size·ratio/L, size/D)
//
// where ratio is compressed over raw bytes and C and D are the compression and
// decompression throughputs in bytes of raw data per second. Compression is
// chosen when that is at most (1 − [MinSaving]) of the raw time. Both times
// are proportional to size, so the choice does not depend on it (the fixed
// costs of a transfer, a round trip and a frame header, are the same either way
// and left out).
package compress

import (
	"math"
	"time"
)

// MinSaving is the least fraction of the raw transfer time that compressing
// must save to be chosen. The prediction rests on a sample (the start of the
// shard, which may compress better or worse than the rest), on throughputs
// measured on the sender when it may have been idler than during the transfer,
// and on a link estimate a few minutes old; and compression takes CPU on both
// nodes, often from a job's ranks, which the time model does not count. Below
// a tenth those errors can turn a predicted gain into a loss; above it they
// rarely do, and a shard near break-even gains too little to be worth the CPU.
const MinSaving = 0.10

// Sample is what compressing a sample of one shard showed.
type Sample struct {
	// Ratio is compressed bytes over raw bytes: 0.25 is four times smaller, 1
	// or more is incompressible.
	Ratio float64
	// Compress and Decompress are throughputs, in bytes of raw data per second.
	Compress, Decompress float64
}

// Plan is the predicted transfer of one shard over one link.
type Plan struct {
	// Raw and Compressed are the predicted transfer times; zero when they
	// cannot be predicted (unknown link, or for Compressed a sample that is
	// not usable).
	Raw, Compressed time.Duration
	// Compress says to send the shard compressed: the link is known, the
	// sample usable, and Compressed ≤ (1 − MinSaving)·Raw.
	Compress bool
}

// Decide predicts the transfer of size bytes over a link of link bytes/s with
// s and says whether to compress. An unknown link (0, negative, not finite)
// or an unusable sample (a field that is not a positive finite number) means
// raw: compressing blindly could as well slow a fast link down.
func Decide(size int64, link float64, s Sample) Plan {
	if size <= 0 || !positive(link) {
		return Plan{}
	}
	raw := float64(size) / link
	p := Plan{Raw: seconds(raw)}
	if !positive(s.Ratio) || !positive(s.Compress) || !positive(s.Decompress) {
		return p
	}
	comp := float64(size) * max(1/s.Compress, s.Ratio/link, 1/s.Decompress)
	p.Compressed = seconds(comp)
	p.Compress = comp <= (1-MinSaving)*raw
	return p
}

func positive(x float64) bool { return x > 0 && !math.IsInf(x, 1) && !math.IsNaN(x) }

// seconds converts s to a Duration, saturating rather than overflowing.
func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}
