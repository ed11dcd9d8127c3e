package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"shoal/internal/job"
)

// progressBook keeps what the jobs page shows of each MPI job's progress. A
// job's record carries the progress of a farm only; an MPI job's is in its
// "progress" events, in steps of 10%. The book reads each job's events from
// where it stopped the last time, so that a refresh of the page reads only
// what is new. It is safe for concurrent use.
type progressBook struct {
	mu   sync.Mutex
	jobs map[string]progressMark
}

// progressMark is how far the book has read a job's events, and the progress
// they reported last.
type progressMark struct {
	next     uint64
	progress float64
}

// fill sets the Progress of every MPI job of jobs from its events: 1 for a job
// that succeeded. Jobs not in jobs are forgotten.
func (b *progressBook) fill(ctx context.Context, src Source, jobs []job.Job) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.jobs
	b.jobs = make(map[string]progressMark, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if j.Farm != nil || j.Progress > 0 {
			continue
		}
		m, ok := old[j.ID]
		if !ok {
			m = progressMark{next: 1}
		}
		if !ok || !job.Terminal(j.State) {
			m = readProgress(ctx, src, j.ID, m)
		}
		b.jobs[j.ID] = m
		j.Progress = m.progress
		if j.State == job.Succeeded {
			j.Progress = 1
		}
	}
}

// readProgress reads job id's events recorded since m and returns m moved
// past them. A failed read keeps what was read before it.
func readProgress(ctx context.Context, src Source, id string, m progressMark) progressMark {
	st, err := src.Events(ctx, id, m.next, false)
	if err != nil {
		return m
	}
	defer st.Close()
	for {
		e, err := st.Next()
		if err != nil {
			return m
		}
		m.next = e.Seq + 1
		if p, ok := eventProgress(e); ok {
			m.progress = p
		}
	}
}

// eventProgress is the fraction a "progress" event reports: the coordinator
// writes it only in the event's message ("progress 60%").
func eventProgress(e job.Event) (float64, bool) {
	var pct int
	if e.Type != job.EventProgress {
		return 0, false
	}
	if _, err := fmt.Sscanf(e.Message, "progress %d%%", &pct); err != nil || pct < 0 || pct > 100 {
		return 0, false
	}
	return float64(pct) / 100, true
}
