package coord

import (
	"context"
	"fmt"
	"time"

	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/node"
	"shoal/internal/place"
)

// An elastic job (job.Spec.Elastic) has its rank count chosen at every
// launch: the first, and each relaunch after a node is lost or leaves, a
// rebalance onto nodes that joined, a move by the job's traffic. The count is
// place.Size's over the nodes the job is placed on, with what was learned of
// the job at its last count; a relaunch on another count restores the ranks
// from an epoch of the old count, whose shards libshoal redistributes
// (SHOAL_RESTART_NRANKS, docs/libshoal.md), once each of them is on a node of
// the new run (staging.ResizeSources).

// count is the rank count of the job's next run over live, from epoch (0: a
// fresh start), and why in words ("" for a job whose count is fixed): the
// spec's for a fixed job, and for an elastic job's first launch when it asked
// for one; else the count place.Size predicts fastest, unless epoch holds
// per-rank regions, which restore on its own count only.
func (b *clusterBackend) count(ctx context.Context, live map[string]node.Node, spec job.Spec, epoch uint64) (int, string) {
	if !spec.Elastic() {
		return spec.Ranks, ""
	}
	if b.j.ranks == 0 && spec.Ranks > 0 {
		return spec.Ranks, "" // the first launch, at the count asked
	}
	b.mu.Lock()
	restores := func(n int) bool { return b.book.Restores(epoch, n) }
	own := b.book.Ranks(epoch)
	b.mu.Unlock()
	lo, hi := spec.Range()
	in := b.learned(b.learnedInput(ctx, live, spec))
	sized, err := place.Size(in, place.Sizing{Lo: lo, Hi: hi, Allows: spec.Allows})
	switch {
	case err != nil:
		return max(b.j.ranks, lo), "" // the spec was validated: no count is allowed is not expected
	case epoch > 0 && !restores(sized.Ranks):
		return own, fmt.Sprintf("epoch %d holds per-rank regions, which restore on its own count", epoch)
	}
	return sized.Ranks, sized.Why
}

// learnedInput is what the planner is given over live for the job: its
// nodes, options and the links as measured (when they are).
func (b *clusterBackend) learnedInput(ctx context.Context, live map[string]node.Node, spec job.Spec) place.Input {
	in := place.Input{Nodes: b.placeNodes(live), Options: place.OptionsOf(spec)}
	if b.cfg.Links != nil {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		measured, err := b.cfg.Links(lctx)
		cancel()
		if err == nil && len(measured) > 0 {
			in.Links = links.ForPlanner(measured)
		}
	}
	return in
}

// learned fills in with what the job's record holds of its work and traffic,
// and the count it was learned at (in.Ranks; 0: nothing learned).
func (b *clusterBackend) learned(in place.Input) place.Input {
	prof := b.rec.Job().Traffic
	if prof == nil {
		return in
	}
	in.Ranks = prof.RanksOr(b.j.ranks)
	in.Work, in.Traffic, in.Measured = prof.Work, place.FlowsOf(prof), true
	return in
}

// trafficAt is the job's learned traffic made one of ranks ranks (rescaled
// from the count it was learned at: place.RescaleTraffic), its work per rank
// likewise, and whether it was measured at all.
func (b *clusterBackend) trafficAt(ranks int) (flowsAt []place.Flow, work float64, measured bool) {
	prof := b.rec.Job().Traffic
	if prof == nil || ranks < 1 {
		return nil, 0, false
	}
	at := prof.RanksOr(ranks)
	fs := place.FlowsOf(prof)
	if at != ranks {
		var err error
		if fs, err = place.RescaleTraffic(fs, at, ranks); err != nil {
			return nil, 0, false
		}
	}
	return fs, prof.Work * float64(at) / float64(ranks), true
}
