package place

import "time"

// RankRate is the compute speed one of ranks ranks on n gets: n's speed (1 when
// unknown), shared when the ranks outnumber its CPUs (its cores, or its quota when
// less): speed × min(1, CPUs / ranks).
func RankRate(n Node, ranks int) float64 {
	s := n.Speed
	if s <= 0 {
		s = 1
	}
	return s * min(1, n.cpus()/float64(max(ranks, 1)))
}

// Rate is how fast a job placed as p runs, relative to every rank having a core of
// speed 1 to itself. A bulk-synchronous job moves at the pace of its slowest rank, and
// a rank gets its node's speed, shared when the node runs more ranks than it has CPUs
// ([RankRate]). A rank on a node missing from nodes gives 0.
func Rate(p Placement, nodes []Node) float64 {
	if len(p) == 0 {
		return 0
	}
	byName := map[string]Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	rate := -1.0
	for name, ranks := range p.Counts() {
		n, ok := byName[name]
		if !ok || n.Cores < 1 {
			return 0
		}
		r := RankRate(n, ranks)
		if rate < 0 || r < rate {
			rate = r
		}
	}
	return rate
}

// Throughput is how fast a job placed as p runs when its work divides evenly
// among its ranks: its ranks times the rate of the slowest ([Rate]). Of two
// layouts of one count it orders as their rates; of two counts, it weighs
// that each of more ranks has less to do.
func Throughput(p Placement, nodes []Node) float64 {
	return float64(len(p)) * Rate(p, nodes)
}

// Estimate weighs relaunching a job on a new layout against running it to the end on
// the current one.
type Estimate struct {
	Remaining time.Duration // the rest of the run at the current rate
	Gain      time.Duration // how much sooner the new layout would finish it
	Cost      time.Duration // what a checkpoint plus a restart costs
}

// Weigh estimates the gain of moving a job with remaining time left at rate cur to a
// layout of rate next: the remaining work runs next/cur times as fast, so it saves
// remaining × (1 − cur/next). A next rate no better than cur gains nothing.
func Weigh(remaining, cost time.Duration, cur, next float64) Estimate {
	e := Estimate{Remaining: max(remaining, 0), Cost: max(cost, 0)}
	if cur > 0 && next > cur {
		e.Gain = time.Duration(float64(e.Remaining) * (1 - cur/next)).Round(time.Millisecond)
	}
	return e
}

// Worth says whether the gain exceeds ratio times the cost (ratio below 1 counts as
// 1: a relaunch must at least pay for itself).
func (e Estimate) Worth(ratio float64) bool {
	return e.Gain > 0 && float64(e.Gain) > max(ratio, 1)*float64(e.Cost)
}
