package coord

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/place"
)

// noteProgress records a progress report of the current run's rank 0, seen at seen
// (the report that was on its node before the launch is an earlier run's, and is
// ignored). The first report of a run ends its restart: from placement to the
// program computing again, both times on this node's clock, since the report's own
// time is the other node's.
func (b *clusterBackend) noteProgress(p *job.Progress, seen time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p == nil || p.At.Equal(b.progBase) {
		return
	}
	if b.progFirst == nil {
		b.progFirst = p
		b.restartCost = max(seen.Sub(b.launchAt), 0)
	}
	if b.progLast == nil || !p.At.Equal(b.progLast.At) {
		b.progSeen = seen
	}
	b.progLast = p
}

// remaining estimates the time the current run needs to finish, from the progress
// its rank 0 reported since the launch.
func (b *clusterBackend) remaining() (time.Duration, bool) {
	b.mu.Lock()
	f, l, seen := b.progFirst, b.progLast, b.progSeen
	b.mu.Unlock()
	if f == nil || l == nil || l.Fraction <= f.Fraction || l.At.Sub(f.At) < time.Second {
		return 0, false
	}
	perUnit := float64(l.At.Sub(f.At)) / (l.Fraction - f.Fraction)
	return max(time.Duration(perUnit*(1-l.Fraction))-time.Since(seen), 0), true
}

// weigh estimates what relaunching over the live nodes would gain against what it
// costs: an elastic job's on the count it would run there. ok is false when the
// job has not reported enough progress to tell.
func (b *clusterBackend) weigh(ctx context.Context, all map[string]node.Node) (e place.Estimate, next place.Placement, ok bool) {
	spec := b.rec.Job().Spec
	b.mu.Lock()
	newest := b.book.Newest()
	b.mu.Unlock()
	// The nodes of the first instruction set the job fits, as placeRanks takes.
	sets, _ := archSets(all, spec.ProgramArches(), spec.MixArch)
	var live map[string]node.Node
	for _, set := range sets {
		if spec.Elastic() {
			spec.Ranks, _ = b.count(ctx, set.nodes, spec, newest)
		} else {
			spec.Ranks = len(b.placement)
		}
		var err error
		if next, err = place.Spread(b.placeNodes(set.nodes), spec.Ranks, place.OptionsOf(spec)); err == nil {
			live = set.nodes
			break
		}
	}
	if live == nil {
		return e, nil, false
	}
	rem, ok := b.remaining()
	cur, nxt := place.Throughput(b.placement, placeNodes(b.nodes)), place.Throughput(next, placeNodes(live))
	b.mu.Lock()
	cost := b.ckptCost + b.restartCost
	b.mu.Unlock()
	return place.Weigh(rem, cost, cur, nxt), next, ok
}

// layoutWords names a layout the job may move to, with its count when that
// differs from the current run's: "n1:0-1 n2:2-3", "7 ranks, n1:0-1 n2:2-3 n3:4-6".
func (b *clusterBackend) layoutWords(next place.Placement) string {
	if len(next) != len(b.placement) {
		return fmt.Sprintf("%d ranks, %s", len(next), next)
	}
	return next.String()
}

// autoRebalance weighs, once for every new set of live nodes with a node the job
// does not use, relaunching over them, and starts that when it pays the job's
// AutoRebalance times over.
func (b *clusterBackend) autoRebalance(ctx context.Context) {
	ratio := b.rec.Job().Spec.AutoRebalance
	if ratio <= 0 || b.pending != nil {
		return
	}
	live, err := b.liveNodes(ctx, "")
	if err != nil {
		return
	}
	var joined []string
	for n := range live {
		if _, ok := b.nodes[n]; !ok {
			joined = append(joined, n)
		}
	}
	sort.Strings(joined)
	key := nodeList(live)
	if len(joined) == 0 || key == b.autoWeighed {
		return
	}
	e, next, ok := b.weigh(ctx, live)
	if !ok {
		return // too little progress seen yet: weigh again at the next poll
	}
	b.autoWeighed = key
	what := fmt.Sprintf("node %s available: a relaunch as %s is %s", strings.Join(joined, ", "), b.layoutWords(next), e.Describe())
	if !e.Worth(ratio) {
		b.j.event(job.EventRebalance, job.Event{Message: fmt.Sprintf("%s; not worth it (--auto-rebalance %g)", what, ratio)})
		return
	}
	b.j.event(job.EventRebalance, job.Event{Message: what + "; rebalancing"})
	b.startReconfig(ctx, reconfig{reason: "rebalancing onto " + strings.Join(joined, ", "), done: make(chan struct{})})
}

// vetRebalance decides whether an asked-for rebalance goes ahead: not when the live
// nodes would run the job no faster, nor when the gain is estimated below the cost,
// unless forced. It returns why not, or "".
func (b *clusterBackend) vetRebalance(ctx context.Context, rc reconfig) string {
	if rc.without != "" || rc.force || rc.handOver != nil {
		return ""
	}
	live, err := b.liveNodes(ctx, "")
	if err != nil {
		return ""
	}
	e, next, ok := b.weigh(ctx, live)
	switch {
	case next == nil:
		return ""
	case place.Throughput(next, placeNodes(live)) <= place.Throughput(b.placement, placeNodes(b.nodes)):
		return fmt.Sprintf("the live nodes would not run it faster (now %s, would be %s); --force relaunches anyway", b.placement, next)
	case ok && !e.Worth(1):
		return fmt.Sprintf("a relaunch as %s is %s; --force relaunches anyway", b.layoutWords(next), e.Describe())
	}
	return ""
}

// startReconfig moves the job (see [Move]): it asks rank 0's node for an immediate
// checkpoint after which the ranks hold; the relaunch follows once that epoch is
// complete (see poll). The held checkpoint is numbered above every epoch a node
// holds already, complete or not: an epoch under way when the request is made
// (written, not yet copied) completes first, and relaunching from it would lose
// the work done until the hold.
func (b *clusterBackend) startReconfig(ctx context.Context, rc reconfig) {
	b.mu.Lock()
	rc.after = max(b.book.Newest(), b.book.Highest)
	b.mu.Unlock()
	b.pending = &rc
	d := b.j.restarts.Policy.Decide(job.Outcome{Kind: job.Move, Detail: rc.reason}, 0)
	b.j.setState(d.State, job.Event{Type: job.EventReconfig, Message: d.Reason})
	id := b.rec.Job().ID
	if err := b.peer(b.placement[0]).RequestHold(ctx, id); err != nil {
		b.j.event(job.EventEpochBad, job.Event{Message: fmt.Sprintf("warning: checkpoint request to %s failed: %v", b.placement[0], err)})
	}
}
