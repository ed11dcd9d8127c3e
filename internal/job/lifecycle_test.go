package job

import (
	"errors"
	"testing"
)

// allowed is the lifecycle as the issue describes it, written out pair by pair.
var allowed = map[[2]State]bool{
	{Pending, Staging}:    true,
	{Pending, Restarting}: true, // resumed by a new coordinator
	{Pending, Running}:    true, // a task farm, which sets its nodes up as its tasks reach them
	{Pending, Failed}:     true,
	{Pending, Cancelled}:  true,

	{Staging, Running}:    true,
	{Staging, Restarting}: true,
	{Staging, Failed}:     true,
	{Staging, Cancelled}:  true,

	{Running, Moving}:     true,
	{Running, Restarting}: true,
	{Running, Succeeded}:  true,
	{Running, Failed}:     true,
	{Running, Cancelled}:  true,

	{Moving, Staging}:    true,
	{Moving, Restarting}: true,
	{Moving, Succeeded}:  true,
	{Moving, Failed}:     true,
	{Moving, Cancelled}:  true,

	{Restarting, Staging}:   true,
	{Restarting, Failed}:    true,
	{Restarting, Cancelled}: true,
}

// inState returns a lifecycle in state s, reached by allowed transitions, and the
// events it sends from then on.
func inState(t *testing.T, s State) (*Lifecycle, *[]Event) {
	t.Helper()
	var events []Event
	l := NewLifecycle("j", func(e Event) { events = append(events, e) })
	path := map[State][]State{
		Pending:    nil,
		Staging:    {Staging},
		Running:    {Staging, Running},
		Moving:     {Staging, Running, Moving},
		Restarting: {Staging, Running, Restarting},
		Succeeded:  {Staging, Running, Succeeded},
		Failed:     {Failed},
		Cancelled:  {Cancelled},
	}[s]
	for _, to := range path {
		if err := l.UpdateState(to, Event{}); err != nil {
			t.Fatalf("reaching %s: %v", s, err)
		}
	}
	events = nil
	return l, &events
}

func TestTransitionsEveryPair(t *testing.T) {
	for _, from := range States {
		for _, to := range States {
			want := allowed[[2]State{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			l, events := inState(t, from)
			err := l.UpdateState(to, Event{Type: EventLaunch, Message: "m"})
			switch {
			case want && err != nil:
				t.Errorf("%s → %s: %v, want it allowed", from, to, err)
			case want && (len(*events) != 1 || (*events)[0].State != to || (*events)[0].Type != EventLaunch || (*events)[0].Message != "m" || (*events)[0].Job != "j"):
				t.Errorf("%s → %s: events %+v, want one launch event \"m\" of job j in state %s", from, to, *events, to)
			case want && l.State() != to:
				t.Errorf("%s → %s: state %s after it", from, to, l.State())
			case !want && !errors.Is(err, ErrTransition):
				t.Errorf("%s → %s: error %v, want ErrTransition", from, to, err)
			case !want && (len(*events) != 0 || l.State() != from):
				t.Errorf("%s → %s refused but sent %v and left the job %s", from, to, *events, l.State())
			}
		}
	}
}

func TestTerminalStatesAcceptNothing(t *testing.T) {
	for _, s := range States {
		want := s == Succeeded || s == Failed || s == Cancelled
		if got := Terminal(s); got != want {
			t.Errorf("Terminal(%s) = %v, want %v", s, got, want)
		}
	}
	if Terminal("placing") {
		t.Error("an unknown state is terminal")
	}
}

func TestTransitionErrorNamesBothStates(t *testing.T) {
	l, _ := inState(t, Succeeded)
	err := l.UpdateState(Running, Event{})
	var te *TransitionError
	if !errors.As(err, &te) || te.From != Succeeded || te.To != Running {
		t.Fatalf("error %#v, want a TransitionError succeeded → running", err)
	}
	if got, want := err.Error(), "coord: transition not allowed: job j: succeeded → running"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestTransitionEventDefaults(t *testing.T) {
	l, events := inState(t, Pending)
	if err := l.UpdateState(Staging, Event{}); err != nil {
		t.Fatal(err)
	}
	e := (*events)[0]
	if e.Type != EventState || e.Message != "staging" || e.State != Staging || e.Time.IsZero() {
		t.Errorf("event %+v, want a state event \"staging\" with a time", e)
	}
}

// Every state the api names is in the lifecycle, and the old ones are gone.
func TestStatesAreTheAPIs(t *testing.T) {
	for _, s := range States {
		if _, ok := transitions[s]; !ok {
			t.Errorf("state %s has no row in the transition table", s)
		}
	}
	if len(transitions) != len(States) {
		t.Errorf("%d rows in the transition table, want %d", len(transitions), len(States))
	}
}
