package coord

import (
	"slices"

	"shoal/internal/job"
	"shoal/internal/place"
	"shoal/internal/traffic"
)

// learnTraffic derives the job's traffic per second from what the current
// run's ranks reported (in their nodes' indexes), once every rank has; it
// records the profile with the job when it is the first or differs by more
// than trafficChange from the one recorded.
func (b *clusterBackend) learnTraffic() {
	b.mu.Lock()
	reports := map[int]traffic.Report{}
	for node, idx := range b.indexes {
		for _, rt := range idx.Traffic {
			if rt.Rank < 0 || rt.Rank >= len(b.placement) || b.placement[rt.Rank] != node ||
				rt.Epoch <= b.launchEpoch || !(rt.SecondsTotal > 0) {
				continue // an earlier run's, or another node's
			}
			if old, ok := reports[rt.Rank]; !ok || rt.SecondsTotal > old.SecondsTotal {
				reports[rt.Rank] = rt
			}
		}
	}
	b.mu.Unlock()
	if len(b.placement) == 0 || len(reports) < len(b.placement) {
		return
	}
	// A rank's compute is its time outside MPI at the speed it got: its node's,
	// shared when the node ran more ranks than it has CPUs.
	counts := b.placement.Counts()
	speed := map[string]float64{}
	for _, n := range placeNodes(b.nodes) {
		speed[n.Name] = place.RankRate(n, counts[n.Name])
	}
	prof := traffic.Profile(reports, func(rank int) float64 { return speed[b.placement[rank]] })
	prof.Ranks = len(b.placement)
	if !traffic.Changed(b.rec.Job().Traffic, prof) {
		return
	}
	b.trafficOn = slices.Clone(b.placement)
	b.trafficGen++
	b.rec.Update(func(a *job.Job) { a.Traffic = prof })
}
