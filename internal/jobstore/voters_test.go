package jobstore

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestVoterTarget(t *testing.T) {
	for n, want := range []int{0, 1, 1, 3, 3, 5, 5, 5, 5} {
		if got := VoterTarget(n); got != want {
			t.Errorf("VoterTarget(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestPlanVoters(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	m := func(name string, since int) Member {
		return Member{Name: name, Raft: name + ":7948", Alive: true, Since: at(since)}
	}
	dead := func(name string) Member { return Member{Name: name, Raft: name + ":7948", Since: t0} }
	refusing := func(name string, since int) Member { r := m(name, since); r.Unreachable = true; return r }
	v := func(name string) Server { return Server{Name: name, Addr: name + ":7948", Voter: true} }
	nv := func(name string) Server { return Server{Name: name, Addr: name + ":7948"} }
	c := func(k ChangeKind, name string) Change { return Change{Kind: k, Name: name, Addr: name + ":7948"} }
	// full is a configuration at its size, five voters and two standbys, of
	// the nine members fullMembers.
	full := func() []Server { return []Server{v("n1"), v("n2"), v("n3"), v("n4"), v("n5"), nv("n6"), nv("n7")} }
	fullMembers := func() []Member {
		var ms []Member
		for i := 1; i <= 9; i++ {
			ms = append(ms, m(fmt.Sprintf("n%d", i), i-1))
		}
		return ms
	}
	without := func(ms []Member, name string) []Member {
		return slices.DeleteFunc(ms, func(m Member) bool { return m.Name == name })
	}
	tests := []struct {
		name    string
		servers []Server
		members []Member
		want    []Change
	}{
		{"alone", []Server{v("n1")}, []Member{m("n1", 0)}, nil},
		{"joiners follow first", []Server{v("n1")}, []Member{m("n1", 0), m("n2", 1), m("n3", 2)},
			[]Change{c(AddNonvoter, "n2"), c(AddNonvoter, "n3")}},
		{"followers promoted to three voters", []Server{v("n1"), nv("n2"), nv("n3")}, []Member{m("n1", 0), m("n2", 1), m("n3", 2)},
			[]Change{c(Promote, "n2"), c(Promote, "n3")}},
		{"two nodes: one voter", []Server{v("n1"), nv("n2")}, []Member{m("n1", 0), m("n2", 1)}, nil},
		{"four nodes: three voters, the longest up", []Server{v("n1"), nv("n2"), nv("n3"), nv("n4")},
			[]Member{m("n1", 0), m("n4", 1), m("n2", 5), m("n3", 3)},
			[]Change{c(Promote, "n4"), c(Promote, "n3")}},
		{"new leader replaces the old", []Server{v("n1"), v("n2"), v("n3"), nv("n4")},
			[]Member{m("n2", 1), dead("n1"), m("n3", 2), m("n4", 3)},
			[]Change{c(Remove, "n1"), c(Promote, "n4")}}, // n2 leads: the old leader n1 is gone
		{"leader replaces a dead voter", []Server{v("n1"), v("n2"), v("n3"), nv("n4")},
			[]Member{m("n1", 0), dead("n2"), m("n3", 2), m("n4", 3)},
			[]Change{c(Remove, "n2"), c(Promote, "n4")}},
		{"absent member removed", []Server{v("n1"), nv("n9")}, []Member{m("n1", 0)}, []Change{c(Remove, "n9")}},
		{"moved address re-added", []Server{v("n1"), {Name: "n2", Addr: "old:1"}}, []Member{m("n1", 0), m("n2", 1)},
			[]Change{{Kind: Remove, Name: "n2", Addr: "old:1"}, c(AddNonvoter, "n2")}},
		{"shrink to one voter", []Server{v("n1"), v("n2"), v("n3")}, []Member{m("n1", 0), m("n2", 1), dead("n3")},
			[]Change{c(Remove, "n3"), c(Demote, "n2")}},
		{"five of seven vote, existing voters kept", []Server{v("n1"), v("n7"), nv("n2"), nv("n3"), nv("n4"), nv("n5"), nv("n6")},
			[]Member{m("n1", 0), m("n2", 1), m("n3", 2), m("n4", 3), m("n5", 4), m("n6", 5), m("n7", 9)},
			[]Change{c(Promote, "n2"), c(Promote, "n3"), c(Promote, "n4")}},
		{"no raft address: ignored", []Server{v("n1")}, []Member{m("n1", 0), {Name: "old", Alive: true}}, nil},
		// Right after a recovery without n2 and n4, membership holds them alive
		// for seconds though their agents refuse connections: neither is made a
		// server, so neither counts in the quorum, nor finds itself a voter when
		// it comes back with its old copy.
		{"recovered without the refusing", []Server{v("n1")}, []Member{m("n1", 0), refusing("n2", 1), m("n3", 2), refusing("n4", 3)},
			[]Change{c(AddNonvoter, "n3")}},
		{"a refusing follower is not promoted", []Server{v("n1"), nv("n2"), nv("n3")}, []Member{m("n1", 0), refusing("n2", 1), m("n3", 2)},
			nil}, // two live candidates: one voter, the leader
		{"a refusing voter stays", []Server{v("n1"), v("n2"), v("n3")}, []Member{m("n1", 0), refusing("n2", 1), m("n3", 2)}, nil},
		// Beyond five voters and two standbys, live members are clients.
		{"joiners beyond the standbys stay clients", []Server{v("n1")},
			[]Member{m("n1", 0), m("n2", 1), m("n3", 2), m("n4", 3), m("n5", 4), m("n6", 5), m("n7", 6), m("n8", 7), m("n9", 8)},
			[]Change{c(AddNonvoter, "n2"), c(AddNonvoter, "n3"), c(AddNonvoter, "n4"), c(AddNonvoter, "n5"), c(AddNonvoter, "n6"), c(AddNonvoter, "n7")}},
		// A configuration of the times when every node was a server: n8, a
		// voter beyond the seven kept, stops voting before it leaves.
		{"servers beyond the standbys removed, a voter demoted first",
			[]Server{v("n1"), v("n2"), v("n3"), v("n4"), v("n5"), v("n6"), v("n7"), v("n8"), nv("n9")}, fullMembers(),
			[]Change{c(Demote, "n8"), c(Remove, "n8"), c(Remove, "n9"), c(Demote, "n6"), c(Demote, "n7")}},
		{"a client's death changes nothing", full(), append(fullMembers()[:8], dead("n9")), nil},
		// A standby whose agent refuses connections stays until membership
		// decides, and the next candidate follows the log meanwhile.
		{"a refusing standby stays, the next added", full(), append(without(fullMembers(), "n6"), refusing("n6", 5)),
			[]Change{c(AddNonvoter, "n8")}},
		{"a voter's death promotes a standby and adds the next as a standby", full(), append([]Member{dead("n3")}, without(fullMembers(), "n3")...),
			[]Change{c(Remove, "n3"), c(Promote, "n6"), c(AddNonvoter, "n8")}},
	}
	for _, tt := range tests {
		leader := "n1"
		if tt.name == "new leader replaces the old" {
			leader = "n2"
		}
		got := PlanVoters(tt.servers, tt.members, leader)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: PlanVoters = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A plan applied and planned again asks for nothing more (after the promotions the
// first plan defers): reconciling converges.
func TestPlanVotersConverges(t *testing.T) {
	var members []Member
	for i, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		members = append(members, Member{Name: n, Raft: n + ":1", Alive: true, Since: time.Unix(int64(i), 0)})
	}
	servers := []Server{{Name: "a", Addr: "a:1", Voter: true}}
	for round := 0; round < 3; round++ {
		for _, c := range PlanVoters(servers, members, "a") {
			servers = applyChange(servers, c)
		}
	}
	if got := PlanVoters(servers, members, "a"); len(got) != 0 {
		t.Errorf("after three rounds PlanVoters = %v, want nothing", got)
	}
	voters := 0
	for _, s := range servers {
		if s.Voter {
			voters++
		}
	}
	if voters != 5 || len(servers) != 7 {
		t.Errorf("got %d voters of %d servers, want 5 of 7", voters, len(servers))
	}
}

// 128 live members converge to five voters, two standbys and no other
// server, whichever joined first.
func TestPlanVotersBounded(t *testing.T) {
	var members []Member
	for i := range 128 {
		n := fmt.Sprintf("n%03d", i)
		members = append(members, Member{Name: n, Raft: n + ":1", Alive: true, Since: time.Unix(int64(i), 0)})
	}
	servers := []Server{{Name: "n000", Addr: "n000:1", Voter: true}}
	for round := 0; round < 3; round++ {
		for _, c := range PlanVoters(servers, members, "n000") {
			servers = applyChange(servers, c)
		}
	}
	if got := PlanVoters(servers, members, "n000"); len(got) != 0 {
		t.Errorf("after three rounds PlanVoters = %v, want nothing", got)
	}
	var voters, standbys []string
	for _, s := range servers {
		if s.Voter {
			voters = append(voters, s.Name)
		} else {
			standbys = append(standbys, s.Name)
		}
	}
	if want := []string{"n000", "n001", "n002", "n003", "n004"}; !reflect.DeepEqual(voters, want) {
		t.Errorf("voters = %v, want %v", voters, want)
	}
	if want := []string{"n005", "n006"}; !reflect.DeepEqual(standbys, want) {
		t.Errorf("standbys = %v, want %v", standbys, want)
	}
}

func applyChange(servers []Server, c Change) []Server {
	out := servers[:0:0]
	for _, s := range servers {
		switch {
		case s.Name != c.Name:
			out = append(out, s)
		case c.Kind == Promote:
			out = append(out, Server{Name: s.Name, Addr: s.Addr, Voter: true})
		case c.Kind == Demote:
			out = append(out, Server{Name: s.Name, Addr: s.Addr})
		}
	}
	if c.Kind == AddNonvoter {
		out = append(out, Server{Name: c.Name, Addr: c.Addr})
	}
	return out
}
