package jobservice

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"shoal/internal/coord"
	"shoal/internal/epochs"
	"shoal/internal/farmrun"
	"shoal/internal/job"
)

// writeDelay is how long a change that decides nothing (rank output, an
// informational event, a new plan or interval) waits to be written to the job
// store with the changes after it. Every entry costs every member of the store
// a log write, so a burst is one entry; a decision the job then acts on
// (launching ranks, keeping an epoch book, ending) is written at once and
// carries what waits with it. A reader on another node lags the leader by up
// to twice the store's commit timeout already (jobstore.commitTimeout).
const writeDelay = 100 * time.Millisecond

// clusterJob is one job this node coordinates. The leader's copy of the job's
// info is here; every change of it and every event is written through to the
// replicated job store, where every node reads them.
type clusterJob struct {
	s         *Service // nil in unit tests of the backend: nothing is written
	mu        sync.Mutex
	info      job.Job
	cancel    context.CancelCauseFunc
	done      bool
	backend   *coord.ClusterRun // an MPI job's run, once it has one
	out       []job.Event       // events not yet written (rank output, posted events)
	infoDirty bool              // info has changes not yet written
	flushing  bool              // a write of what waits is scheduled
	// writeMu keeps the store's entries in the order they were made.
	writeMu sync.Mutex
	// term is the Service's leadership term the job is driven in; finished is
	// closed once its run has stopped.
	term     uint64
	finished chan struct{}
}

// current reports whether this node still drives the job in the term it started
// it in: a job's run stopped because the node lost the lead must not write its
// end (cancelled) into a store a later term of this node, or another node, leads.
func (j *clusterJob) current() bool {
	if j.s == nil {
		return true
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	return j.term == j.s.term
}

var _ coord.Record = (*clusterJob)(nil)

// Job returns a copy of the job's record.
func (j *clusterJob) Job() job.Job { return j.snapshot() }

// Update changes the job's info and writes it within writeDelay.
func (j *clusterJob) Update(f func(*job.Job)) { j.update(f) }

// Decide changes the job's info with f and, when f reports a change, writes it
// at once.
func (j *clusterJob) Decide(f func(*job.Job) bool) {
	j.mu.Lock()
	changed := f(&j.info)
	j.mu.Unlock()
	if changed {
		j.write(true)
	}
}

// KeepBook records the job's epoch book in the store, with what waits, so
// that the next leader resumes from it.
func (j *clusterJob) KeepBook(book epochs.Book) {
	if j.s == nil || j.s.cfg.Store == nil {
		return
	}
	if b, err := json.Marshal(book); err == nil {
		j.writeBook(b)
	}
}

// farmRecord is a task farm's record as its runtime keeps it.
type farmRecord struct{ *clusterJob }

var _ farmrun.Record = farmRecord{}

// Event records an event of the farm's lifecycle.
func (r farmRecord) Event(e job.Event) { r.event(e) }

// Change changes the farm's info; it is written with the next Write.
func (r farmRecord) Change(f func(*job.Job)) {
	r.mu.Lock()
	f(&r.info)
	r.mu.Unlock()
}

// Write writes what waits, events, the info and the farm's ledger in one entry.
func (r farmRecord) Write(events []job.Event, ledger json.RawMessage) { r.writeWith(events, ledger) }

// End writes the farm's final info and its last event in one entry.
func (r farmRecord) End(f func(*job.Job), last job.Event) { r.end(f, last) }

// Lines returns a writer of one output event of type typ per line.
func (r farmRecord) Lines(typ string) io.Writer { return &lineEvents{job: r.clusterJob, typ: typ} }

func (j *clusterJob) snapshot() job.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.info
}

// submittedMessage is a job's first event: who its ranks run as (owner, or the
// agents' user, agentUID, when nil) and which node coordinates it.
func submittedMessage(owner *job.Owner, agentUID int, node string) string {
	as := owner.String()
	switch {
	case owner != nil:
	case agentUID == 0:
		as = "root, the agents' user,"
	default:
		as = fmt.Sprintf("the agents' user (uid %d)", agentUID)
	}
	return fmt.Sprintf("submitted; runs as %s on every node; %s coordinates", as, node)
}

