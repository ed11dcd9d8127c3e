package agent

import (
	"time"

	"shoal/internal/membership"
)

// ranksChanged is the launch service's report that its grants changed.
func (a *Agent) ranksChanged() {
	select {
	case a.ranksDirty <- struct{}{}:
	default: // one is pending: it will read the newest count
	}
}

// RanksSettle is how long the node's launch grants must stay unchanged before
// it announces their ranks. Each announcement goes to every node by gossip, and
// at a launch every node of the run announces at once: N announcements, each
// handled by N nodes (on the testbed's 32 one-core hosts, about 0.3 s of CPU per
// round). The wait is longer than a launch takes there (mpirun starting 32
// daemons: about 2 s), so that the announcements never compete with one; and a
// relaunch's revoke and grant of the same ranks, or a job shorter than the wait,
// announce nothing at all. The ranks only feed `shoal nodes`.
const RanksSettle = 3 * time.Second

// RanksMaxWait bounds how long changes that never settle (short jobs one after
// another) keep the node from announcing its ranks.
const RanksMaxWait = 10 * RanksSettle

// settleWait is how long after now to announce the ranks, when they first
// changed at first and changed again just now: RanksSettle, but never past
// first + RanksMaxWait.
func settleWait(first, now time.Time) time.Duration {
	return max(min(RanksSettle, first.Add(RanksMaxWait).Sub(now)), 0)
}

// announceRanks keeps the ranks this node announces in its metadata equal to
// those of its launch grants, so that every node's `shoal nodes` shows them
// once they have not changed for RanksSettle. Each change starts the wait
// anew: a node whose grants change again before a launch has ended (the next
// short job, a relaunch) does not announce in the middle of it. Announcing
// from one goroutine keeps the announcements in order.
func (a *Agent) announceRanks() {
	announced := 0
	var due <-chan time.Time
	var first time.Time // the first change not announced yet
	for {
		select {
		case <-a.quit:
			return
		case <-a.ranksDirty:
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			due = time.After(settleWait(first, now))
			continue
		case <-due:
		}
		due, first = nil, time.Time{}
		n := a.launch.Ranks()
		if n == announced {
			continue
		}
		// Waiting until it is gossiped keeps announcements apart (see
		// membership.Membership.UpdateMeta); a few rounds of gossip take well
		// under the timeout.
		if err := a.members.UpdateMeta(func(m *membership.Meta) { m.Ranks = n }, 5*time.Second); err != nil {
			a.log.Warn("announcing the node's ranks", "ranks", n, "err", err)
		}
		announced = n
	}
}
