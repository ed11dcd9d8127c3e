package engine

import "shoal/internal/job"

// NodeKills counts, by node of p, the ranks placed there, those that died of
// SIGKILL in the run that began at since (Unix ns: a state of an earlier run
// is in a file no wrapper of this run rewrote), and those that ran on to the
// run's end.
func NodeKills(states []RankState, p []string, since int64) []job.NodeKills {
	killed, kept := map[string]int{}, map[string]int{}
	for _, s := range states {
		if s.Rank < 0 || s.Rank >= len(p) {
			continue
		}
		node := p[s.Rank]
		// A vanished wrapper is no evidence of a killer: the wrapper also dies
		// of SIGKILL when its launcher exits before it (its parent-death signal).
		switch {
		case s.State == StateSignaled && s.Signal == 9 && s.TimeNs >= since:
			killed[node]++
		case s.State == StateRunning,
			(s.State == StateStopped || s.State == StateExited) && s.TimeNs >= since:
			kept[node]++
		}
	}
	var out []job.NodeKills
	placed := map[string]int{}
	for _, node := range p {
		placed[node]++
	}
	for node, n := range placed {
		out = append(out, job.NodeKills{Node: node, Placed: n, Killed: killed[node], Kept: kept[node]})
	}
	return out
}
