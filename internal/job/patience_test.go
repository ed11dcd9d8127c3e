package job

import (
	"testing"
	"time"
)

func TestPatience(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		silent, epoch time.Time
		relaunch      time.Duration
		want          time.Duration
	}{
		{t0, t0.Add(-9 * time.Second), time.Second, 10 * time.Second}, // work plus relaunch
		{t0, t0, 2 * time.Second, 2 * time.Second},                    // an epoch just taken
		{t0, t0.Add(time.Second), 0, 0},                               // clocks apart: never negative
		{t0, t0.Add(-time.Hour), time.Second, MaxPatience},            // bounded
	} {
		if got := Patience(c.silent, c.epoch, c.relaunch); got != c.want {
			t.Errorf("Patience(silent %v, epoch %v, relaunch %v) = %v, want %v", c.silent.Sub(t0), c.epoch.Sub(t0), c.relaunch, got, c.want)
		}
	}
	// A node fences its ranks no later than its coordinator gives up on it,
	// whatever the work and the relaunch, when the node's newest shard is no
	// older than the run's newest complete epoch and their first doubts are
	// up to a second apart.
	for _, work := range []time.Duration{0, 300 * time.Millisecond, 5 * time.Second, 2 * time.Minute} {
		for _, ahead := range []time.Duration{0, 700 * time.Millisecond, 10 * time.Second} { // the node's shard newer by
			for _, skew := range []time.Duration{-time.Second, 0, 400 * time.Millisecond, time.Second} { // the node doubts later by
				for _, relaunch := range []time.Duration{0, 2 * time.Second} {
					epoch := t0.Add(-work)
					givesUp := t0.Add(Patience(t0, epoch, relaunch))
					doubt := t0.Add(skew)
					fence := doubt.Add(FenceAfter(doubt, epoch.Add(min(ahead, work))))
					// A fence at the doubt itself waits, as the coordinator does,
					// for membership's verdict alone.
					if fence.After(givesUp) && FenceAfter(doubt, epoch.Add(min(ahead, work))) > 0 {
						t.Errorf("work %v, shard %v newer, doubt %v later, relaunch %v: the node fences at %v, after its coordinator gives up (%v)",
							work, ahead, skew, relaunch, fence.Sub(t0), givesUp.Sub(t0))
					}
				}
			}
		}
	}
}
