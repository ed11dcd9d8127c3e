package place

import (
	"fmt"
	"time"

	"shoal/internal/job"
)

// Describe says what e weighs: "estimated to save 40 s of the remaining
// 2m0s, at a cost of 6 s (a checkpoint and a restart, as measured)".
func (e Estimate) Describe() string {
	return fmt.Sprintf("estimated to save %s of the remaining %s, at a cost of %s (a checkpoint and a restart, as measured)",
		job.Seconds(e.Gain), job.Seconds(e.Remaining), job.Seconds(e.Cost))
}

// PerIteration writes a predicted time per iteration to 3 figures below 10 s
// ("651 ms", "1.49 s"), so that two times the 5 % rule tells apart read apart.
func PerIteration(secs float64) string {
	switch {
	case secs < 1:
		return fmt.Sprintf("%.0f ms", secs*1000)
	case secs < 10:
		return fmt.Sprintf("%.2f s", secs)
	}
	return job.Seconds(time.Duration(secs * float64(time.Second)))
}

// OptionsOf are the bounds a job's spec sets on its placements.
func OptionsOf(spec job.Spec) Options {
	return Options{MaxOversubscribe: spec.MaxOversubscribe, MaxPerNode: spec.RanksPerNode}
}

// TooFew says why a job's ranks do not fit the live nodes: the cores they
// need at the job's oversubscription (and the nodes at its ranks per node)
// against the cores the nodes have. "too few nodes: 6 ranks need 6 cores at
// --max-oversubscribe 1; the live nodes (n1, n2) have 4".
func TooFew(spec job.Spec, live []Node) string {
	msg := fmt.Sprintf("too few nodes: %d ranks need %s at --max-oversubscribe %g", spec.Ranks, job.Plural(spec.CoresNeeded(), "core"), spec.Oversubscription())
	if spec.RanksPerNode > 0 {
		need := (spec.Ranks + spec.RanksPerNode - 1) / spec.RanksPerNode
		msg += fmt.Sprintf(" and %s at --ranks-per-node %d", job.Plural(need, "node"), spec.RanksPerNode)
	}
	names := nodeNames(live)
	if names == "" {
		names = "none"
	}
	return fmt.Sprintf("%s; the live nodes (%s) have %d", msg, names, cores(live))
}

// Oversubscribed warns that ranks ranks run on nodes with fewer cores between
// them, which a job that has run before takes rather than not running: "warning:
// 6 ranks on 4 cores of n1, n2: oversubscribed, the job runs slower
// (--wait-for-nodes waits for joins instead)".
func Oversubscribed(ranks int, nodes []Node) string {
	return fmt.Sprintf("warning: %d ranks on %d cores of %s: oversubscribed, the job runs slower (--wait-for-nodes waits for joins instead)",
		ranks, cores(nodes), nodeNames(nodes))
}

// cores is the cores of nodes between them.
func cores(nodes []Node) int {
	n := 0
	for _, nd := range nodes {
		n += nd.Cores
	}
	return n
}
