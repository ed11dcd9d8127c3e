package membership

import (
	"runtime"
	"time"
)

// DefaultSpeedSample is how long [MeasureSpeed] runs at agent start.
const DefaultSpeedSample = 150 * time.Millisecond

// speedSink keeps the compiler from removing the measurement loop.
var speedSink uint64

// MeasureSpeed runs a fixed integer and floating-point loop on one core for about
// d and returns how many iterations it completed per second. The work per
// iteration never changes, so the ratio between two nodes' results estimates how
// much faster one runs a single-threaded compute kernel; noise is a few percent.
// d ≤ 0 returns 0 (not measured).
func MeasureSpeed(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	runtime.Gosched() // start with a fresh time slice
	const batch = 1 << 12
	x, acc, f := uint64(0x9E3779B97F4A7C15), uint64(0), 1.0
	var iters uint64
	start := time.Now()
	for {
		for i := 0; i < batch; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			acc += x * 0x2545F4914F6CDD1D
			f = f*1.0000001 + float64(x&0xff)*1e-9
		}
		iters += batch
		if el := time.Since(start); el >= d {
			speedSink = acc + uint64(f)
			return uint64(float64(iters) / el.Seconds())
		}
	}
}
