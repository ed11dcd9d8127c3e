package compress

import (
	"math"
	"testing"
	"time"
)

const (
	mbit = 1e6 / 8 // bytes/s of one Mbit/s
	mib  = 1 << 20
)

func TestDecide(t *testing.T) {
	// A heat-like shard: a quarter of its size, compressed at 400 MB/s and
	// decompressed at 1.2 GB/s on one core.
	heat := Sample{Ratio: 0.25, Compress: 400e6, Decompress: 1.2e9}
	random := Sample{Ratio: 1.0001, Compress: 2e9, Decompress: 8e9}
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name          string
		size          int64
		link          float64
		s             Sample
		compress      bool
		raw, squeezed time.Duration // 0: not checked
	}{
		// The link's speed decides, for a compressible shard.
		{"20 Mbit/s, wire-bound", 100 * mib, 20 * mbit, heat, true, 41943040 * time.Microsecond, 10485760 * time.Microsecond},
		{"100 Mbit/s, wire-bound", 100 * mib, 100 * mbit, heat, true, 8388608 * time.Microsecond, 2097152 * time.Microsecond},
		{"1 Gbit/s, compressor-bound", 100 * mib, 1000 * mbit, heat, true, 838860800 * time.Nanosecond, 262144 * time.Microsecond},
		{"10 Gbit/s, slower compressed", 100 * mib, 10000 * mbit, heat, false, 83886080 * time.Nanosecond, 262144 * time.Microsecond},
		{"loopback", 100 * mib, 5e9, heat, false, 0, 0},
		// Compressor-bound at exactly the link's speed: no gain.
		{"compressor as fast as the link", mib, 400e6, heat, false, 2621440 * time.Nanosecond, 2621440 * time.Nanosecond},
		// Around MinSaving: saving 9% is not enough, 11% is.
		{"saves 9%", mib, 100e6, Sample{Ratio: 0.91, Compress: 1e12, Decompress: 1e12}, false, 0, 0},
		{"saves 11%", mib, 100e6, Sample{Ratio: 0.89, Compress: 1e12, Decompress: 1e12}, true, 0, 0},
		{"saves 11% but the compressor saves 8%", mib, 100e6, Sample{Ratio: 0.89, Compress: 100e6 / 0.92, Decompress: 1e12}, false, 0, 0},
		{"saves 11% but the decompressor saves 8%", mib, 100e6, Sample{Ratio: 0.89, Compress: 1e12, Decompress: 100e6 / 0.92}, false, 0, 0},
		// Incompressible data never pays, even on a slow link.
		{"random over 20 Mbit/s", 100 * mib, 20 * mbit, random, false, 41943040 * time.Microsecond, 0},
		{"ratio 1", 100 * mib, 20 * mbit, Sample{Ratio: 1, Compress: 1e12, Decompress: 1e12}, false, 0, 0},
		// The size does not change the answer.
		{"one byte over 20 Mbit/s", 1, 20 * mbit, heat, true, 400 * time.Nanosecond, 100 * time.Nanosecond},
		{"1 TiB over 20 Mbit/s", 1 << 40, 20 * mbit, heat, true, 0, 0},
		// Unknown or nonsense inputs: raw.
		{"unknown link", 100 * mib, 0, heat, false, 0, 0},
		{"negative link", 100 * mib, -1, heat, false, 0, 0},
		{"infinite link", 100 * mib, inf, heat, false, 0, 0},
		{"NaN link", 100 * mib, nan, heat, false, 0, 0},
		{"empty shard", 0, 20 * mbit, heat, false, 0, 0},
		{"negative size", -1, 20 * mbit, heat, false, 0, 0},
		{"no sample", 100 * mib, 20 * mbit, Sample{}, false, 41943040 * time.Microsecond, 0},
		{"zero ratio", mib, 20 * mbit, Sample{Ratio: 0, Compress: 1e9, Decompress: 1e9}, false, 0, 0},
		{"NaN ratio", mib, 20 * mbit, Sample{Ratio: nan, Compress: 1e9, Decompress: 1e9}, false, 0, 0},
		{"no compression throughput", mib, 20 * mbit, Sample{Ratio: 0.1, Decompress: 1e9}, false, 0, 0},
		{"infinite compression throughput", mib, 20 * mbit, Sample{Ratio: 0.1, Compress: inf, Decompress: 1e9}, false, 0, 0},
		{"negative decompression throughput", mib, 20 * mbit, Sample{Ratio: 0.1, Compress: 1e9, Decompress: -1}, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.size, tt.link, tt.s)
			if p.Compress != tt.compress {
				t.Errorf("Decide(%d, %g, %+v) = %+v: got compress %v, want %v", tt.size, tt.link, tt.s, p, p.Compress, tt.compress)
			}
			if tt.raw != 0 && !near(p.Raw, tt.raw) {
				t.Errorf("Decide(%d, %g, %+v): got raw %v, want %v", tt.size, tt.link, tt.s, p.Raw, tt.raw)
			}
			if tt.squeezed != 0 && !near(p.Compressed, tt.squeezed) {
				t.Errorf("Decide(%d, %g, %+v): got compressed %v, want %v", tt.size, tt.link, tt.s, p.Compressed, tt.squeezed)
			}
			if p.Compress && !(p.Compressed > 0 && float64(p.Compressed) <= (1-MinSaving)*float64(p.Raw)*(1+1e-9)) {
				t.Errorf("Decide(%d, %g, %+v) = %+v: compresses without saving %v", tt.size, tt.link, tt.s, p, MinSaving)
			}
		})
	}
}

// TestDecideUnknownTimes: what cannot be predicted is zero.
func TestDecideUnknownTimes(t *testing.T) {
	if p := Decide(mib, 0, Sample{Ratio: 0.5, Compress: 1e9, Decompress: 1e9}); p != (Plan{}) {
		t.Errorf("Decide with no link = %+v, want the zero Plan", p)
	}
	if p := Decide(mib, 1e6, Sample{}); p.Compressed != 0 || p.Raw == 0 {
		t.Errorf("Decide with no sample = %+v, want only the raw time", p)
	}
}

// TestDecideSaturates: an absurdly slow link does not overflow the durations,
// and the choice is made on the times before they saturate.
func TestDecideSaturates(t *testing.T) {
	p := Decide(math.MaxInt64, 1e-9, Sample{Ratio: 0.5, Compress: 1e9, Decompress: 1e9})
	if p.Raw != math.MaxInt64 || p.Compressed != math.MaxInt64 || !p.Compress {
		t.Errorf("Decide over a near-dead link = %+v, want both times saturated, compressed", p)
	}
}

// near reports whether got is within a microsecond or 1e-6 of want.
func near(got, want time.Duration) bool {
	d := math.Abs(float64(got - want))
	return d <= float64(time.Microsecond) || d <= 1e-6*float64(want)
}
