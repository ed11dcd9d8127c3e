package fanout

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every index is called once, never more than limit at a time, and the bound
// is reached when there is enough to do.
func TestEachBounded(t *testing.T) {
	for _, tt := range []struct{ n, limit, wantMax int }{
		{200, 8, 8},
		{5, 8, 5},
		{0, 8, 0},
		{30, 0, 30}, // no bound
		{1, 1, 1},
	} {
		var running, most atomic.Int32
		var mu sync.Mutex
		called := map[int]int{}
		// The first calls wait until wantMax of them run at once (or 5 s pass,
		// when the bound keeps them fewer), so that a bound too wide shows.
		release := make(chan struct{})
		var once sync.Once
		Each(tt.n, tt.limit, func(i int) {
			r := running.Add(1)
			for {
				m := most.Load()
				if r <= m || most.CompareAndSwap(m, r) {
					break
				}
			}
			if int(r) >= tt.wantMax {
				once.Do(func() { close(release) })
			}
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
			running.Add(-1)
			mu.Lock()
			called[i]++
			mu.Unlock()
		})
		if len(called) != tt.n {
			t.Errorf("Each(%d, %d): %d indexes called, want %d", tt.n, tt.limit, len(called), tt.n)
		}
		for i, c := range called {
			if c != 1 || i < 0 || i >= tt.n {
				t.Errorf("Each(%d, %d): index %d called %d times", tt.n, tt.limit, i, c)
			}
		}
		if got := int(most.Load()); got != tt.wantMax {
			t.Errorf("Each(%d, %d): at most %d calls at once, want %d", tt.n, tt.limit, got, tt.wantMax)
		}
	}
}
