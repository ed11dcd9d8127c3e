package main

import (
	"testing"

	"shoal/internal/api"
)

func TestQuorumChange(t *testing.T) {
	node := func(name, state, role string) api.Node { return api.Node{Name: name, State: state, Role: role} }
	lost := api.QuorumOf([]api.Node{node("n1", "dead", api.RoleVoter), node("n2", "alive", api.RoleVoter), node("n3", "dead", api.RoleVoter)})
	electing := api.QuorumOf([]api.Node{node("n1", "alive", api.RoleVoter), node("n2", "alive", api.RoleVoter), node("n3", "dead", api.RoleVoter)})
	led := api.QuorumOf([]api.Node{node("n2", "alive", api.RoleLeader)})
	tests := []struct {
		name     string
		wasLost  bool
		v        api.Voters
		line     string
		wantLost bool
	}{
		{"lost", false, lost, "shoal wait: job heat-1 waits: " + lost.NoQuorum(), true},
		{"still lost", true, lost, "", true},
		{"electing after the loss", true, electing, "", true},
		{"a leader again", true, led, "shoal wait: the cluster has a quorum again (n2 leads); job heat-1 goes on", false},
		{"electing, never lost", false, electing, "", false},
	}
	for _, tt := range tests {
		line, gotLost := quorumChange("wait", "heat-1", tt.wasLost, tt.v)
		if line != tt.line || gotLost != tt.wantLost {
			t.Errorf("%s: quorumChange = %q, %v; want %q, %v", tt.name, line, gotLost, tt.line, tt.wantLost)
		}
	}
}

func TestRecoverRefusal(t *testing.T) {
	node := func(name, state, role string) api.Node { return api.Node{Name: name, State: state, Role: role} }
	tests := []struct {
		name  string
		nodes []api.Node
		want  string
	}{
		{"healthy", []api.Node{node("n1", "alive", api.RoleLeader), node("n2", "alive", api.RoleVoter), node("n3", "dead", api.RoleVoter)},
			"the cluster has a quorum (2 of 3 voters alive (n3 dead); n1 leads): nothing to recover"},
		{"electing", []api.Node{node("n1", "alive", api.RoleVoter), node("n2", "alive", api.RoleVoter), node("n3", "dead", api.RoleVoter)},
			"the cluster has a quorum (2 of 3 voters alive (n3 dead)), electing a leader: nothing to recover"},
		{"no job store", []api.Node{node("n1", "alive", "")}, "the local agent knows no voter of the job store: nothing to recover"},
		{"lost", []api.Node{node("n1", "dead", api.RoleVoter), node("n2", "alive", api.RoleFollower)}, ""},
	}
	for _, tt := range tests {
		if got := recoverRefusal(api.QuorumOf(tt.nodes)); got != tt.want {
			t.Errorf("%s: recoverRefusal = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDownNames(t *testing.T) {
	for _, tt := range []struct{ down, want string }{
		{"n1 dead, n3 suspect", "n1, n3"},
		{"n1 dead", "n1"},
		{"", "the lost voters"},
	} {
		if got := downNames(tt.down); got != tt.want {
			t.Errorf("downNames(%q) = %q, want %q", tt.down, got, tt.want)
		}
	}
}
