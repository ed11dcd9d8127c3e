package main

import (
	"testing"

	"shoal/internal/node"
)

func TestQuorumChange(t *testing.T) {
	member := func(name, state, role string) node.Node { return node.Node{Name: name, State: state, Role: role} }
	lost := node.QuorumOf([]node.Node{member("n1", "dead", node.RoleVoter), member("n2", "alive", node.RoleVoter), member("n3", "dead", node.RoleVoter)})
	electing := node.QuorumOf([]node.Node{member("n1", "alive", node.RoleVoter), member("n2", "alive", node.RoleVoter), member("n3", "dead", node.RoleVoter)})
	led := node.QuorumOf([]node.Node{member("n2", "alive", node.RoleLeader)})
	tests := []struct {
		name     string
		wasLost  bool
		v        node.Voters
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
	member := func(name, state, role string) node.Node { return node.Node{Name: name, State: state, Role: role} }
	tests := []struct {
		name  string
		nodes []node.Node
		want  string
	}{
		{"healthy", []node.Node{member("n1", "alive", node.RoleLeader), member("n2", "alive", node.RoleVoter), member("n3", "dead", node.RoleVoter)},
			"the cluster has a quorum (2 of 3 voters alive (n3 dead); n1 leads): nothing to recover"},
		{"electing", []node.Node{member("n1", "alive", node.RoleVoter), member("n2", "alive", node.RoleVoter), member("n3", "dead", node.RoleVoter)},
			"the cluster has a quorum (2 of 3 voters alive (n3 dead)), electing a leader: nothing to recover"},
		{"no job store", []node.Node{member("n1", "alive", "")}, "the local agent knows no voter of the job store: nothing to recover"},
		{"lost", []node.Node{member("n1", "dead", node.RoleVoter), member("n2", "alive", node.RoleFollower)}, ""},
	}
	for _, tt := range tests {
		if got := recoverRefusal(node.QuorumOf(tt.nodes)); got != tt.want {
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
