package membership

import (
	"sync"
	"time"
)

// EventType says what happened to a node.
type EventType int

const (
	// EventJoin: a node joined, or came back after being dead or left.
	EventJoin EventType = iota
	// EventLeave: a node left on purpose; it is now [StateLeft].
	EventLeave
	// EventFailed: the failure detector declared a node dead; it is now [StateDead].
	EventFailed
	// EventUpdate: a node changed its metadata (including setting Meta.Leaving).
	EventUpdate
	// EventSuspect: a node stopped answering this node's probes; it is now
	// [StateSuspect]. Usually followed by EventFailed or EventAlive.
	EventSuspect
	// EventAlive: a suspect node answered again; it is [StateAlive].
	EventAlive
)

var eventNames = [...]string{"join", "leave", "failed", "update", "suspect", "alive"}

func (t EventType) String() string {
	if t < 0 || int(t) >= len(eventNames) {
		return "unknown"
	}
	return eventNames[t]
}

// Event is one change of one node, with the node as it is after the change.
type Event struct {
	Type EventType
	Node Node
	Time time.Time
}

// Subscription delivers events, in the order this node saw them, on C.
//
// The gossip layer never waits for a subscriber: each subscription has its own
// unbounded queue, so a slow reader gets every event late rather than missing
// any (membership events are rare: a few per node arrival or departure).
// A subscriber that stops reading must call Close, or its queue grows for ever.
type Subscription struct {
	// C receives the events. It is closed after Close, or after the membership
	// shuts down and every event queued before that was delivered.
	C <-chan Event

	out    chan Event
	wake   chan struct{}
	stop   chan struct{}
	mu     sync.Mutex
	queue  []Event
	ending bool // deliver what is queued, then close C
	once   sync.Once
}

func newSubscription() *Subscription {
	s := &Subscription{
		out:  make(chan Event),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	s.C = s.out
	go s.pump()
	return s
}

// Close stops the subscription: pending events are dropped and C is closed.
// Safe to call more than once and concurrently with delivery.
func (s *Subscription) Close() { s.once.Do(func() { close(s.stop) }) }

// push queues ev without blocking.
func (s *Subscription) push(ev Event) {
	s.mu.Lock()
	if !s.ending {
		s.queue = append(s.queue, ev)
	}
	s.mu.Unlock()
	s.signal()
}

// end makes the subscription close C once the queued events are delivered.
func (s *Subscription) end() {
	s.mu.Lock()
	s.ending = true
	s.mu.Unlock()
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Subscription) pump() {
	defer close(s.out)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			ending := s.ending
			s.mu.Unlock()
			if ending {
				return
			}
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		ev := s.queue[0]
		s.queue[0] = Event{}
		s.queue = s.queue[1:]
		s.mu.Unlock()
		select {
		case s.out <- ev:
		case <-s.stop:
			return
		}
	}
}

// broker fans events out to subscriptions. Safe for concurrent use.
type broker struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
}

func (b *broker) subscribe() *Subscription {
	s := newSubscription()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.end()
		return s
	}
	if b.subs == nil {
		b.subs = map[*Subscription]struct{}{}
	}
	b.subs[s] = struct{}{}
	return s
}

func (b *broker) publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case <-s.stop: // closed by its owner: forget it
			delete(b.subs, s)
		default:
			s.push(ev)
		}
	}
}

// close ends every subscription after its queued events.
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.end()
	}
}
