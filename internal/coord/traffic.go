package coord

import (
	"math"
	"slices"
	"sort"
	"time"

	"shoal/internal/traffic"

	"shoal/internal/job"
	"shoal/internal/place"
)

// trafficChange is how much the job's total traffic must change for a new
// profile to replace the one the job has (and to be weighed for a move).
const trafficChange = 0.25

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
	prof := profile(reports, func(rank int) float64 { return speed[b.placement[rank]] })
	prof.Ranks = len(b.placement)
	if !changed(b.cj.snapshot().Traffic, prof) {
		return
	}
	b.trafficOn = slices.Clone(b.placement)
	b.trafficGen++
	b.cj.update(func(a *job.Job) { a.Traffic = prof })
}

// profile turns the ranks' reports into traffic per second between pairs of
// ranks, both directions added; speed gives the speed of a rank's node.
func profile(reports map[int]traffic.Report, speed func(rank int) float64) *job.TrafficProfile {
	type pair struct{ a, b int }
	sums := map[pair]*job.Flow{}
	work, mpi := 0.0, 0.0
	for rank, rt := range reports {
		for _, s := range rt.Sent {
			if s.Peer == rank || s.Peer < 0 {
				continue
			}
			k := pair{min(rank, s.Peer), max(rank, s.Peer)}
			f := sums[k]
			if f == nil {
				f = &job.Flow{From: k.a, To: k.b}
				sums[k] = f
			}
			f.Bytes += float64(s.Bytes) / rt.SecondsTotal
			f.Messages += float64(s.Messages) / rt.SecondsTotal
		}
		frac := math.Min(math.Max(rt.SecondsMPI/rt.SecondsTotal, 0), 1)
		mpi += frac
		work += (1 - frac) * speed(rank)
	}
	p := &job.TrafficProfile{Work: work / float64(len(reports)), MPIFraction: mpi / float64(len(reports)), Measured: time.Now()}
	for _, f := range sums {
		p.Flows = append(p.Flows, *f)
	}
	sort.Slice(p.Flows, func(i, j int) bool {
		a, c := p.Flows[i], p.Flows[j]
		if a.Bytes != c.Bytes {
			return a.Bytes > c.Bytes
		}
		if a.From != c.From {
			return a.From < c.From
		}
		return a.To < c.To
	})
	if len(p.Flows) > job.MaxFlows {
		p.Flows = p.Flows[:job.MaxFlows]
	}
	return p
}

// changed reports whether next differs enough from old to replace it: it is
// the first, of another rank count, or its total differs by trafficChange.
func changed(old, next *job.TrafficProfile) bool {
	if old == nil || old.Ranks != next.Ranks && old.Ranks > 0 {
		return true // the first, or the first of a new count
	}
	total := func(p *job.TrafficProfile) float64 {
		t := 0.0
		for _, f := range p.Flows {
			t += f.Bytes
		}
		return t
	}
	o, n := total(old), total(next)
	if o == 0 {
		return n > 0
	}
	return math.Abs(n-o)/o > trafficChange
}

// flows is p's flows for the planner: nil without a profile, and empty, not
// nil, for a profile of ranks that sent each other nothing.
func flows(p *job.TrafficProfile) []place.Flow {
	if p == nil {
		return nil
	}
	out := make([]place.Flow, 0, len(p.Flows))
	for _, f := range p.Flows {
		out = append(out, place.Flow{From: f.From, To: f.To, Bytes: f.Bytes, Messages: f.Messages})
	}
	return out
}
