package jobstore

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/hashicorp/raft"

	"shoal/internal/job"
)

// Bounds on what the store keeps of one job. Rank output beyond MaxOutputLines
// drops the oldest lines (Record.Dropped counts them); a line longer than
// MaxLineBytes is cut there. Other events (states, epochs, losses) beyond
// MaxOtherEvents drop the oldest too. At the limits a job's record holds about
// 20 000 × 4 KiB = 80 MiB in the worst case and a few MB for ordinary output.
const (
	MaxOutputLines = 20000
	MaxLineBytes   = 4096
	MaxOtherEvents = 5000
)

// Op is what a [Command] does.
type Op string

const (
	OpSubmit Op = "submit" // add a job; refused when its id is taken
	OpUpdate Op = "update" // replace a job's info, append events, replace its epoch book
	OpRemove Op = "remove" // forget a job
	// OpReplace starts an ended job again under its id: a new record, with the
	// book given (a farm run again keeps its ledger); refused unless the job
	// exists and has ended.
	OpReplace Op = "replace"
)

// Command is one entry of the replicated log. Every decision a coordinator makes
// about a job is one: the store applies it on every node in the same order.
type Command struct {
	Op Op     `json:"op"`
	ID string `json:"id"`
	// Job is the submitted job (OpSubmit) or the job's new info (OpUpdate; nil
	// leaves it unchanged).
	Job *job.Job `json:"job,omitempty"`
	// Events are appended to the job's events; the store numbers them.
	Events []job.Event `json:"events,omitempty"`
	// Book, when not empty, replaces the job's epoch book (opaque to the store:
	// the coordinator's record of which epochs are complete and where their
	// shards are).
	Book json.RawMessage `json:"book,omitempty"`
}

// Record is everything the cluster knows of one job.
type Record struct {
	Job     job.Job         `json:"job"`
	Events  []job.Event     `json:"events"`
	NextSeq uint64          `json:"next_seq"`
	Dropped uint64          `json:"dropped,omitempty"` // output lines dropped for MaxOutputLines
	Book    json.RawMessage `json:"book,omitempty"`
	outputs int             // output events in Events
}

// IsOutput reports whether an event type carries a line of rank output.
func IsOutput(typ string) bool { return typ == job.EventOutput || typ == job.EventOutputErr }

// fsm is the replicated state: the cluster's jobs. Apply, Snapshot and Restore
// are called by raft from one goroutine (a mirror's by its follow loop);
// readers take mu.
type fsm struct {
	mu      sync.RWMutex
	jobs    map[string]*Record
	changed chan struct{} // closed and replaced at every applied entry
	// index is the Raft index of the last command applied, or of the state
	// restored: the same in every replica and mirror that holds the same jobs.
	index uint64
	// recent are the last commands applied, oldest first, for the mirrors
	// that follow this replica ([Store.Follow]); they hold every command
	// applied after floor (unknownFloor: not known yet).
	recent      []Entry
	recentBytes int
	floor       uint64
	mirror      bool // a mirror: nothing follows it, it keeps no commands
	// leader and servers are, in a mirror, the Raft configuration as the
	// member it follows knows it.
	leader  string
	servers []Server
}

// Bounds on the commands an fsm keeps for its mirrors: a mirror further behind
// is sent the whole state instead.
const (
	recentEntries = 4096
	recentBytes   = 16 << 20
)

// unknownFloor: after a restore from a snapshot that does not say its index,
// the commands kept start at the next one applied.
const unknownFloor = ^uint64(0)

func newFSM() *fsm { return &fsm{jobs: map[string]*Record{}, changed: make(chan struct{})} }

// newMirror is an fsm fed by a follow loop ([Store.Follow] on a server).
func newMirror() *fsm { f := newFSM(); f.mirror = true; return f }

var _ raft.FSM = (*fsm)(nil)

// Apply applies one log entry. It returns nil or an error, which the leader's
// caller receives from the apply future.
func (f *fsm) Apply(l *raft.Log) any {
	return f.applyAt(l.Index, l.Data)
}

// applyAt applies the command encoded in data, at Raft index index, and keeps
// it for the mirrors. A command that is refused (a bad one, a job taken) is
// kept too: a mirror applying it gets the same refusal and the same state.
func (f *fsm) applyAt(index uint64, data []byte) error {
	f.mu.Lock()
	defer func() {
		f.wake()
		f.mu.Unlock()
	}()
	f.index = index
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("%w: %v", ErrBadCommand, err) // no change: not kept either
	}
	if f.mirror {
		return f.apply(c)
	}
	if f.floor == unknownFloor {
		f.floor = index - 1
	}
	f.recent = append(f.recent, Entry{Index: index, Command: data})
	f.recentBytes += len(data)
	drop := 0
	for len(f.recent)-drop > recentEntries || (f.recentBytes > recentBytes && len(f.recent)-drop > 1) {
		f.recentBytes -= len(f.recent[drop].Command)
		f.floor = f.recent[drop].Index
		drop++
	}
	if drop > 0 {
		clear(f.recent[:drop])
		f.recent = f.recent[drop:]
	}
	return f.apply(c)
}

var _ raft.ConfigurationStore = (*fsm)(nil)

// StoreConfiguration is called by raft, in order with Apply, for every
// configuration entry: it changes no job, but the index moves, so that a
// follower learns of the new servers, and a new one of an index past 0 that it
// waits on (a cluster's first entry is its configuration).
func (f *fsm) StoreConfiguration(index uint64, _ raft.Configuration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index = max(f.index, index)
	f.wake()
}

// wake closes the changed channel, waking every waiter, and takes a new one.
// The caller holds mu.
func (f *fsm) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// at returns the index of what f holds.
func (f *fsm) at() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

