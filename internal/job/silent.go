package job

import (
	"sort"
	"time"
)

// Heard is what a node last reported of a run's silent ranks (its shard
// index), and when that report was received (the coordinator's clock).
type Heard struct {
	Silent []Silent
	At     time.Time
}

// Silences gathers the silent ranks of a run, launched at launch with
// placement (rank → node), from what the nodes last reported, each silence as
// of now: the silence a node measured plus the time since its report came. A
// silence that began before the launch is an earlier run's rank (a process
// not yet reaped, its file not yet replaced), and so is a rank a node reports
// that the run does not place there; neither counts.
func Silences(heard map[string]Heard, placement []string, launch, now time.Time) []Silent {
	var out []Silent
	for node, h := range heard {
		for _, s := range h.Silent {
			if s.Rank < 0 || s.Rank >= len(placement) || placement[s.Rank] != node ||
				h.At.Add(-time.Duration(s.For)).Before(launch) {
				continue
			}
			s.Node = node
			s.For += Duration(max(now.Sub(h.At), 0))
			out = append(out, s)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Rank < out[b].Rank })
	return out
}
