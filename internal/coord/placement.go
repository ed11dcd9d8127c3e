package coord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/place"
)

// placeNodes is what the planner needs to know of nodes.
func placeNodes(nodes map[string]node.Node) []place.Node {
	out := make([]place.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, place.Node{Name: n.Name, Arch: n.Arch, Cores: n.Cores, CPUs: n.CPUs, Speed: float64(n.Speed)})
	}
	return out
}

// archSet is the live nodes of one instruction set, or of several
// (place.Mixed).
type archSet struct {
	arch  string
	nodes map[string]node.Node
}

// archSets groups live by instruction set (place.ArchSets): the sets the
// job's program is built for (allowed; nil: any), in the order to try them.
// none says why no set is given though nodes are live.
func archSets(live map[string]node.Node, allowed []string, mix bool) (sets []archSet, none string) {
	bySet, none := place.ArchSets(placeNodeMap(live), allowed, mix)
	for _, s := range bySet {
		set := archSet{arch: s.Arch, nodes: map[string]node.Node{}}
		for name := range s.Nodes {
			set.nodes[name] = live[name]
		}
		sets = append(sets, set)
	}
	return sets, none
}

// placeNodeMap is placeNodes by name.
func placeNodeMap(nodes map[string]node.Node) map[string]place.Node {
	out := make(map[string]place.Node, len(nodes))
	for _, n := range placeNodes(nodes) {
		out[n.Name] = n
	}
	return out
}

