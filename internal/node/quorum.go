package node

import (
	"fmt"
	"sort"
	"strings"
)

// Roles of a node in the job store (Node.Role).
const (
	RoleLeader   = "leader"
	RoleVoter    = "voter"
	RoleFollower = "follower"
	// RoleClient: a live node that keeps no replica of the job store; it
	// follows the store from one that does.
	RoleClient = "client"
)

// Quorum says, from a node list with roles, why no node coordinates jobs: "no
// node coordinates jobs: 1 of 3 voting nodes answers (n2); a quorum needs 2". It
// returns "" when a node leads, or when no node has a role (an agent that keeps
// no job store).
func Quorum(nodes []Node) string {
	voters, up := 0, []string{}
	for _, n := range nodes {
		switch n.Role {
		case RoleLeader:
			return ""
		case RoleVoter:
			voters++
			if n.State == "alive" {
				up = append(up, n.Name)
			}
		}
	}
	if voters == 0 {
		return ""
	}
	sort.Strings(up)
	names := strings.Join(up, ", ")
	if names == "" {
		names = "none"
	}
	verb := "answer"
	if len(up) == 1 {
		verb = "answers"
	}
	need := voters/2 + 1
	msg := fmt.Sprintf("no node coordinates jobs: %d of %d voting nodes %s (%s); a quorum needs %d", len(up), voters, verb, names, need)
	if len(up) >= need {
		msg += ": electing a leader, try again in a moment"
	}
	return msg
}

// Voters is the job store's quorum as a node list shows it: who votes, and in
// what state membership sees each. It is pure: [QuorumOf] builds it from
// GET /v1/nodes, so the CLI and the agent judge a quorum alike.
type Voters struct {
	// Nodes are the voting nodes, the leader among them, sorted by name.
	Nodes []Node
	// Leader is the leader's name as the answering node knows it; "" for none.
	Leader string
}

// QuorumOf returns the voters of a node list with roles.
func QuorumOf(nodes []Node) Voters {
	var v Voters
	for _, n := range nodes {
		switch n.Role {
		case RoleLeader:
			v.Leader = n.Name
			v.Nodes = append(v.Nodes, n)
		case RoleVoter:
			v.Nodes = append(v.Nodes, n)
		}
	}
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].Name < v.Nodes[j].Name })
	return v
}

// Need is how many voters a quorum needs: a majority.
func (v Voters) Need() int { return len(v.Nodes)/2 + 1 }

// Alive is how many voters membership sees alive.
func (v Voters) Alive() int {
	n := 0
	for _, x := range v.Nodes {
		if x.State == "alive" {
			n++
		}
	}
	return n
}

// Lost reports whether the cluster has no quorum: it keeps a job store (some
// node votes), no leader is known on a node still a member (alive or
// suspect), and fewer than a majority of the voters are alive. A leader the
// answering node still names for a moment after its node died does not count;
// a leader under load that misses a probe (suspect) does, so that a busy
// cluster is not taken for a lost one.
func (v Voters) Lost() bool {
	if len(v.Nodes) == 0 {
		return false
	}
	for _, x := range v.Nodes {
		if x.Name == v.Leader && (x.State == "alive" || x.State == "suspect") {
			return false
		}
	}
	return v.Alive() < v.Need()
}

// Down names the voters that are not alive, with their state: "n1 dead, n3
// suspect"; "" when every voter is alive.
func (v Voters) Down() string {
	var down []string
	for _, x := range v.Nodes {
		if x.State != "alive" {
			down = append(down, x.Name+" "+x.State)
		}
	}
	return strings.Join(down, ", ")
}

// String says how many voters are alive and which are not: "1 of 3 voters
// alive (n1 dead, n3 dead)".
func (v Voters) String() string {
	s := fmt.Sprintf("%d of %d voters alive", v.Alive(), len(v.Nodes))
	if d := v.Down(); d != "" {
		s += " (" + d + ")"
	}
	return s
}

// NoQuorum is the line that says a cluster lost its quorum, what that means
// for its jobs, and the way out: "the cluster has no quorum: 1 of 3 voters
// alive (n1 dead, n3 dead); ...". "" when v is not [Voters.Lost].
func (v Voters) NoQuorum() string {
	if !v.Lost() {
		return ""
	}
	return fmt.Sprintf("the cluster has no quorum: %s, a quorum needs %d; jobs wait until a voter returns (if none will: shoal recover-quorum --help, docs/recovery.md)", v, v.Need())
}
