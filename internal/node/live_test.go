package node

import (
	"testing"
)

func TestLiveKey(t *testing.T) {
	nodes := []Node{{Name: "c", State: "alive"}, {Name: "a", State: "alive"}, {Name: "b", State: "dead"}, {Name: "d", State: "alive", Leaving: true}}
	if got, want := LiveKey(nodes), "a c"; got != want {
		t.Errorf("LiveKey = %q, want %q", got, want)
	}
	if got := LiveKey(nil); got != "" {
		t.Errorf("LiveKey(nil) = %q, want empty", got)
	}
}

func TestGoneWord(t *testing.T) {
	for state, want := range map[string]string{"left": "left", "dead": "lost", "suspect": "lost"} {
		if got := GoneWord(state); got != want {
			t.Errorf("GoneWord(%q) = %q, want %q", state, got, want)
		}
	}
}