// placeRanks places the job's ranks over the live nodes (but without), within the
// job's oversubscription limit: an elastic job's as many as count chooses over
// them, restoring from epoch, with why it chose that many. When they do not
// fit, it waits up to the job's WaitForNodes for nodes to join and then fails; a
// job that does not wait and has run before is relaunched on the survivors,
// oversubscribed, since running slower beats not running.
func (b *clusterBackend) placeRanks(ctx context.Context, spec job.Spec, without string, epoch uint64) (map[string]node.Node, place.Placement, string, error) {
	wait := time.Duration(spec.WaitForNodes)
	deadline := time.Now().Add(wait)
	opts := place.OptionsOf(spec)
	announced := false
	ranBefore := b.placement != nil || b.j.resume != nil // a resumed job ran under another coordinator
	for {
		live, err := b.liveNodes(ctx, without)
		if err != nil {
			return nil, nil, "", err
		}
		if b.pending != nil && b.pending.sameNodes {
			live = b.ofRun(live)
		}
		// One world per instruction set: the first set the ranks fit.
		allowed := spec.ProgramArches()
		sets, none := archSets(live, allowed, spec.MixArch)
		for _, set := range sets {
			ranks, why := b.count(ctx, set.nodes, spec, epoch)
			fit := spec
			fit.Ranks = ranks
			p, plan, _, err := b.plan(ctx, set.nodes, fit, opts)
			if err != nil {
				continue
			}
			b.lastPlan = plan
			b.sayLeftOut(live, set, allowed)
			if announced {
				b.j.event(job.EventNodes, job.Event{Message: fmt.Sprintf("the ranks fit now, on %s", nodeList(set.nodes))})
			}
			return set.nodes, p, why, nil
		}
		if wait == 0 && ranBefore && len(sets) > 0 {
			set := sets[0]
			var why string
			spec.Ranks, why = b.count(ctx, set.nodes, spec, epoch)
			p, plan, _, err := b.plan(ctx, set.nodes, spec, place.Options{MaxOversubscribe: float64(spec.Ranks)})
			if err == nil {
				b.lastPlan = plan
				b.sayLeftOut(live, set, allowed)
				b.j.event(job.EventNodes, job.Event{Message: place.Oversubscribed(spec.Ranks, placeNodes(set.nodes))})
				return set.nodes, p, why, nil
			}
		}
		if len(sets) > 0 {
			live = sets[0].nodes
		}
		short := place.TooFew(spec, placeNodes(live))
		if none != "" {
			short = none
		}
		b.mu.Lock()
		if left := b.noOverlay; len(left) > 0 {
			short += fmt.Sprintf("; %s leaves out %s, whose agent carries no overlay (shoal agent --overlay auto)", spec.OverlayFlag(), strings.Join(left, ", "))
		}
		b.mu.Unlock()
		if wait == 0 {
			return nil, nil, "", fmt.Errorf("%s (a higher --max-oversubscribe allows more ranks per core; --wait-for-nodes waits for nodes to join)", short)
		}
		if time.Now().After(deadline) {
			return nil, nil, "", fmt.Errorf("%s, and no node joined within --wait-for-nodes %s", short, wait)
		}
		if !announced {
			announced = true
			b.j.event(job.EventNodes, job.Event{Message: fmt.Sprintf("%s; waiting up to %s for nodes to join", short, wait)})
		}
		select {
		case <-ctx.Done():
			return nil, nil, "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// sayLeftOut tells the job which live nodes its run on set leaves out, when
// that changed since it last said so, and keeps them for the fence (they may
// hold ranks of an earlier run).
func (b *clusterBackend) sayLeftOut(live map[string]node.Node, set archSet, allowed []string) {
	b.setAside = map[string]node.Node{}
	for name, n := range live {
		if _, in := set.nodes[name]; !in {
			b.setAside[name] = n
		}
	}
	note := place.LeftOut(placeNodeMap(live), place.ArchSet{Arch: set.arch, Nodes: placeNodeMap(set.nodes)}, allowed)
	if note != b.leftOutNote && note != "" {
		b.j.event(job.EventNodes, job.Event{Message: note})
	}
	b.leftOutNote = note
}

// planMargin is how much faster than contiguous blocks the planner's layout
// must be predicted to be for the job to take it: blocks keep neighbouring
// ranks together, are what a user expects, and the model is only a model.
const planMargin = 0.05

// trafficMoveWorth is how many times its cost a move by the learned traffic
// must be estimated to save. The estimate rests on measures that move with the
// machine's load (probes read one testbed link anywhere from 2 to 6.7 Gbit/s,
// and a profile per second depends on the layout the job ran on): on equal
// hosts it once predicted a swap of two nodes' blocks 8 % faster, saving 1.4 s
// for 1.1 s, and the job moved for nothing. The moves this is for (a slow link
// between the ranks that talk) save ten times their cost and more.
const trafficMoveWorth = 2

// The planner's search is tried up to these sizes (it takes about 30 ms at 256
// ranks on 32 nodes); beyond them the ranks go in blocks.
const (
	maxPlanRanks = 1024
	maxPlanNodes = 128
)

// plan places the job's ranks over live: the planner's layout (place.Choose,
// weighing the measured links and the job's traffic) when it is predicted at
// least planMargin faster than contiguous blocks in proportion to cores ×
// speed (place.Spread), else the blocks. The PlanInfo says which and why; the
// Input is what the planner was given (zero when the layout was not its to
// choose), so that a caller predicting other layouts sees the same links.
func (b *clusterBackend) plan(ctx context.Context, live map[string]node.Node, spec job.Spec, opts place.Options) (place.Placement, *job.Plan, place.Input, error) {
	nodes := b.placeNodes(live)
	blocks, err := place.Spread(nodes, spec.Ranks, opts)
	if err != nil {
		return nil, nil, place.Input{}, err
	}
	switch spec.Layout {
	case "blocks":
		return blocks, &job.Plan{Reason: "contiguous blocks in proportion to cores × speed, as asked (--layout blocks)"}, place.Input{}, nil
	case "cyclic":
		p, err := place.Cyclic(nodes, spec.Ranks, opts)
		return p, &job.Plan{Reason: "rank i to the i-th node in turn, as asked (--layout cyclic)"}, place.Input{}, err
	case "packed":
		p, err := place.Packed(nodes, spec.Ranks, opts)
		return p, &job.Plan{Reason: "nodes filled to their slots in name order, as asked (--layout packed)"}, place.Input{}, err
	}
	if spec.NoReplan {
		return blocks, &job.Plan{Reason: "contiguous blocks in proportion to cores × speed, as asked (--no-replan)"}, place.Input{}, nil
	}
	if spec.Ranks > maxPlanRanks || len(nodes) > maxPlanNodes {
		return blocks, &job.Plan{Reason: fmt.Sprintf("contiguous blocks in proportion to cores × speed: more than %d ranks or %d nodes, too many for the planner's search", maxPlanRanks, maxPlanNodes)}, place.Input{}, nil
	}
	// The planner packs no node tighter than the blocks pack their tightest
	// (and never beyond its cores when the blocks fit in them): the compute it
	// learns is the share of time outside MPI calls, and ranks that wait for a
	// core spend that inside them, so it would take oversubscribed ranks for
	// communicating ones and pack them tighter still.
	bound := max(1, place.Tightest(blocks, nodes))
	if opts.MaxOversubscribe > 0 {
		bound = min(bound, opts.MaxOversubscribe)
	}
	opts.MaxOversubscribe = bound
	// A profile with no flows is a measurement too: the ranks sent nothing.
	in := b.learnedInput(ctx, live, spec)
	in.Ranks, in.Options = spec.Ranks, opts
	if b.rec != nil {
		in.Traffic, in.Work, in.Measured = b.trafficAt(spec.Ranks)
	}
	info := &job.Plan{Traffic: in.Measured, Links: in.Links != nil}
	chosen, err := place.Choose(in)
	if err != nil {
		return blocks, nil, in, nil // the blocks stand; the planner's refusal is no reason to stop
	}
	info.Blocks = chosen.SpreadCost.Total()
	if chosen.Cost.Total() <= chosen.SpreadCost.Total()*(1-planMargin) {
		info.Reason, info.Compute, info.Comm = chosen.Reason, chosen.Cost.Compute, chosen.Cost.Comm
		return chosen.Placement, info, in, nil
	}
	cost, _ := place.Predict(in, blocks)
	info.Compute, info.Comm = cost.Compute, cost.Comm
	info.Reason = fmt.Sprintf("contiguous blocks in proportion to cores × speed: the best other layout is predicted %s per iteration against %s",
		place.PerIteration(chosen.Cost.Total()), place.PerIteration(cost.Total()))
	if chosen.Cost.Total() >= cost.Total() {
		info.Reason = "contiguous blocks in proportion to cores × speed: no other layout is predicted faster"
	}
	return blocks, info, in, nil
}

// nodeList names nodes in order: "n1, n2".
func nodeList(nodes map[string]node.Node) string {
	if len(nodes) == 0 {
		return "none"
	}
	return strings.Join(names(nodes), ", ")
}

// autoReplan weighs, each time the job's traffic profile changes, moving the
// job to the layout the planner predicts from it: it moves when the time saved
// over the rest of the run exceeds what a checkpoint and a restart cost, as
// measured (the rule of rebalancing), unless the job asked not to
// (--no-replan, or a forced --layout).
func (b *clusterBackend) autoReplan(ctx context.Context) {
	spec := b.rec.Job().Spec
	// b.traffic is nil until measured; empty, the ranks were measured sending
	// nothing, which is weighed as any profile (a silent job may gain by spreading).
	if spec.NoReplan || spec.Layout != "" || b.pending != nil || b.trafficGen == 0 || b.trafficGen == b.replanWeighed {
		return
	}
	rem, ok := b.remaining()
	if !ok {
		return // too little progress seen yet: weigh again at the next poll
	}
	b.replanWeighed = b.trafficGen
	live, err := b.liveNodes(ctx, "")
	if err != nil {
		return
	}
	spec.Ranks = len(b.placement) // a move by the traffic keeps the count
	next, info, in, err := b.plan(ctx, b.ofRun(live), spec, place.OptionsOf(spec))
	if err != nil || info == nil {
		return
	}
	if slices.Equal(next, b.placement) {
		b.lastPlan = info
		b.rec.Update(func(a *job.Job) { a.Plan = info })
		b.j.event(job.EventRebalance, job.Event{Message: "the traffic learned so far keeps the ranks where they are: " + info.Reason})
		return
	}
	if in.Ranks == 0 {
		return // not the planner's layout
	}
	in.Options = place.OptionsOf(spec)
	cur, doubted, err := place.LinksDoubted(in, b.placement, b.trafficOn)
	nextCost := info.Compute + info.Comm
	if err != nil || nextCost <= 0 {
		return
	}
	if doubted {
		b.j.event(job.EventRebalance, job.Event{Message: fmt.Sprintf("the links as measured predict %s of communication per iteration for the ranks where they are, which ran it all in 1 s: measures that far off (probes taken under load) move no rank; staying",
			place.PerIteration(cur.Comm))})
		return
	}
	if !(nextCost < cur.Total()*(1-planMargin)) {
		b.j.event(job.EventRebalance, job.Event{Message: fmt.Sprintf("the traffic learned so far predicts %s per iteration as %s against %s now: not %.0f %% faster; staying",
			place.PerIteration(nextCost), next, place.PerIteration(cur.Total()), 100*planMargin)})
		return
	}
	b.mu.Lock()
	cost := b.ckptCost + b.restartCost
	b.mu.Unlock()
	e := place.Weigh(rem, cost, 1/cur.Total(), 1/nextCost)
	what := fmt.Sprintf("the traffic learned so far predicts %s per iteration as %s against %s now: %s",
		place.PerIteration(nextCost), next, place.PerIteration(cur.Total()), e.Describe())
	if !e.Worth(trafficMoveWorth) {
		b.j.event(job.EventRebalance, job.Event{Message: fmt.Sprintf("%s; not worth a move (it must save %d times its cost)", what, trafficMoveWorth)})
		return
	}
	b.j.event(job.EventRebalance, job.Event{Message: what + "; moving"})
	b.startReconfig(ctx, reconfig{reason: "placing by the job's traffic", sameNodes: true, done: make(chan struct{})})
}

// ofRun keeps of live the nodes of the current run.
func (b *clusterBackend) ofRun(live map[string]node.Node) map[string]node.Node {
	out := map[string]node.Node{}
	for name, n := range live {
		if _, ok := b.nodes[name]; ok {
			out[name] = n
		}
	}
	return out
}
