package place

import (
	"fmt"
	"time"

	"shoal/internal/job"
)

// Describe says what e weighs: "estimated to save 40 s of the remaining
// 2m0s, at a cost of 6 s (a checkpoint and a restart, as measured)".
func (e Estimate) Describe() string {
	return fmt.Sprintf("estimated to save %s of the remaining %s, at a cost of %s (a checkpoint and a restart, as measured)",
		job.Seconds(e.Gain), job.Seconds(e.Remaining), job.Seconds(e.Cost))
}

// PerIteration writes a predicted time per iteration to 3 figures below 10 s
// ("651 ms", "1.49 s"), so that two times the 5 % rule tells apart read apart.
func PerIteration(secs float64) string {
	switch {
	case secs < 1:
		return fmt.Sprintf("%.0f ms", secs*1000)
	case secs < 10:
		return fmt.Sprintf("%.2f s", secs)
	}
	return job.Seconds(time.Duration(secs * float64(time.Second)))
}

// OptionsOf are the bounds a job's spec sets on its placements.
func OptionsOf(spec job.Spec) Options {
	return Options{MaxOversubscribe: spec.MaxOversubscribe, MaxPerNode: spec.RanksPerNode}
}
