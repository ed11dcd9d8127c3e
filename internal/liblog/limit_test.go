package liblog

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	type call struct {
		at   time.Duration // since the start
		key  string
		ok   bool
		supp int
	}
	for _, tc := range []struct {
		name  string
		calls []call
	}{
		{"first line passes", []call{{0, "a", true, 0}}},
		{"repeat within the period is held back", []call{
			{0, "a", true, 0}, {time.Second, "a", false, 0}, {29 * time.Second, "a", false, 0},
		}},
		{"a period later one passes with the count", []call{
			{0, "a", true, 0}, {time.Second, "a", false, 0}, {2 * time.Second, "a", false, 0},
			{30 * time.Second, "a", true, 2}, {31 * time.Second, "a", false, 0}, {60 * time.Second, "a", true, 1},
		}},
		{"after a quiet period, nothing held back", []call{
			{0, "a", true, 0}, {5 * time.Minute, "a", true, 0},
		}},
		{"keys are apart", []call{
			{0, "a", true, 0}, {time.Second, "b", true, 0}, {2 * time.Second, "a", false, 0}, {3 * time.Second, "b", false, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			now := start
			l := NewLimiter(30*time.Second, func() time.Time { return now })
			for i, c := range tc.calls {
				now = start.Add(c.at)
				ok, n := l.Allow(c.key)
				if ok != c.ok || n != c.supp {
					t.Errorf("call %d (%s at %v): got %v, %d; want %v, %d", i, c.key, c.at, ok, n, c.ok, c.supp)
				}
			}
		})
	}
}

func TestLimiterForgetsOldKeys(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	l := NewLimiter(30*time.Second, func() time.Time { return now })
	for i := range maxKeys {
		l.Allow(fmt.Sprint(i))
	}
	now = now.Add(time.Minute)
	l.Allow("new")
	if got := len(l.seen); got != 1 {
		t.Errorf("keys remembered after a full map a period later: got %d, want 1", got)
	}
}