// event records e, an event of the job's run, with what it says of the job
// ([job.Job.Apply]: its state, when it first ran, the restarts used, the newest
// complete epoch). The event is written as it is.
func (j *clusterJob) event(e job.Event) {
	j.mu.Lock()
	j.info.Apply(e)
	j.mu.Unlock()
	if e.Type == job.EventLaunch {
		// The store holds a run's placement before its ranks start, so that
		// a new leader fences where they may be.
		j.write(true, e)
		return
	}
	j.post(e.State != "" || e.Type == job.EventEpoch || e.Type == job.EventDurable, e)
}

// update changes the job's info and writes it within writeDelay.
func (j *clusterJob) update(f func(*job.Job)) {
	j.mu.Lock()
	f(&j.info)
	j.mu.Unlock()
	j.post(true)
}

// end writes the job's final info and its last event in one entry, so that no
// reader sees the job ended without the event that says how.
//
// A replica learns that an entry is committed from the leader's next message,
// which, when no entry follows (the end is a job's last), comes up to twice
// the store's commit timeout later: a barrier after the end carries its
// commit to every replica at once, so that `shoal jobs` on any node shows the
// job ended as soon as its submitter does.
func (j *clusterJob) end(f func(*job.Job), last job.Event) {
	j.mu.Lock()
	f(&j.info)
	j.done = true
	j.mu.Unlock()
	j.write(true, last)
	if j.s != nil && j.s.cfg.Store != nil && j.current() {
		go j.s.cfg.Store.Barrier(10 * time.Second)
	}
}

// write writes what waits, then events, and the info when withInfo, and
// returns once the store holds them. A write that fails because this node no
// longer leads is dropped: the new leader resumes the job from what the store
// held.
func (j *clusterJob) write(withInfo bool, events ...job.Event) {
	j.flush(withInfo, events, nil)
}

// writeWith writes what waits, then events, the info and book (a farm's
// ledger) in one entry.
func (j *clusterJob) writeWith(events []job.Event, book json.RawMessage) {
	j.flush(true, events, book)
}

// writeBook records the job's epoch book in the store, with what waits.
func (j *clusterJob) writeBook(book json.RawMessage) {
	j.flush(false, nil, book)
}

// flush writes what waits, events, the info (when withInfo or changed) and
// book (when not empty) in one entry.
func (j *clusterJob) flush(withInfo bool, events []job.Event, book json.RawMessage) {
	j.writeMu.Lock()
	defer j.writeMu.Unlock()
	j.mu.Lock()
	events = append(j.out, events...)
	j.out = nil
	var info *job.Job
	if withInfo || j.infoDirty {
		cp := j.info
		info = &cp
	}
	j.infoDirty = false
	id := j.info.ID
	j.mu.Unlock()
	if j.s == nil || j.s.cfg.Store == nil || (info == nil && len(events) == 0 && len(book) == 0) || !j.current() {
		return
	}
	j.s.cfg.Store.Update(id, info, events, book)
}

// post queues events, and the info when withInfo, to be written within
// writeDelay with whatever comes after them.
func (j *clusterJob) post(withInfo bool, events ...job.Event) {
	j.mu.Lock()
	j.out = append(j.out, events...)
	j.infoDirty = j.infoDirty || withInfo
	schedule := !j.flushing
	j.flushing = true
	j.mu.Unlock()
	if schedule {
		time.AfterFunc(writeDelay, func() {
			j.mu.Lock()
			j.flushing = false
			j.mu.Unlock()
			j.write(false)
		})
	}
}

// output queues a line of rank output; it is written within writeDelay.
func (j *clusterJob) output(typ, line string) {
	j.post(false, job.NewEvent(typ, line, nil))
}

// lineEvents turns rank output into one event per line, each after prefix.
type lineEvents struct {
	job    *clusterJob
	typ    string
	prefix string
	buf    []byte
}

// Close writes what is left of an unfinished last line.
func (l *lineEvents) Close() error {
	if len(l.buf) > 0 {
		l.job.output(l.typ, l.prefix+string(l.buf))
		l.buf = nil
	}
	return nil
}

func (l *lineEvents) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.job.output(l.typ, l.prefix+string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}
