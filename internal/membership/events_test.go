package membership

import (
	"testing"
	"time"
)

func TestSubscriptionNeverBlocks(t *testing.T) {
	var b broker
	slow := b.subscribe() // never read until the end
	closed := b.subscribe()
	closed.Close()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 10000; i++ {
			b.publish(Event{Type: EventUpdate, Node: Node{Name: "n"}, Time: time.Unix(int64(i), 0)})
		}
		b.close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publish blocked on a subscriber that does not read")
	}
	i := 0
	for ev := range slow.C {
		if ev.Time.Unix() != int64(i) {
			t.Fatalf("event %d has time %d: out of order or lost", i, ev.Time.Unix())
		}
		i++
	}
	if i != 10000 {
		t.Errorf("received %d events, want 10000", i)
	}
	if _, ok := <-closed.C; ok {
		t.Errorf("closed subscription still delivers")
	}
	late := b.subscribe()
	if _, ok := <-late.C; ok {
		t.Errorf("subscription after close delivers")
	}
}

func TestStateStrings(t *testing.T) {
	for s := StateAlive; s <= StateLeft; s++ {
		got, ok := ParseState(s.String())
		if !ok || got != s {
			t.Errorf("ParseState(%q) = %v, %v; want %v", s.String(), got, ok, s)
		}
	}
}

func TestStateMember(t *testing.T) {
	want := map[State]bool{StateAlive: true, StateSuspect: true, StateDead: false, StateLeft: false}
	for s, member := range want {
		if s.Member() != member {
			t.Errorf("%v.Member() = %v, want %v", s, s.Member(), member)
		}
	}
}
