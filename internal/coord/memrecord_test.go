package coord

import (
	"sync"

	"shoal/internal/epochs"
	"shoal/internal/job"
)

// memRecord is a job's record kept in memory: what a run writes goes nowhere.
type memRecord struct {
	mu   sync.Mutex
	info job.Job
}

var _ Record = (*memRecord)(nil)

func (r *memRecord) Job() job.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

func (r *memRecord) Update(f func(*job.Job)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.info)
}

func (r *memRecord) Decide(f func(*job.Job) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.info)
}

func (r *memRecord) KeepBook(epochs.Book) {}
