package job

import (
	"fmt"
	"sort"
)

// NodeKills is what one node shows of a run that ended without the node being lost
// (it stayed up and its agent answered): the job's ranks placed there, how many of
// them died of a SIGKILL that neither the launcher nor their wrapper sent (the
// wrapper lived to say so: signal 9), and how many ran on until the run's end (they
// ended by themselves, were stopped by the launcher, or still run).
type NodeKills struct {
	Node                 string
	Placed, Killed, Kept int
}

// RankLimits are the most ranks of one job each node may run, learned from the
// nodes that killed its ranks ([RankLimits.Learn]); a node not in the map has no
// such limit, and a limit is at least 1. A job keeps its limits in its record
// ([Job].RankLimits), across its restarts and its coordinators.
type RankLimits map[string]int

// Learn lowers the limits after a run, from what its nodes show, and returns the
// lines that say why, in node order ("n4 killed ranks by signal 9 while it stayed
// up and kept 15 of its 19: placing at most 15 ranks there"). A node that kills
// processes beyond a limit of its own (Android's phantom-process killer, which
// SIGKILLs an app's processes beyond 32; an out-of-memory killer) kills some of the
// ranks placed there, with their wrappers as often as not, and keeps the rest: the
// ranks it kept are the most it ran, and so the limit. When none ran on to the
// run's end (the launcher's end takes the rest down with it before they say how
// they ended), half of those placed there is the limit, lowered again at the next
// sweep. The rule takes for a sweep a node where a rank died of SIGKILL and two or
// more did not run on (one, on a node that already has a limit); one rank killed
// and the others kept is a rank lost, as when someone kills it; and a node whose
// every rank died of SIGKILL shows no limit (a program that kills itself does that
// on every node).
func (l RankLimits) Learn(runs []NodeKills) []string {
	runs = append([]NodeKills(nil), runs...)
	sort.Slice(runs, func(i, j int) bool { return runs[i].Node < runs[j].Node })
	var said []string
	for _, r := range runs {
		prev, limited := l[r.Node]
		gone := r.Placed - r.Kept
		if r.Killed <= 0 || r.Killed >= r.Placed || gone <= 0 || (gone < 2 && !limited) {
			continue
		}
		limit, why := r.Kept, fmt.Sprintf("kept %d of its %d", r.Kept, r.Placed)
		if limit < 1 {
			limit, why = max(1, r.Placed/2), fmt.Sprintf("none of its %d ran on", r.Placed)
		}
		if limited && prev <= limit {
			continue
		}
		l[r.Node] = limit
		said = append(said, fmt.Sprintf("%s killed ranks by signal 9 while it stayed up and %s: placing at most %s there",
			r.Node, why, Plural(limit, "rank")))
	}
	return said
}
