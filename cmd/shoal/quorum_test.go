package main

import (
	"testing"

	nodepkg "shoal/internal/node"
)

func TestQuorumChange(t *testing.T) {
	node := func(name, state, role string) nodepkg.Node { return nodepkg.Node{Name: name, State: state, Role: role} }
	lost := nodepkg.QuorumOf([]nodepkg.Node{node("n1", "dead", nodepkg.RoleVoter), node("n2", "alive", nodepkg.RoleVoter), node("n3", "dead", nodepkg.RoleVoter)})
	electing := nodepkg.QuorumOf([]nodepkg.Node{node("n1", "alive", nodepkg.RoleVoter), node("n2", "alive", nodepkg.RoleVoter), node("n3", "dead", nodepkg.RoleVoter)})
	led := nodepkg.QuorumOf([]nodepkg.Node{node("n2", "alive", nodepkg.RoleLeader)})
	tests := []struct {
		name     string
		wasLost  bool
		v        nodepkg.Voters
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
	node := func(name, state, role string) nodepkg.Node { return nodepkg.Node{Name: name, State: state, Role: role} }
	tests := []struct {
		name  string
		nodes []nodepkg.Node
		want  string
	}{
		{"healthy", []nodepkg.Node{node("n1", "alive", nodepkg.RoleLeader), node("n2", "alive", nodepkg.RoleVoter), node("n3", "dead", nodepkg.RoleVoter)},
			"the cluster has a quorum (2 of 3 voters alive (n3 dead); n1 leads): nothing to recover"},
		{"electing", []nodepkg.Node{node("n1", "alive", nodepkg.RoleVoter), node("n2", "alive", nodepkg.RoleVoter), node("n3", "dead", nodepkg.RoleVoter)},
			"the cluster has a quorum (2 of 3 voters alive (n3 dead)), electing a leader: nothing to recover"},
		{"no job store", []nodepkg.Node{node("n1", "alive", "")}, "the local agent knows no voter of the job store: nothing to recover"},
		{"lost", []nodepkg.Node{node("n1", "dead", nodepkg.RoleVoter), node("n2", "alive", nodepkg.RoleFollower)}, ""},
	}
	for _, tt := range tests {
		if got := recoverRefusal(nodepkg.QuorumOf(tt.nodes)); got != tt.want {
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
