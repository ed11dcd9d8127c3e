package metrics

import (
	"encoding/json"
	"maps"
	"sync"
	"time"

	"shoal/internal/job"
)

// causeUnknown labels a relaunch whose event names no cause: one recorded
// before events said it.
const causeUnknown = "unknown"

// jobHistory is what a job's events say that its record does not: its
// relaunches by cause and how long each recovery took. It reads each event
// once, so a scrape costs the events since the last one.
type jobHistory struct {
	next     uint64            // the first event not read yet
	restarts map[string]uint64 // relaunches by cause
	// down is when the job entered restarting; zero when it is not
	// recovering. relaunched is set once the relaunch launched: the first
	// sign of its ranks ends the recovery.
	down       time.Time
	relaunched bool
	recovery   bucketCounts
	// Of the epochs complete: the time each took, and what their
	// checkpoints wrote and copied (job.EpochStats).
	completion bucketCounts
	ckpt       job.EpochStats
	staged     int64 // bytes of job files staged to the nodes of its launches
}

// add reads events, in order. A recovery lasts from the job's transition into
// restarting (the loss decided) to the first sign of the relaunched ranks: an
// output line, a progress report or a complete epoch.
func (h *jobHistory) add(events []job.Event) {
	for _, e := range events {
		if e.Seq >= h.next {
			h.next = e.Seq + 1
		}
		switch e.Type {
		case job.EventEpoch:
			h.addEpoch(e)
		case job.EventStage:
			var s job.Staged
			if len(e.Data) > 0 && json.Unmarshal(e.Data, &s) == nil {
				h.staged += s.Bytes
			}
		}
		switch {
		case e.State == job.Restarting:
			if h.restarts == nil {
				h.restarts = map[string]uint64{}
			}
			h.restarts[causeOf(e)]++
			if h.down.IsZero() { // a relaunch interrupted while staged recovers from the first loss
				h.down = e.Time
			}
			h.relaunched = false
		case h.down.IsZero():
		case e.State == job.Running:
			h.relaunched = true
		case job.Terminal(e.State):
			h.down, h.relaunched = time.Time{}, false
		case h.relaunched && ranksSay(e.Type):
			h.recovery.observe(e.Time.Sub(h.down).Seconds())
			h.down, h.relaunched = time.Time{}, false
		}
	}
}

// addEpoch counts what the event of an epoch complete says it cost; the
// event that says a checkpoint covers fewer ranks carries nothing.
func (h *jobHistory) addEpoch(e job.Event) {
	var s job.EpochStats
	if len(e.Data) == 0 || json.Unmarshal(e.Data, &s) != nil {
		return
	}
	if !s.Taken.IsZero() {
		h.completion.observeIn(completionBuckets, max(e.Time.Sub(s.Taken), 0).Seconds())
	}
	h.ckpt.Bytes += s.Bytes
	h.ckpt.Copied += s.Copied
	h.ckpt.Sent += s.Sent
	h.ckpt.Wire += s.Wire
}

// ranksSay reports whether an event of type typ comes from a run's ranks.
func ranksSay(typ string) bool {
	switch typ {
	case job.EventOutput, job.EventOutputErr, job.EventProgress, job.EventEpoch:
		return true
	}
	return false
}

// causeOf returns the cause the event of a transition into restarting names.
func causeOf(e job.Event) string {
	var c job.RestartCause
	if len(e.Data) == 0 || json.Unmarshal(e.Data, &c) != nil || c.Cause == "" {
		return causeUnknown
	}
	return c.Cause
}

// bucketCounts is a histogram of observations: count per upper bound of
// recoveryBuckets (not cumulative), their sum and number.
type bucketCounts struct {
	counts []uint64
	sum    float64
	n      uint64
}

func (b *bucketCounts) observe(v float64) {
	b.observeIn(recoveryBuckets, v)
}

func (b *bucketCounts) observeIn(bounds []float64, v float64) {
	if b.counts == nil {
		b.counts = make([]uint64, len(bounds))
	}
	for i, ub := range bounds {
		if v <= ub {
			b.counts[i]++
			break
		}
	}
	b.sum += v
	b.n++
}

// add adds o's observations to b's.
func (b *bucketCounts) add(o bucketCounts) {
	if o.counts == nil {
		return
	}
	if b.counts == nil {
		b.counts = make([]uint64, len(o.counts))
	}
	for i, c := range o.counts {
		b.counts[i] += c
	}
	b.sum += o.sum
	b.n += o.n
}

// cumulative returns the counts as Prometheus wants them: each bucket
// counting every observation up to its upper bound.
func (b *bucketCounts) cumulative(bounds []float64) map[float64]uint64 {
	out := make(map[float64]uint64, len(bounds))
	var acc uint64
	for i, ub := range bounds {
		if b.counts != nil {
			acc += b.counts[i]
		}
		out[ub] = acc
	}
	return out
}

// histories keeps a [jobHistory] per job of the store. Safe for concurrent
// use.
type histories struct {
	mu   sync.Mutex
	jobs map[string]*jobHistory
}

// totals is what the events of every job in the store add up to.
type totals struct {
	restarts   map[string]map[string]uint64 // job → cause → relaunches
	recovery   bucketCounts
	completion bucketCounts
	ckpt       job.EpochStats
	staged     int64
}

// update reads each job's new events from src and forgets the jobs no
// longer in jobs. It returns what the events of them all add up to.
func (hs *histories) update(src Source, jobs []job.Job) totals {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.jobs == nil {
		hs.jobs = map[string]*jobHistory{}
	}
	seen := make(map[string]bool, len(jobs))
	t := totals{restarts: map[string]map[string]uint64{}}
	for _, j := range jobs {
		seen[j.ID] = true
		h := hs.jobs[j.ID]
		if h == nil {
			h = &jobHistory{next: 1}
			hs.jobs[j.ID] = h
		}
		if events, err := src.Events(j.ID, h.next); err == nil {
			h.add(events)
		}
		if len(h.restarts) > 0 {
			t.restarts[j.ID] = maps.Clone(h.restarts)
		}
		t.recovery.add(h.recovery)
		t.completion.add(h.completion)
		t.ckpt.Bytes += h.ckpt.Bytes
		t.ckpt.Copied += h.ckpt.Copied
		t.ckpt.Sent += h.ckpt.Sent
		t.ckpt.Wire += h.ckpt.Wire
		t.staged += h.staged
	}
	for id := range hs.jobs {
		if !seen[id] {
			delete(hs.jobs, id)
		}
	}
	return t
}
