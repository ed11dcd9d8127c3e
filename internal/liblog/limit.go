package liblog

import (
	"sync"
	"time"
)

// DefaultEvery is how often a line that repeats is let through.
const DefaultEvery = 30 * time.Second

// maxKeys bounds the lines a [Limiter] remembers; past it, it forgets the
// ones it has not let through for an interval.
const maxKeys = 1024

// A Limiter lets the first line with a given key through, then at most one a
// period, and counts the ones it held back in between. It is safe for
// concurrent use.
type Limiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]*seen
}

type seen struct {
	last       time.Time // when a line with the key was last let through
	suppressed int       // lines held back since
}

// NewLimiter returns a Limiter that lets a key through once every period,
// reading the time from now (time.Now when nil).
func NewLimiter(every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{every: every, now: now, seen: map[string]*seen{}}
}

// Allow reports whether a line with key is to be written now and, when it is,
// how many lines with that key were held back since the last one written.
func (l *Limiter) Allow(key string) (ok bool, suppressed int) {
	t := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s, known := l.seen[key]
	if !known {
		if len(l.seen) >= maxKeys {
			l.forget(t)
		}
		l.seen[key] = &seen{last: t}
		return true, 0
	}
	if t.Sub(s.last) < l.every {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.last, s.suppressed = t, 0
	return true, n
}

// forget drops the keys not let through for a period, whose next line would
// be let through anyway; their count of held-back lines is lost.
func (l *Limiter) forget(t time.Time) {
	for k, s := range l.seen {
		if t.Sub(s.last) >= l.every {
			delete(l.seen, k)
		}
	}
}
