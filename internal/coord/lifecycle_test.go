package coord

import (
	"errors"
	"testing"

	"shoal/internal/api"
)

// allowed is the lifecycle as the issue describes it, written out pair by pair.
var allowed = map[[2]api.JobState]bool{
	{api.JobPending, api.JobStaging}:    true,
	{api.JobPending, api.JobRestarting}: true, // resumed by a new coordinator
	{api.JobPending, api.JobFailed}:     true,
	{api.JobPending, api.JobCancelled}:  true,

	{api.JobStaging, api.JobRunning}:    true,
	{api.JobStaging, api.JobRestarting}: true,
	{api.JobStaging, api.JobFailed}:     true,
	{api.JobStaging, api.JobCancelled}:  true,

	{api.JobRunning, api.JobMoving}:     true,
	{api.JobRunning, api.JobRestarting}: true,
	{api.JobRunning, api.JobSucceeded}:  true,
	{api.JobRunning, api.JobFailed}:     true,
	{api.JobRunning, api.JobCancelled}:  true,

	{api.JobMoving, api.JobStaging}:    true,
	{api.JobMoving, api.JobRestarting}: true,
	{api.JobMoving, api.JobSucceeded}:  true,
	{api.JobMoving, api.JobFailed}:     true,
	{api.JobMoving, api.JobCancelled}:  true,

	{api.JobRestarting, api.JobStaging}:   true,
	{api.JobRestarting, api.JobFailed}:    true,
	{api.JobRestarting, api.JobCancelled}: true,
}

// inState returns a lifecycle in state s, reached by allowed transitions, and the
// events it sends from then on.
func inState(t *testing.T, s api.JobState) (*Lifecycle, *[]Event) {
	t.Helper()
	var events []Event
	l := NewLifecycle("j", func(e Event) { events = append(events, e) })
	path := map[api.JobState][]api.JobState{
		api.JobPending:    nil,
		api.JobStaging:    {api.JobStaging},
		api.JobRunning:    {api.JobStaging, api.JobRunning},
		api.JobMoving:     {api.JobStaging, api.JobRunning, api.JobMoving},
		api.JobRestarting: {api.JobStaging, api.JobRunning, api.JobRestarting},
		api.JobSucceeded:  {api.JobStaging, api.JobRunning, api.JobSucceeded},
		api.JobFailed:     {api.JobFailed},
		api.JobCancelled:  {api.JobCancelled},
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
			want := allowed[[2]api.JobState{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			l, events := inState(t, from)
			err := l.UpdateState(to, Event{Kind: EventLaunch, Message: "m"})
			switch {
			case want && err != nil:
				t.Errorf("%s → %s: %v, want it allowed", from, to, err)
			case want && (len(*events) != 1 || (*events)[0].State != to || (*events)[0].Kind != EventLaunch || (*events)[0].Message != "m" || (*events)[0].Job != "j"):
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
		want := s == api.JobSucceeded || s == api.JobFailed || s == api.JobCancelled
		if got := Terminal(s); got != want {
			t.Errorf("Terminal(%s) = %v, want %v", s, got, want)
		}
	}
	if Terminal("placing") {
		t.Error("an unknown state is terminal")
	}
}

func TestTransitionErrorNamesBothStates(t *testing.T) {
	l, _ := inState(t, api.JobSucceeded)
	err := l.UpdateState(api.JobRunning, Event{})
	var te *TransitionError
	if !errors.As(err, &te) || te.From != api.JobSucceeded || te.To != api.JobRunning {
		t.Fatalf("error %#v, want a TransitionError succeeded → running", err)
	}
	if got, want := err.Error(), "coord: transition not allowed: job j: succeeded → running"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestTransitionEventDefaults(t *testing.T) {
	l, events := inState(t, api.JobPending)
	if err := l.UpdateState(api.JobStaging, Event{}); err != nil {
		t.Fatal(err)
	}
	e := (*events)[0]
	if e.Kind != EventState || e.Message != "staging" || e.State != api.JobStaging || e.Time.IsZero() {
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
