package overlay

import (
	"reflect"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/links"
)

func measured(from, to string, rttMs, mbit float64) links.Link {
	return links.Link{From: from, To: to, RTT: job.Duration(time.Duration(rttMs * float64(time.Millisecond))), Bandwidth: mbit * 1e6 / 8}
}

func estimated(from, to string, rttMs, mbit float64) links.Link {
	l := measured(from, to, rttMs, mbit)
	l.Estimated = true
	return l
}

func fact(from, to string, r links.Result) links.Link {
	return links.Link{From: from, To: to, Reach: &links.Reach{Result: r, Checked: time.Unix(5000, 0)}}
}

func TestRoute(t *testing.T) {
	members := []string{"n1", "n2", "n3", "n4", "n5"}
	// n1's links are narrow (10 Mbit/s), n4's wide; n5 reaches n3 in
	// neither direction.
	base := []links.Link{
		measured("n1", "n2", 0.2, 10), measured("n1", "n3", 0.2, 10),
		measured("n4", "n2", 0.3, 900), measured("n3", "n4", 0.4, 800),
		measured("n5", "n2", 0.1, 9000), measured("n5", "n3", 0.1, 9000),
		fact("n5", "n3", links.Refused), fact("n3", "n5", links.TimedOut),
	}
	cut := append([]links.Link{fact("n2", "n3", links.TimedOut), fact("n3", "n2", links.TimedOut)}, base...)
	oneWay := append([]links.Link{fact("n2", "n3", links.TimedOut), fact("n3", "n2", links.Reachable)}, base...)
	for _, tt := range []struct {
		name      string
		links     []links.Link
		tunnels   []string
		unreached []string
		members   []string
		to        string
		want      string
		wantOK    bool
	}{
		{name: "nothing known: direct", links: base, to: "n3", want: "n3", wantOK: true},
		{name: "one way: direct, dialled from the other side", links: oneWay, to: "n3", want: "n3", wantOK: true},
		{name: "cut both ways: the widest relay", links: cut, to: "n3", want: "n4", wantOK: true},
		{name: "the facts say cut but a tunnel is up: direct wins", links: cut, tunnels: []string{"n3"}, to: "n3", want: "n3", wantOK: true},
		{name: "own dials unanswered, no facts yet", links: base, unreached: []string{"n3"}, to: "n3", want: "n4", wantOK: true},
		{name: "the best relay lost: the next", links: cut, unreached: []string{"n4"}, to: "n3", want: "n1", wantOK: true},
		{name: "the best relay gone from membership", links: cut, members: []string{"n1", "n2", "n3", "n5"}, to: "n3", want: "n1", wantOK: true},
		{name: "a relay with a tunnel up though unreached once", links: cut, tunnels: []string{"n4"}, unreached: []string{"n4"}, to: "n3", want: "n4", wantOK: true},
		{name: "no relay left", links: cut, members: []string{"n2", "n3", "n5"}, to: "n3", wantOK: false},
		{name: "an unmeasured relay still serves, last", links: cut, members: []string{"n2", "n3", "n6"}, to: "n3", want: "n6", wantOK: true},
		// n7's link to n3 is an estimate (links.Complete through a third node), its
		// reach unchecked: wider on paper than n4's, but n4 is known to reach n3.
		{name: "a relay known to reach before one nobody checked", links: append([]links.Link{measured("n2", "n7", 0.1, 9000),
			estimated("n7", "n3", 0.1, 9000)}, cut...), members: []string{"n2", "n3", "n4", "n7"}, to: "n3", want: "n4", wantOK: true},
		// n1 measured its wide link to n3 before it was cut, and its check
		// since failed: n4, narrower but known to reach n3, carries the pair.
		{name: "a relay whose probe predates a failed check is not known to reach", links: []links.Link{
			measured("n2", "n1", 0.1, 9000), measured("n1", "n3", 0.1, 9000), fact("n1", "n3", links.Refused),
			measured("n4", "n2", 0.3, 900), measured("n3", "n4", 0.4, 800),
			fact("n2", "n3", links.TimedOut), fact("n3", "n2", links.TimedOut)}, members: []string{"n1", "n2", "n3", "n4"}, to: "n3", want: "n4", wantOK: true},
		{name: "only unchecked relays: the best of them", links: append([]links.Link{measured("n2", "n7", 0.1, 9000),
			estimated("n7", "n3", 0.1, 9000)}, cut...), members: []string{"n2", "n3", "n7"}, to: "n3", want: "n7", wantOK: true},
	} {
		v := View{Self: "n2", Members: members, Links: tt.links, Tunnels: map[string]bool{}, Unreached: map[string]bool{}}
		if tt.members != nil {
			v.Members = tt.members
		}
		for _, n := range tt.tunnels {
			v.Tunnels[n] = true
		}
		for _, n := range tt.unreached {
			v.Unreached[n] = true
		}
		got, ok := Route(v, tt.to)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: Route(n2 -> %s) = %q, %v; want %q, %v", tt.name, tt.to, got, ok, tt.want, tt.wantOK)
		}
	}
}

// The route and the planner's link name the same relay: both are links.Relay
// over the same facts.
func TestRouteAgreesWithComplete(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	rows := []links.Link{
		fact("n2", "n3", links.TimedOut), fact("n3", "n2", links.TimedOut),
		measured("n1", "n2", 0.2, 10), measured("n1", "n3", 0.2, 10),
		measured("n4", "n2", 0.3, 900), measured("n3", "n4", 0.4, 800),
	}
	all := links.Complete(nodes, rows)
	var via string
	for _, l := range all {
		if l.From == "n2" && l.To == "n3" {
			via = l.Via
		}
	}
	got := Routes(View{Self: "n2", Members: nodes, Links: all})
	if want := map[string]string{"n3": via}; via == "" || !reflect.DeepEqual(got, want) {
		t.Errorf("Routes from n2 = %v, want %v (Complete's relay)", got, want)
	}
}

func TestAccept(t *testing.T) {
	for _, tt := range []struct {
		peer, owner string
		tunnel      bool
		want        bool
	}{
		{"n2", "n2", true, true},   // the peer's own
		{"n4", "n3", false, true},  // relayed for a member n1 cannot reach
		{"n4", "n3", true, false},  // in the name of a member n1 has a tunnel with
		{"n4", "", false, false},   // no member's address
		{"n4", "n1", false, false}, // n1's own address from outside
	} {
		if got := Accept("n1", tt.peer, tt.owner, tt.tunnel); got != tt.want {
			t.Errorf("Accept(n1, %s, %q, tunnel %v) = %v, want %v", tt.peer, tt.owner, tt.tunnel, got, tt.want)
		}
	}
}
