package api

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
