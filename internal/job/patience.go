package job

import (
	"fmt"
	"time"
)

// How long a run waits for a node that went silent (a cut link, Wi-Fi out of
// reach, a machine paused or switched off) before it gives up on it and
// relaunches without it. Waiting costs every rank the time it waits; giving up
// costs the work since the newest complete epoch plus a relaunch, and gains
// nothing if the node was about to come back. This is the ski-rental problem:
// wait as long as giving up would cost, then give up. A node that comes back
// within that time costs only its absence; one that never does costs at most
// twice what giving up at once would have. The policy takes effect only once
// membership has declared the node dead: a shorter silence never ends a run,
// so short blips stay restart-free and a node paused by load is not given up
// before the failure detector's own verdict. A killed node is another matter:
// its host refuses connections, and it is lost at once (checkRefused).
const (
	// MaxPatience bounds the wait: a job with a long checkpoint interval would
	// otherwise wait as long as the interval for a machine that is gone.
	MaxPatience = time.Minute
	// fenceMargin is how much sooner than its coordinator a node cut off from
	// it stops the job's ranks (see [FenceAfter]). The two sides count from
	// their own first doubt of the other, a probe period (1 s) or so apart, and
	// a later doubt counts twice: in the silence and in the work at stake.
	fenceMargin = 2 * time.Second
)

// Patience is how long a run waits for a node silent since s when the run's
// newest complete epoch was taken at epoch (the run's start when it has
// none), and a relaunch takes relaunch: the work since the epoch plus the
// relaunch, within [0, MaxPatience].
func Patience(s, epoch time.Time, relaunch time.Duration) time.Duration {
	return min(max(s.Sub(epoch)+relaunch, 0), MaxPatience)
}

// FenceAfter is how long after s, when a node first doubted the coordinator of a
// job whose newest shard on the node was taken at epoch (its grant, when
// none), the node stops the job's ranks once membership declares the
// coordinator dead. It is never later than the coordinator gives up on the
// node: the node's newest shard is no older than the run's newest complete
// epoch, the relaunch is left out, and the margin covers first doubts up to
// a second apart.
func FenceAfter(s, epoch time.Time) time.Duration {
	return max(Patience(s, epoch, 0)-fenceMargin, 0)
}

// PatienceNote says why a run waits for or gave up on a silent node: "waiting
// longer would cost more than restarting: 9.2 s of work since epoch 4 and a
// 1.3 s relaunch".
func PatienceNote(work time.Duration, epoch uint64, relaunch time.Duration) string {
	since := "since the run began"
	if epoch > 0 {
		since = fmt.Sprintf("since epoch %d", epoch)
	}
	return fmt.Sprintf("%s of work %s and a %s relaunch", Seconds(work), since, Seconds(relaunch))
}
