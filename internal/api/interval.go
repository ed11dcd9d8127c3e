package api

import (
	"shoal/internal/job"
	"strconv"
	"strings"
	"time"
)

// ParseIntervalFile reads the interval file libshoal's rank 0 keeps in a job's
// directory (docs/launcher-protocol.md): one line,
// "interval S auto A cost C mtbf M", with S, C and M in seconds and A 0 or 1.
// Anything else is nil: unknown.
func ParseIntervalFile(b []byte) *job.Interval {
	f := strings.Fields(string(b))
	if len(f) != 8 || f[0] != "interval" || f[2] != "auto" || f[4] != "cost" || f[6] != "mtbf" || (f[3] != "0" && f[3] != "1") {
		return nil
	}
	var secs [3]float64
	for i, v := range []string{f[1], f[5], f[7]} {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || !(x >= 0 && x < 1e9) {
			return nil
		}
		secs[i] = x
	}
	d := func(s float64) job.Duration { return job.Duration(time.Duration(s * float64(time.Second))) }
	return &job.Interval{Every: d(secs[0]), Auto: f[3] == "1", Cost: d(secs[1]), MTBF: d(secs[2])}
}
