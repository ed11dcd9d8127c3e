package coord

import (
	"maps"

	"shoal/internal/node"

	"shoal/internal/engine"
	"shoal/internal/job"
	"shoal/internal/place"
)

// placeNodes is what the planner needs to know of nodes, with the most ranks
// the job may run on each (its record's RankLimits).
func (b *clusterBackend) placeNodes(nodes map[string]node.Node) []place.Node {
	out := placeNodes(nodes)
	if b.cj == nil {
		return out
	}
	b.cj.mu.Lock()
	defer b.cj.mu.Unlock()
	for i := range out {
		out[i].MaxRanks = b.cj.info.RankLimits[out[i].Name]
	}
	return out
}

// learnLimits lowers the job's rank limits from the states of the ranks of a
// run that ended with every node up, records them and says why.
func (b *clusterBackend) learnLimits(states []engine.RankState) {
	if b.cj == nil {
		return
	}
	b.mu.Lock()
	since := b.launchAt.UnixNano()
	b.mu.Unlock()
	kills := nodeKills(states, b.placement, since)
	b.cj.mu.Lock()
	limits := maps.Clone(b.cj.info.RankLimits) // snapshots share the map
	if limits == nil {
		limits = job.RankLimits{}
	}
	said := limits.Learn(kills)
	if said != nil {
		b.cj.info.RankLimits = limits
	}
	b.cj.mu.Unlock()
	if said == nil {
		return
	}
	b.cj.write(true)
	for _, line := range said {
		b.j.event(job.EventNodes, job.Event{Message: line})
	}
}

// nodeKills counts, by node of p, the ranks placed there, those that died of
// SIGKILL in the run that began at since (Unix ns: a state of an earlier run
// is in a file no wrapper of this run rewrote), and those that ran on to the
// run's end.
func nodeKills(states []engine.RankState, p place.Placement, since int64) []job.NodeKills {
	killed, kept := map[string]int{}, map[string]int{}
	for _, s := range states {
		if s.Rank < 0 || s.Rank >= len(p) {
			continue
		}
		node := p[s.Rank]
		// A vanished wrapper is no evidence of a killer: the wrapper also dies
		// of SIGKILL when its launcher exits before it (its parent-death signal).
		switch {
		case s.State == engine.StateSignaled && s.Signal == 9 && s.TimeNs >= since:
			killed[node]++
		case s.State == engine.StateRunning,
			(s.State == engine.StateStopped || s.State == engine.StateExited) && s.TimeNs >= since:
			kept[node]++
		}
	}
	var out []job.NodeKills
	for node, n := range p.Counts() {
		out = append(out, job.NodeKills{Node: node, Placed: n, Killed: killed[node], Kept: kept[node]})
	}
	return out
}
