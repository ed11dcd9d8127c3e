package membership

import (
	"slices"
	"testing"
	"time"
)

// TestTableAt: the nodes at an API address are found through the table's
// index as set, updated and forgotten, a gone node beside the live one that
// took its address, and no node at an address none has.
func TestTableAt(t *testing.T) {
	tb := newTable()
	names := func(api string) []string {
		var out []string
		for _, n := range tb.at(api) {
			out = append(out, n.Name+":"+n.State.String())
		}
		return out
	}
	long := time.Now().Add(-time.Hour)
	tb.set(Node{Name: "a", Meta: Meta{API: "10.0.0.1:7947"}})
	tb.set(Node{Name: "b", Meta: Meta{API: "10.0.0.2:7947"}})
	tb.set(Node{Name: "c"}) // no API address yet
	if got := names("10.0.0.1:7947"); !slices.Equal(got, []string{"a:alive"}) {
		t.Errorf("at a's address: %v, want a", got)
	}
	// a dies; c comes up at its address (a new name on the same host).
	tb.update("a", func(n *Node) { n.State, n.Since = StateDead, long })
	tb.update("c", func(n *Node) { n.Meta.API = "10.0.0.1:7947" })
	if got := names("10.0.0.1:7947"); !slices.Equal(got, []string{"a:dead", "c:alive"}) {
		t.Errorf("at a's address after c took it: %v, want a dead and c alive", got)
	}
	// b is set again with another address: its old one names nobody.
	tb.set(Node{Name: "b", Meta: Meta{API: "10.0.0.3:7947"}})
	if got := names("10.0.0.2:7947"); len(got) != 0 {
		t.Errorf("at b's old address: %v, want none", got)
	}
	if got := names("10.0.0.3:7947"); !slices.Equal(got, []string{"b:alive"}) {
		t.Errorf("at b's new address: %v, want b", got)
	}
	tb.forget(time.Now().Add(-time.Minute))
	if got := names("10.0.0.1:7947"); !slices.Equal(got, []string{"c:alive"}) {
		t.Errorf("at a's address once a is forgotten: %v, want c alone", got)
	}
	if got := names(""); len(got) != 0 {
		t.Errorf("at no address: %v, want none", got)
	}
}
