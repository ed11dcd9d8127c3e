package job

import "math"

// Oversubscription is the job's ranks per core.
func (spec Spec) Oversubscription() float64 {
	if spec.MaxOversubscribe <= 0 {
		return 1
	}
	return spec.MaxOversubscribe
}

// CoresNeeded is how many cores the job's ranks need at its oversubscription.
func (spec Spec) CoresNeeded() int {
	return int(math.Ceil(float64(spec.Ranks)/spec.Oversubscription() - 1e-9))
}
