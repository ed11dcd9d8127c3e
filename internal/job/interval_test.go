package job

import (
	"testing"
	"time"
)

// An interval says itself, and why when libshoal chose it.
func TestDescribeInterval(t *testing.T) {
	iv := func(every, cost time.Duration) *Interval {
		return &Interval{Every: Duration(every), Auto: true, Cost: Duration(cost), MTBF: Duration(15 * time.Minute)}
	}
	for _, c := range []struct {
		iv   Interval
		want string
	}{
		{Interval{}, "none at an interval (the program may still call shoal_checkpoint)"},
		{Interval{Every: Duration(30 * time.Second)}, "every 30 s, as asked"},
		{*iv(8*time.Second, 0), "every 8 s (auto: until the first checkpoint's cost is known; their nodes lose one every 15m0s)"},
		{*iv(2*time.Minute, 1500*time.Millisecond), "every 2m0s (auto: a checkpoint costs the run 1.5 s; their nodes lose one every 15m0s)"},
		{*iv(time.Second, 400*time.Microsecond), "every 1 s (auto: a checkpoint costs the run 0.4 ms; their nodes lose one every 15m0s)"},
	} {
		c.iv.Record = ""
		if s := c.iv.Describe(); s != c.want {
			t.Errorf("%+v.Describe() = %q, want %q", c.iv, s, c.want)
		}
	}
}
