package job

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrTransition means a job was asked to change to a state it cannot reach from
// the one it is in. It is always a bug in the coordinator, never the user's doing.
var ErrTransition = errors.New("coord: transition not allowed")

// TransitionError is a refused transition.
type TransitionError struct {
	Job      string
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%v: job %s: %s → %s", ErrTransition, e.Job, e.From, e.To)
}

func (e *TransitionError) Unwrap() error { return ErrTransition }

// transitions is the job lifecycle: the states each state may change to.
//
//	pending → staging → running → succeeded | failed | cancelled
//	running → moving → staging                  (a planned relaunch)
//	running | moving → restarting → staging     (recovery from a loss)
//	staging → restarting                        (a node lost while staging)
//
// Staging covers everything before a launch: placing the ranks (and waiting for
// nodes to join), fencing earlier runs, copying files and shards. Moving is a
// relaunch that loses no work (a node leaving, a rebalance): the ranks checkpoint
// and hold, then the job is staged again; it is not a restart. Restarting is the
// recovery from a loss, until the epoch to restart from is chosen. Every state but
// the terminal ones may end in failed or cancelled.
var transitions = map[State][]State{
	Pending: {
		Staging,
		// A task farm: its nodes are set up as its tasks reach them.
		Running,
		// A job resumed by a new coordinator: it restarts from the newest epoch
		// its predecessor recorded.
		Restarting,
		Failed, Cancelled,
	},
	Staging: {
		Running,
		Restarting, // a node of the run was lost while it was staged
		Failed, Cancelled,
	},
	Running: {
		Moving, Restarting,
		Succeeded, Failed, Cancelled,
	},
	Moving: {
		Staging,    // the checkpoint is taken: relaunch from it
		Restarting, // a rank or node was lost before it was
		Succeeded, Failed, Cancelled,
	},
	Restarting: {
		Staging,
		Failed, // no complete epoch survives
		Cancelled,
	},
	Succeeded: nil,
	Failed:    nil,
	Cancelled: nil,
}

// States lists every state a job can be in, in lifecycle order.
var States = []State{
	Pending, Staging, Running, Moving, Restarting,
	Succeeded, Failed, Cancelled,
}

// CanTransition reports whether a job in state from may change to state to.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Terminal reports whether s ends a job: nothing follows it.
func Terminal(s State) bool {
	_, known := transitions[s]
	return known && len(transitions[s]) == 0
}

// Lifecycle is the state of one job. [Lifecycle.UpdateState] is the only way it
// changes, and every change is an event. It is safe for concurrent use.
type Lifecycle struct {
	job  string
	emit func(Event) // never nil

	mu    sync.Mutex
	state State
}

// NewLifecycle returns the lifecycle of a new job, pending; events receives an
// event for every transition (nil: none are sent).
func NewLifecycle(job string, events func(Event)) *Lifecycle {
	if events == nil {
		events = func(Event) {}
	}
	return &Lifecycle{job: job, emit: events, state: Pending}
}

// State returns the job's state now.
func (l *Lifecycle) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// UpdateState moves the job to state to and sends e, completed, as the event that
// says so: its State is set to to, its Job and Time filled in, its Type defaults
// to [EventState] and its Message to the state's name. A transition the lifecycle
// does not allow changes nothing, sends nothing and returns a [*TransitionError].
func (l *Lifecycle) UpdateState(to State, e Event) error {
	l.mu.Lock()
	from := l.state
	if !CanTransition(from, to) {
		l.mu.Unlock()
		return &TransitionError{Job: l.job, From: from, To: to}
	}
	l.state = to
	// Emitting under the lock keeps the events in the order of the transitions.
	defer l.mu.Unlock()
	e.State, e.Job = to, l.job
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if e.Type == "" {
		e.Type = EventState
	}
	if e.Message == "" {
		e.Message = string(to)
	}
	l.emit(e)
	return nil
}
