package job

import (
	"fmt"
	"time"
)

// Describe says a checkpoint interval, and why when libshoal chose it:
// "every 4.5 s (auto: a checkpoint costs the run 12 ms; their nodes lose one
// every 15m0s: no node failed in 2h0m0s of node time)", the last part its
// Record, when set.
func (iv Interval) Describe() string {
	switch {
	case !iv.Auto && iv.Every == 0:
		return "none at an interval (the program may still call shoal_checkpoint)"
	case !iv.Auto:
		return "every " + Seconds(time.Duration(iv.Every)) + ", as asked"
	case iv.Cost == 0:
		return fmt.Sprintf("every %s (auto: until the first checkpoint's cost is known; their nodes lose one every %s)",
			Seconds(time.Duration(iv.Every)), time.Duration(iv.MTBF).Round(time.Second))
	}
	s := fmt.Sprintf("every %s (auto: a checkpoint costs the run %s; their nodes lose one every %s",
		Seconds(time.Duration(iv.Every)), Millis(time.Duration(iv.Cost)), time.Duration(iv.MTBF).Round(time.Second))
	if iv.Record != "" {
		s += ": " + iv.Record
	}
	return s + ")"
}
