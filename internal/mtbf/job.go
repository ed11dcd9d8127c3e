package mtbf

import (
	"strconv"
	"time"
)

// NodeMTBF is one node's mean time between failures for a run's SHOAL_MTBF,
// and what it rests on: the user's --mtbf (given) when set, else the failure
// record rec.
func NodeMTBF(given time.Duration, rec Estimate) (time.Duration, string) {
	if given > 0 {
		return given, "as given with --mtbf"
	}
	return rec.NodeMTBF(), rec.String()
}

// Env is the SHOAL_MTBF of a run over nodes nodes whose each fails every
// node: the job's mean time between failures, in whole seconds, at least 1
// (libshoal refuses 0).
func Env(node time.Duration, nodes int) string {
	job := node / time.Duration(max(nodes, 1))
	return "SHOAL_MTBF=" + strconv.FormatInt(max(int64(job.Seconds()), 1), 10)
}
