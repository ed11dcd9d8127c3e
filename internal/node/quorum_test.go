package node

import "testing"

func TestQuorum(t *testing.T) {
	node := func(name, state, role string) Node { return Node{Name: name, State: state, Role: role} }
	tests := []struct {
		name  string
		nodes []Node
		want  string
	}{
		{"a leader", []Node{node("n1", "alive", RoleLeader), node("n2", "alive", RoleVoter)}, ""},
		{"no job store", []Node{node("n1", "alive", "")}, ""},
		{"one of three", []Node{node("n1", "dead", RoleVoter), node("n2", "alive", RoleVoter), node("n3", "dead", RoleVoter), node("n4", "alive", RoleFollower)},
			"no node coordinates jobs: 1 of 3 voting nodes answers (n2); a quorum needs 2"},
		{"none", []Node{node("n1", "dead", RoleVoter)},
			"no node coordinates jobs: 0 of 1 voting nodes answer (none); a quorum needs 1"},
		{"suspect does not answer", []Node{node("n1", "alive", RoleVoter), node("n2", "suspect", RoleVoter), node("n3", "dead", RoleVoter)},
			"no node coordinates jobs: 1 of 3 voting nodes answers (n1); a quorum needs 2"},
		{"electing", []Node{node("n3", "alive", RoleVoter), node("n2", "alive", RoleVoter), node("n1", "dead", RoleVoter)},
			"no node coordinates jobs: 2 of 3 voting nodes answer (n2, n3); a quorum needs 2: electing a leader, try again in a moment"},
	}
	for _, tt := range tests {
		if got := Quorum(tt.nodes); got != tt.want {
			t.Errorf("%s: Quorum = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestVoters(t *testing.T) {
	node := func(name, state, role string) Node { return Node{Name: name, State: state, Role: role} }
	tests := []struct {
		name     string
		nodes    []Node
		lost     bool
		noQuorum string
	}{
		{"a live leader", []Node{node("n1", "alive", RoleLeader), node("n2", "dead", RoleVoter), node("n3", "dead", RoleVoter)}, false, ""},
		{"a suspect leader still leads", []Node{node("n1", "suspect", RoleLeader), node("n2", "alive", RoleVoter), node("n3", "dead", RoleVoter)}, false, ""},
		{"no job store", []Node{node("n1", "alive", ""), node("n2", "dead", "")}, false, ""},
		{"electing with a majority", []Node{node("n1", "dead", RoleVoter), node("n2", "alive", RoleVoter), node("n3", "alive", RoleVoter)}, false, ""},
		{"one of three", []Node{node("n3", "dead", RoleVoter), node("n1", "dead", RoleVoter), node("n2", "alive", RoleVoter), node("n4", "alive", RoleFollower)}, true,
			"the cluster has no quorum: 1 of 3 voters alive (n1 dead, n3 dead), a quorum needs 2; jobs wait until a voter returns (if none will: shoal recover-quorum --help, docs/recovery.md)"},
		{"a dead node still named leader", []Node{node("n1", "dead", RoleLeader), node("n2", "alive", RoleVoter), node("n3", "suspect", RoleVoter)}, true,
			"the cluster has no quorum: 1 of 3 voters alive (n1 dead, n3 suspect), a quorum needs 2; jobs wait until a voter returns (if none will: shoal recover-quorum --help, docs/recovery.md)"},
		{"the only voter gone", []Node{node("n1", "dead", RoleVoter), node("n2", "alive", RoleFollower)}, true,
			"the cluster has no quorum: 0 of 1 voters alive (n1 dead), a quorum needs 1; jobs wait until a voter returns (if none will: shoal recover-quorum --help, docs/recovery.md)"},
	}
	for _, tt := range tests {
		v := QuorumOf(tt.nodes)
		if got := v.Lost(); got != tt.lost {
			t.Errorf("%s: Lost = %v, want %v", tt.name, got, tt.lost)
		}
		if got := v.NoQuorum(); got != tt.noQuorum {
			t.Errorf("%s: NoQuorum = %q, want %q", tt.name, got, tt.noQuorum)
		}
	}
}
