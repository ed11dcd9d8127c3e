package coord

import (
	"maps"

	"shoal/internal/engine"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/place"
)

// placeNodes is what the planner needs to know of nodes, with the most ranks
// the job may run on each (its record's RankLimits).
func (b *clusterBackend) placeNodes(nodes map[string]node.Node) []place.Node {
	out := placeNodes(nodes)
	if b.rec == nil {
		return out
	}
	limits := b.rec.Job().RankLimits
	for i := range out {
		out[i].MaxRanks = limits[out[i].Name]
	}
	return out
}

// learnLimits lowers the job's rank limits from the states of the ranks of a
// run that ended with every node up, records them and says why.
func (b *clusterBackend) learnLimits(states []engine.RankState) {
	if b.rec == nil {
		return
	}
	b.mu.Lock()
	since := b.launchAt.UnixNano()
	b.mu.Unlock()
	kills := engine.NodeKills(states, b.placement, since)
	var said []string
	b.rec.Decide(func(a *job.Job) bool {
		limits := maps.Clone(a.RankLimits) // copies of the record share the map
		if limits == nil {
			limits = job.RankLimits{}
		}
		said = limits.Learn(kills)
		if said != nil {
			a.RankLimits = limits
		}
		return said != nil
	})
	if said == nil {
		return
	}
	for _, line := range said {
		b.j.event(job.EventNodes, job.Event{Message: line})
	}
}
