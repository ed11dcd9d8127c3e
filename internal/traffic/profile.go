package traffic

import (
	"math"
	"sort"
	"time"

	"shoal/internal/job"
)

// Change is how much the job's total traffic must change for a new
// profile to replace the one the job has (and to be weighed for a move).
const Change = 0.25

// Profile turns the ranks' reports into traffic per second between pairs of
// ranks, both directions added; speed gives the speed of a rank's node.
func Profile(reports map[int]Report, speed func(rank int) float64) *job.TrafficProfile {
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

// Changed reports whether next differs enough from old to replace it: it is
// the first, of another rank count, or its total differs by Change.
func Changed(old, next *job.TrafficProfile) bool {
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
	return math.Abs(n-o)/o > Change
}