func (f *fsm) apply(c Command) error {
	switch c.Op {
	case OpSubmit:
		if c.Job == nil || c.Job.ID == "" {
			return fmt.Errorf("%w: submit without a job", ErrBadCommand)
		}
		if _, taken := f.jobs[c.Job.ID]; taken {
			return fmt.Errorf("%w: job %s", ErrExists, c.Job.ID)
		}
		r := &Record{Job: *c.Job, NextSeq: 1, Book: c.Book}
		r.append(c.Events)
		f.jobs[c.Job.ID] = r
	case OpReplace:
		if c.Job == nil || c.Job.ID == "" {
			return fmt.Errorf("%w: replace without a job", ErrBadCommand)
		}
		old, ok := f.jobs[c.Job.ID]
		if !ok {
			return fmt.Errorf("%w: job %s", ErrNotFound, c.Job.ID)
		}
		if old.Job.Ended.IsZero() {
			return fmt.Errorf("%w: job %s has not ended", ErrExists, c.Job.ID)
		}
		r := &Record{Job: *c.Job, NextSeq: 1, Book: c.Book}
		r.append(c.Events)
		f.jobs[c.Job.ID] = r
	case OpUpdate:
		r, ok := f.jobs[c.ID]
		if !ok {
			return fmt.Errorf("%w: job %s", ErrNotFound, c.ID)
		}
		if c.Job != nil {
			r.Job = *c.Job
			r.Job.ID = c.ID
		}
		if len(c.Book) > 0 {
			r.Book = c.Book
		}
		r.append(c.Events)
	case OpRemove:
		delete(f.jobs, c.ID)
	default:
		return fmt.Errorf("%w: op %q", ErrBadCommand, c.Op)
	}
	return nil
}

// append numbers events and adds them, dropping the oldest beyond the bounds.
func (r *Record) append(events []job.Event) {
	if len(events) == 0 {
		return
	}
	for _, e := range events {
		e.Seq, e.Job = r.NextSeq, r.Job.ID
		r.NextSeq++
		if IsOutput(e.Type) {
			if len(e.Message) > MaxLineBytes {
				e.Message = e.Message[:MaxLineBytes]
			}
			r.outputs++
		}
		r.Events = append(r.Events, e)
	}
	others := len(r.Events) - r.outputs
	// Trim in chunks, so that a chatty job does not copy its whole record for
	// every line.
	if r.outputs <= MaxOutputLines+MaxOutputLines/10 && others <= MaxOtherEvents+MaxOtherEvents/10 {
		return
	}
	dropOut, dropOther := max(r.outputs-MaxOutputLines, 0), max(others-MaxOtherEvents, 0)
	kept := r.Events[:0]
	for _, e := range r.Events {
		switch {
		case IsOutput(e.Type) && dropOut > 0:
			dropOut--
			r.outputs--
			r.Dropped++
		case !IsOutput(e.Type) && dropOther > 0:
			dropOther--
		default:
			kept = append(kept, e)
		}
	}
	clear(r.Events[len(kept):])
	r.Events = kept
}

// since returns the events numbered from on (the events are in Seq order).
func (r *Record) since(from uint64) []job.Event {
	i := sort.Search(len(r.Events), func(i int) bool { return r.Events[i].Seq >= from })
	return append([]job.Event(nil), r.Events[i:]...)
}

// state is a snapshot's encoding: the jobs and the index they are at.
// Snapshots written before the index was kept are the jobs alone.
type state struct {
	Index uint64             `json:"index"`
	Jobs  map[string]*Record `json:"jobs"`
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	// Records are replaced, never changed in place, only by Apply, which does not
	// run while Snapshot does; the encoding happens in Persist, later, so copy.
	b, err := json.Marshal(state{Index: f.index, Jobs: f.jobs})
	if err != nil {
		return nil, err
	}
	return snapshot(b), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("jobstore: restore snapshot: %w", err)
	}
	st, err := decodeState(b)
	if err != nil {
		return err
	}
	f.restore(st)
	return nil
}

// decodeState reads a snapshot of either encoding; an old one's index is
// unknown (0).
func decodeState(b []byte) (state, error) {
	var probe struct {
		Index *uint64         `json:"index"`
		Jobs  json.RawMessage `json:"jobs"`
	}
	var st state
	if json.Unmarshal(b, &probe) == nil && probe.Index != nil && len(probe.Jobs) > 0 {
		if err := json.Unmarshal(b, &st); err != nil {
			return state{}, fmt.Errorf("jobstore: restore snapshot: %w", err)
		}
	} else if err := json.Unmarshal(b, &st.Jobs); err != nil {
		return state{}, fmt.Errorf("jobstore: restore snapshot: %w", err)
	}
	if st.Jobs == nil {
		st.Jobs = map[string]*Record{}
	}
	return st, nil
}

// restore replaces the state with st.
func (f *fsm) restore(st state) {
	for _, r := range st.Jobs {
		r.outputs = 0
		for _, e := range r.Events {
			if IsOutput(e.Type) {
				r.outputs++
			}
		}
	}
	f.mu.Lock()
	f.jobs, f.index = st.Jobs, st.Index
	f.recent, f.recentBytes, f.floor = nil, 0, st.Index
	if st.Index == 0 {
		f.floor = unknownFloor
	}
	f.wake()
	f.mu.Unlock()
}

// reset empties the state, for a replica that starts again from nothing.
func (f *fsm) reset() {
	f.mu.Lock()
	f.jobs, f.index = map[string]*Record{}, 0
	f.recent, f.recentBytes, f.floor = nil, 0, 0
	f.wake()
	f.mu.Unlock()
}

// snapshot is the encoded state at one index.
type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {}
