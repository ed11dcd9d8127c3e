package agent

import (
	"context"

	"shoal/internal/api"
	"shoal/internal/job"
	"shoal/internal/membership"
	"shoal/internal/node"
)

// localNode is the agent as the API server sees it.
type localNode Agent

var _ api.LocalNode = (*localNode)(nil)

func (n *localNode) Name() string { return n.cfg.Name }

func (n *localNode) Leave(ctx context.Context) error { return (*Agent)(n).Leave(ctx) }

// Nodes is membership's view of the nodes, with a node whose agent refuses
// connections marked unreachable at once (reachCheck): what GET /v1/nodes
// answers.
func (n *localNode) Nodes(ctx context.Context) ([]node.Node, error) {
	out := (*Agent)(n).memberNodes()
	n.reach.mark(ctx, out, dialTCP)
	return out, nil
}

// Voters is Nodes' leader and voters alone, only their reach checked: GET
// /v1/nodes?voters=1, for a look at the quorum.
func (n *localNode) Voters(ctx context.Context) ([]node.Node, error) {
	var out []node.Node
	for _, x := range (*Agent)(n).memberNodes() {
		if x.Role == node.RoleLeader || x.Role == node.RoleVoter {
			out = append(out, x)
		}
	}
	n.reach.mark(ctx, out, dialTCP)
	return out, nil
}

// MembersAt is membership's view of the nodes at API address api, without the
// job store's roles and ranks and no node's reach checked: a relayed launch,
// once per daemon, needs only whether its node is there. It reads membership's
// index by address, not the list of every node (at 128 nodes the list, built
// and converted for each of a launch's 127 relays, was 4 % of the
// coordinator's agent's CPU in a launch).
func (n *localNode) MembersAt(api string) []node.Node {
	var out []node.Node
	for _, m := range n.members.NodesAt(api) {
		out = append(out, nodeOf(m))
	}
	return out
}

// memberNodes is every node membership knows of, in its state, with its role
// in the job store and the ranks placed on it.
func (a *Agent) memberNodes() []node.Node {
	roles := a.roles()
	placed := a.placedRanks()
	var out []node.Node
	for _, m := range a.members.Nodes() {
		n := nodeOf(m)
		n.Role = roles[m.Name]
		if n.Role == "" && m.State.Member() && a.store != nil {
			n.Role = node.RoleClient
		}
		if m.State.Member() {
			n.Ranks = placed[m.Name] // what a node that is gone was given runs nowhere now
		}
		out = append(out, n)
	}
	return out
}

// nodeOf is membership's node m as the API shows it.
func nodeOf(m membership.Node) node.Node {
	return node.Node{
		Name:    m.Name,
		Addr:    m.Addr,
		API:     m.Meta.API,
		Cores:   m.Meta.Cores,
		CPUs:    float64(m.Meta.CPUMilli) / 1000,
		Speed:   m.Meta.Speed,
		Arch:    m.Meta.Arch,
		OS:      m.Meta.OS,
		Labels:  m.Meta.Labels,
		State:   m.State.String(),
		Since:   m.Since,
		RTT:     job.Duration(m.RTT),
		Leaving: m.Meta.Leaving,
		Local:   m.Local,
		Overlay: m.Meta.Overlay,
	}
}

// placedRanks counts, by node, the ranks of the jobs that have not ended as
// their placements in the job store (this node's replica or mirror) put them:
// the RANKS of `shoal nodes`. Read from the store when asked, they cost a
// launch nothing; announced by each node in its gossiped metadata, as they
// were, a launch over N nodes sent N updates that every node of the cluster
// handled, a cost per node that grew with the cluster at every launch.
func (a *Agent) placedRanks() map[string]int {
	if a.store == nil {
		return nil
	}
	out := map[string]int{}
	for _, j := range a.store.Jobs() {
		if !j.Ended.IsZero() || j.State == job.Pending || j.State == job.Succeeded || j.State == job.Failed || j.State == job.Cancelled {
			continue
		}
		for name, ranks := range j.Placement {
			out[name] += len(ranks)
		}
	}
	return out
}
