// Package fanout makes one call per item of a list in parallel and bounded:
// what a coordinator or an agent does once per node of a run or of the
// cluster (grants, fences, link rows). Unbounded, such a round at 10,000
// nodes is 10,000 connections and TLS handshakes opened at the same instant
// by one agent, past its file descriptors and in one burst of its CPU;
// bounded, it is [Limit] at a time, each started as soon as one ends.
package fanout

import "sync"

// Limit is how many calls of one round run at once: enough that a round over
// a few hundred nodes takes a few round trips, few enough that a round over
// ten thousand stays within an agent's file descriptors and does not queue
// thousands of handshakes on its CPU at once.
const Limit = 64

// Each calls fn(i) for every i from 0 to n-1, at most limit calls at a time
// (no bound when limit < 1), and returns when every call has returned.
func Each(n, limit int, fn func(i int)) {
	if limit < 1 || limit > n {
		limit = n
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < limit; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
