package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/ckpt"
	"shoal/internal/engine"
	"shoal/internal/files"
	"shoal/internal/place"
)

// clusterBackend runs a job over the cluster's nodes. Each rank writes its shards to
// its own node; the backend has every shard copied to Redundancy nodes, counts an
// epoch complete when every rank's shard is that durable, and after a node is lost
// relaunches from the newest complete epoch whose shards all survive, on the nodes
// that remain.
type clusterBackend struct {
	s  *Service
	cj *clusterJob
	j  *job

	redundancy int
	placement  place.Placement
	nodes      map[string]api.Node // the nodes of the current run, as placed

	mu      sync.Mutex
	holders map[uint64]map[int]map[string]bool // epoch → rank → nodes with a verified copy
	// sums holds, by epoch and rank, the checksum of the shard as the rank's own node
	// wrote it in the run that took the epoch. A copy counts only when it matches:
	// a node that was cut off and comes back may hold shards its fenced ranks wrote
	// under numbers a later run has reused, and those must never be counted.
	sums      map[uint64]map[int]uint64
	runBase   uint64            // the first epoch the current run may write
	created   map[uint64]uint64 // epoch → created_ns
	complete  map[uint64]bool
	inflight  map[shardCopy]bool // replications under way
	lastSeen  map[string]time.Time
	excluded  map[string]bool // nodes that stopped answering; not placed on
	lastPoll  time.Time
	highest   uint64
	reconfigs chan reconfig
	pending   *reconfig // a planned reconfiguration waiting for its checkpoint

	// What a rebalance is weighed with, measured on this job (job goroutine only).
	launchAt    time.Time     // when the current run's placement was made (this node's clock)
	progBase    time.Time     // the time of the report on rank 0's node before the launch
	restartCost time.Duration // the last launch: placement to the first progress report
	ckptCost    time.Duration // the newest complete epoch: written to durable
	progFirst   *api.Progress // the current run's first progress report
	progLast    *api.Progress // and its latest
	progSeen    time.Time     // when the latest was first seen (this node's clock)
	autoWeighed string        // the live nodes an automatic rebalance was last weighed for
}

// reconfig is a planned relaunch: a node leaving, or a rebalance over new nodes.
type reconfig struct {
	without string        // node to leave out ("" for a rebalance)
	after   uint64        // relaunch once an epoch newer than this is complete
	done    chan struct{} // closed once the job runs without the node (or ended)
	reason  string
	// force relaunches a rebalance even when it is estimated not to pay.
	force bool
	// refused, when not nil, receives why a rebalance was not done, before done
	// is closed.
	refused *string
}

var _ backend = (*clusterBackend)(nil)

func (b *clusterBackend) peer(name string) Peer { return b.s.cfg.Peer(b.nodes[name]) }

// liveNodes returns the nodes the job may use now. A node excluded for not answering
// or for leaving stays excluded until membership declares it dead or left; if it
// comes back alive after that, it is a node like any other (a join).
func (b *clusterBackend) liveNodes(ctx context.Context, without string) (map[string]api.Node, error) {
	nodes, err := b.s.cfg.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	b.forgetGone(nodes)
	out := map[string]api.Node{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range nodes {
		if n.State == "alive" && !n.Leaving && !b.excluded[n.Name] && n.Name != without {
			out[n.Name] = n
		}
	}
	return out, nil
}

func (b *clusterBackend) prepare(ctx context.Context, restartEpoch uint64, env []string, ranksDir string) (engine.Launch, []string, string, error) {
	info := b.cj.snapshot()
	without := ""
	if b.pending != nil {
		without = b.pending.without
	}
	live, p, err := b.placeRanks(ctx, info.Spec, without)
	if err != nil {
		return engine.Launch{}, nil, "", err
	}
	candidates := placeNodes(live)
	if info.Spec.Relocation == "block" && b.placement != nil {
		if bp, err := place.Block(b.placement, candidates); err == nil {
			p = bp
		}
	}
	moves := describeMoves(b.placement, p, live)
	if rc := b.pending; rc != nil {
		b.mu.Lock()
		if rc.without != "" {
			b.excluded[rc.without] = true // until membership shows it gone
		}
		b.mu.Unlock()
		b.pending = nil
		defer close(rc.done)
	}
	old := b.nodes
	b.placement, b.nodes = p, live
	b.launchAt, b.progFirst, b.progLast, b.progBase = time.Now(), nil, nil, time.Time{}
	// What rank 0's node reports before the launch is an earlier run's progress.
	if _, prog, err := b.peer(p[0]).Shards(ctx, info.ID); err == nil && prog != nil {
		b.progBase = prog.At
	}
	byNode := map[string][]int{}
	for r, n := range p {
		byNode[n] = append(byNode[n], r)
	}
	b.cj.mu.Lock()
	b.cj.placement = p
	b.cj.mu.Unlock()
	b.cj.update(func(a *api.Job) { a.Placement = byNode; a.State = api.JobStaging })

	// Fence every earlier run wherever it may still have processes: the nodes of the
	// last run, and any node of this one, which may be back from being cut off with a
	// fenced run's ranks still alive. Then stage and grant.
	for name := range live {
		_, wasIn := old[name]
		if wasIn || len(byNode[name]) > 0 {
			b.peer(name).Revoke(ctx, info.ID)
		}
	}
	if err := b.stage(ctx, info, byNode, restartEpoch); err != nil {
		return engine.Launch{}, nil, "", err
	}
	l, launcherEnv, err := b.s.launchFiles(info, p, live, env)
	if err != nil {
		return engine.Launch{}, nil, "", err
	}
	b.j.progressFile = "" // progress comes with rank 0's node's shard index (refresh)
	names := make([]string, 0, len(byNode))
	for n := range byNode {
		names = append(names, n)
	}
	sort.Strings(names)
	where := fmt.Sprintf("on %d nodes (%s)", len(names), p)
	if moves != "" {
		where = fmt.Sprintf("on %s (%s)", strings.Join(names, ", "), moves)
	}
	return l, launcherEnv, where, nil
}

// placeNodes is what the planner needs to know of nodes.
func placeNodes(nodes map[string]api.Node) []place.Node {
	out := make([]place.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, place.Node{Name: n.Name, Cores: n.Cores, Speed: float64(n.Speed)})
	}
	return out
}

// placeRanks places the job's ranks over the live nodes (but without), within the
// job's oversubscription limit. When they do not fit, it waits up to the job's
// WaitForNodes for nodes to join and then fails; a job that does not wait and has
// run before is relaunched on the survivors, oversubscribed, since running slower
// beats not running.
func (b *clusterBackend) placeRanks(ctx context.Context, spec api.JobSpec, without string) (map[string]api.Node, place.Placement, error) {
	wait := time.Duration(spec.WaitForNodes)
	deadline := time.Now().Add(wait)
	opts := place.Options{MaxOversubscribe: spec.MaxOversubscribe}
	announced := false
	for {
		live, err := b.liveNodes(ctx, without)
		if err != nil {
			return nil, nil, err
		}
		p, err := place.Spread(placeNodes(live), spec.Ranks, opts)
		if err == nil {
			if announced {
				b.j.event(EventNodes, Event{Message: fmt.Sprintf("the ranks fit now, on %s", nodeList(live))})
			}
			return live, p, nil
		}
		if wait == 0 && b.placement != nil && len(live) > 0 {
			p, err := place.Spread(placeNodes(live), spec.Ranks, place.Options{MaxOversubscribe: float64(spec.Ranks)})
			if err == nil {
				b.j.event(EventNodes, Event{Message: fmt.Sprintf("warning: %d ranks on %d cores of %s: oversubscribed, the job runs slower (--wait-for-nodes waits for joins instead)",
					spec.Ranks, totalCores(live), nodeList(live))})
				return live, p, nil
			}
		}
		short := fmt.Sprintf("too few nodes: %d ranks need %s at --max-oversubscribe %g; the live nodes (%s) have %d",
			spec.Ranks, plural(coresNeeded(spec), "core"), max(spec.MaxOversubscribe, 1), nodeList(live), totalCores(live))
		if wait == 0 {
			return nil, nil, fmt.Errorf("%s (a higher --max-oversubscribe allows more ranks per core; --wait-for-nodes waits for nodes to join)", short)
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%s, and no node joined within --wait-for-nodes %s", short, wait)
		}
		if !announced {
			announced = true
			b.j.event(EventNodes, Event{State: Placing, Message: fmt.Sprintf("%s; waiting up to %s for nodes to join", short, wait)})
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func coresNeeded(spec api.JobSpec) int {
	return int(math.Ceil(float64(spec.Ranks)/max(spec.MaxOversubscribe, 1) - 1e-9))
}

func totalCores(nodes map[string]api.Node) int {
	n := 0
	for _, node := range nodes {
		n += node.Cores
	}
	return n
}

// nodeList names nodes in order: "n1, n2".
func nodeList(nodes map[string]api.Node) string {
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// describeMoves says where a lost node's ranks went, and how many ranks of the
// surviving nodes moved too (placing every rank anew may move some to balance the
// load): "2 of c's ranks → a, 1 → b; 1 other rank moved". Nothing when no node was lost.
func describeMoves(prev, next place.Placement, live map[string]api.Node) string {
	if prev == nil {
		return ""
	}
	var parts []string
	lost := map[string]map[string]int{}
	var order []string
	others := 0
	for r, from := range prev {
		if r >= len(next) {
			continue
		}
		if _, ok := live[from]; ok {
			if next[r] != from {
				others++
			}
			continue
		}
		if lost[from] == nil {
			lost[from] = map[string]int{}
			order = append(order, from)
		}
		lost[from][next[r]]++
	}
	for _, from := range order {
		moves := sortedMoves(lost[from])
		first := strings.Replace(moves[0], " → ", " of "+from+"'s ranks → ", 1)
		parts = append(parts, strings.Join(append([]string{first}, moves[1:]...), ", "))
	}
	if len(parts) > 0 && others > 0 {
		parts = append(parts, plural(others, "other rank")+" moved")
	}
	return strings.Join(parts, "; ")
}

func sortedMoves(m map[string]int) []string {
	var out []string
	for dst, n := range m {
		out = append(out, fmt.Sprintf("%d → %s", n, dst))
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.SplitN(out[i], " → ", 2)[1] < strings.SplitN(out[j], " → ", 2)[1]
	})
	return out
}

// stage copies the job's files and, for a restart, each rank's shard to the node the
// rank will run on, from any live node holding a verified copy; all in parallel.
func (b *clusterBackend) stage(ctx context.Context, info api.Job, byNode map[string][]int, epoch uint64) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(byNode)*(1+info.Spec.Ranks))
	var copiedMu sync.Mutex
	copied := map[string][]api.File{} // by node
	for name, ranks := range byNode {
		peer := b.peer(name)
		wg.Add(1)
		go func(name string, nranks int) {
			defer wg.Done()
			var files []api.File
			if name != b.s.cfg.Node { // the submitter uploaded them here
				var err error
				if files, err = b.s.stage(ctx, peer, info); err != nil {
					errs <- fmt.Errorf("stage job %s on %s: %w", info.ID, name, err)
					return
				}
			}
			copiedMu.Lock()
			copied[name] = files
			copiedMu.Unlock()
			if err := peer.Grant(ctx, info.ID, b.s.cfg.Node, nranks, 24*time.Hour); err != nil {
				errs <- fmt.Errorf("grant job %s on %s: %w", info.ID, name, err)
			}
		}(name, len(ranks))
		if epoch == 0 {
			continue
		}
		for _, r := range ranks {
			b.mu.Lock()
			holders := b.holders[epoch][r]
			var from string
			have := holders[name]
			for h := range holders {
				if _, ok := b.nodes[h]; ok && h != name {
					from = h
				}
			}
			b.mu.Unlock()
			// Fetch even when the node is believed to hold the shard: its copy may
			// have been damaged since, and a node holding a good copy answers at
			// once without copying.
			if from == "" && have {
				continue
			}
			if from == "" {
				return fmt.Errorf("no live node holds rank %d's shard of epoch %d", r, epoch)
			}
			wg.Add(1)
			go func(name, from string, r int) {
				defer wg.Done()
				ref := api.ShardRef{Job: info.ID, Epoch: epoch, Rank: r}
				if err := b.peer(name).Fetch(ctx, ref, b.nodes[from].API); err != nil {
					errs <- fmt.Errorf("stage rank %d's shard of epoch %d from %s to %s: %w", r, epoch, from, name, err)
					return
				}
				b.addHolder(epoch, r, name, 0)
			}(name, from, r)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	b.j.event(EventStage, Event{Message: describeStaging(copied)})
	return nil
}

func (b *clusterBackend) addHolder(epoch uint64, rank int, node string, created uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holders[epoch] == nil {
		b.holders[epoch] = map[int]map[string]bool{}
	}
	if b.holders[epoch][rank] == nil {
		b.holders[epoch][rank] = map[string]bool{}
	}
	b.holders[epoch][rank][node] = true
	if created != 0 {
		b.created[epoch] = created
	}
	b.highest = max(b.highest, epoch)
}

// poll refreshes what each node holds, starts the copies that make shards durable,
// records newly complete epochs, and reports a lost node.
func (b *clusterBackend) poll(ctx context.Context) *nodeLoss {
	if time.Since(b.lastPoll) < 300*time.Millisecond {
		return nil
	}
	b.lastPoll = time.Now()
	if loss := b.checkMembers(ctx); loss != nil {
		return loss
	}
	b.refresh(ctx)
	b.replicate(ctx)
	b.markComplete(ctx)
	select {
	case rc := <-b.reconfigs:
		if why := b.vetRebalance(ctx, rc); why != "" {
			b.j.event(EventRebalance, Event{Message: "not rebalancing: " + why})
			if rc.refused != nil {
				*rc.refused = why
			}
			close(rc.done)
		} else {
			b.startReconfig(ctx, rc)
		}
	default:
		b.autoRebalance(ctx)
	}
	if rc := b.pending; rc != nil {
		b.mu.Lock()
		var taken uint64
		for e := range b.complete {
			if e > rc.after {
				taken = max(taken, e)
			}
		}
		// The ranks hold still after that checkpoint: nothing since it is lost.
		at := time.Unix(0, int64(b.created[taken]))
		b.mu.Unlock()
		if taken > 0 {
			return &nodeLoss{nodes: []string{rc.without}, reason: rc.reason, at: at, planned: true}
		}
	}
	return nil
}

// checkMembers reports the nodes of the run that membership declares dead or left.
func (b *clusterBackend) checkMembers(ctx context.Context) *nodeLoss {
	nodes, err := b.s.cfg.Nodes(ctx)
	if err != nil {
		return nil
	}
	b.forgetGone(nodes)
	var lost []string
	reason := ""
	for _, n := range nodes {
		if _, ok := b.nodes[n.Name]; !ok || (n.State != "dead" && n.State != "left") {
			continue
		}
		if b.pending != nil && n.Name == b.pending.without {
			continue
		}
		b.mu.Lock()
		seen := b.lastSeen[n.Name]
		b.mu.Unlock()
		if n.State == "dead" && time.Since(seen) < 2*time.Second && b.answers(ctx, n.Name) {
			// A node that answered a moment ago and still answers is not lost: a
			// partition that heals gossips the other side's verdicts, and the node
			// refutes its "death" within a probe period.
			continue
		}
		lost = append(lost, n.Name)
		reason = n.State
		if n.State == "dead" && !seen.IsZero() {
			reason = noAnswerSince(seen)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	sort.Strings(lost)
	return &nodeLoss{nodes: lost, reason: reason, at: time.Now()}
}

// noAnswerSince is the reason a node last seen at seen is taken as lost.
func noAnswerSince(seen time.Time) string {
	return "no answer for " + seconds(time.Since(seen))
}

// forgetGone ends the exclusion of the nodes membership declares dead or left: if
// one comes back alive, it is a join like any other (see liveNodes).
func (b *clusterBackend) forgetGone(nodes []api.Node) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range nodes {
		if n.State == "dead" || n.State == "left" {
			delete(b.excluded, n.Name)
		}
	}
}

// answers says whether node's agent answers now (within a second).
func (b *clusterBackend) answers(ctx context.Context, node string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, _, err := b.peer(node).Shards(cctx, b.cj.snapshot().ID); err != nil {
		return false
	}
	b.mu.Lock()
	b.lastSeen[node] = time.Now()
	b.mu.Unlock()
	return true
}

// refresh asks every node of the run which verified shards it holds.
func (b *clusterBackend) refresh(ctx context.Context) {
	id := b.cj.snapshot().ID
	var wg sync.WaitGroup
	indexes := map[string][]ShardInfo{} // by node, those that answered
	for name := range b.nodes {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			shards, prog, err := b.peer(name).Shards(cctx, id)
			if err != nil {
				return
			}
			if len(b.placement) > 0 && name == b.placement[0] {
				b.noteProgress(prog, time.Now())
			}
			b.mu.Lock()
			b.lastSeen[name] = time.Now()
			indexes[name] = shards
			b.mu.Unlock()
		}(name)
	}
	wg.Wait()
	// The writers' reports first, so that a copy reported by another node in the same
	// round is checked against them at once, not a round later.
	for name, shards := range indexes {
		b.noteWritten(name, shards)
	}
	// An index replaces what we knew of its node: a copy found corrupt since, or
	// removed, must not be counted or staged from.
	b.mu.Lock()
	for _, ranks := range b.holders {
		for _, nodes := range ranks {
			for name := range indexes {
				delete(nodes, name)
			}
		}
	}
	b.mu.Unlock()
	for name, shards := range indexes {
		for _, s := range b.accept(name, shards) {
			b.addHolder(s.Epoch, s.Rank, name, s.CreatedNs)
		}
	}
	if b.progLast != nil {
		b.j.reportProgress(b.progLast.Fraction)
	}
}

// noteWritten records, from node's index, the checksums of the shards of the current
// run's epochs that node wrote itself (the ranks it runs), and raises the highest
// epoch seen, so that no later run reuses a number that any node holds.
func (b *clusterBackend) noteWritten(node string, shards []ShardInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range shards {
		b.highest = max(b.highest, s.Epoch)
		if s.Epoch >= b.runBase && s.Rank < len(b.placement) && b.placement[s.Rank] == node {
			if b.sums[s.Epoch] == nil {
				b.sums[s.Epoch] = map[int]uint64{}
			}
			if _, ok := b.sums[s.Epoch][s.Rank]; !ok {
				b.sums[s.Epoch][s.Rank] = s.Checksum
			}
		}
	}
}

// accept returns the shards of node's index that are the job's own: copies with the
// checksum the rank's own node wrote (noteWritten) in the run that took the epoch.
func (b *clusterBackend) accept(node string, shards []ShardInfo) []ShardInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ShardInfo
	for _, s := range shards {
		if sum, ok := b.sums[s.Epoch][s.Rank]; ok && sum == s.Checksum {
			out = append(out, s)
		}
	}
	return out
}

// noteProgress records a progress report of the current run's rank 0, seen at seen
// (the report that was on its node before the launch is an earlier run's, and is
// ignored). The first report of a run ends its restart: from placement to the
// program computing again, both times on this node's clock, since the report's own
// time is the other node's.
func (b *clusterBackend) noteProgress(p *api.Progress, seen time.Time) {
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
	f, l := b.progFirst, b.progLast
	if f == nil || l == nil || l.Fraction <= f.Fraction || l.At.Sub(f.At) < time.Second {
		return 0, false
	}
	perUnit := float64(l.At.Sub(f.At)) / (l.Fraction - f.Fraction)
	return max(time.Duration(perUnit*(1-l.Fraction))-time.Since(b.progSeen), 0), true
}

// weigh estimates what relaunching over the live nodes would gain against what it
// costs. ok is false when the job has not reported enough progress to tell.
func (b *clusterBackend) weigh(live map[string]api.Node) (e place.Estimate, next place.Placement, ok bool) {
	spec := b.cj.snapshot().Spec
	next, err := place.Spread(placeNodes(live), spec.Ranks, place.Options{MaxOversubscribe: spec.MaxOversubscribe})
	if err != nil {
		return e, nil, false
	}
	rem, ok := b.remaining()
	cur, nxt := place.Rate(b.placement, placeNodes(b.nodes)), place.Rate(next, placeNodes(live))
	return place.Weigh(rem, b.ckptCost+b.restartCost, cur, nxt), next, ok
}

func describeEstimate(e place.Estimate) string {
	return fmt.Sprintf("estimated to save %s of the remaining %s, at a cost of %s (a checkpoint and a restart, as measured)",
		seconds(e.Gain), seconds(e.Remaining), seconds(e.Cost))
}

// autoRebalance weighs, once for every new set of live nodes with a node the job
// does not use, relaunching over them, and starts that when it pays the job's
// AutoRebalance times over.
func (b *clusterBackend) autoRebalance(ctx context.Context) {
	ratio := b.cj.snapshot().Spec.AutoRebalance
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
	e, next, ok := b.weigh(live)
	if !ok {
		return // too little progress seen yet: weigh again at the next poll
	}
	b.autoWeighed = key
	what := fmt.Sprintf("node %s available: a relaunch as %s is %s", strings.Join(joined, ", "), next, describeEstimate(e))
	if !e.Worth(ratio) {
		b.j.event(EventRebalance, Event{Message: fmt.Sprintf("%s; not worth it (--auto-rebalance %g)", what, ratio)})
		return
	}
	b.j.event(EventRebalance, Event{Message: what + "; rebalancing"})
	b.startReconfig(ctx, reconfig{reason: "rebalancing onto " + strings.Join(joined, ", "), done: make(chan struct{})})
}

// vetRebalance decides whether an asked-for rebalance goes ahead: not when the live
// nodes would run the job no faster, nor when the gain is estimated below the cost,
// unless forced. It returns why not, or "".
func (b *clusterBackend) vetRebalance(ctx context.Context, rc reconfig) string {
	if rc.without != "" || rc.force {
		return ""
	}
	live, err := b.liveNodes(ctx, "")
	if err != nil {
		return ""
	}
	e, next, ok := b.weigh(live)
	switch {
	case next == nil:
		return ""
	case place.Rate(next, placeNodes(live)) <= place.Rate(b.placement, placeNodes(b.nodes)):
		return fmt.Sprintf("the live nodes would not run it faster (now %s, would be %s); --force relaunches anyway", b.placement, next)
	case ok && !e.Worth(1):
		return fmt.Sprintf("a relaunch as %s is %s; --force relaunches anyway", next, describeEstimate(e))
	}
	return ""
}

// want is how many verified copies make a shard durable: the job's redundancy, or
// every node when there are fewer.
func (b *clusterBackend) want() int { return min(b.redundancy, len(b.nodes)) }

// replicate starts a copy of every shard that has fewer copies than wanted, to the
// next nodes after its holder in name order. Copies run in the background: the ranks
// never wait for them.
func (b *clusterBackend) replicate(ctx context.Context) {
	names := make([]string, 0, len(b.nodes))
	for n := range b.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	id := b.cj.snapshot().ID
	b.mu.Lock()
	defer b.mu.Unlock()
	for epoch, ranks := range b.holders {
		if b.complete[epoch] || epoch+2 < b.highest {
			continue
		}
		for rank, holders := range ranks {
			var from string
			for h := range holders {
				if _, ok := b.nodes[h]; ok {
					from = h
				}
			}
			// Copies under way count: a large shard takes longer than a poll to
			// copy, and each poll would otherwise start one more.
			copies := len(holders)
			for _, n := range names {
				if !holders[n] && b.inflight[shardCopy{epoch, rank, n}] {
					copies++
				}
			}
			if from == "" || copies >= b.want() {
				continue
			}
			start := sort.SearchStrings(names, from)
			for k := 1; k < len(names) && copies < b.want(); k++ {
				to := names[(start+k)%len(names)]
				key := shardCopy{epoch, rank, to}
				if holders[to] || b.inflight[key] {
					continue
				}
				b.inflight[key] = true
				go func(to, from string, key shardCopy, epoch uint64, rank int) {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
					defer cancel()
					err := b.peer(to).Fetch(cctx, api.ShardRef{Job: id, Epoch: epoch, Rank: rank}, b.nodes[from].API)
					if err == nil {
						b.addHolder(epoch, rank, to, 0)
					}
					b.mu.Lock()
					delete(b.inflight, key)
					b.mu.Unlock()
				}(to, from, key, epoch, rank)
				break
			}
		}
	}
}

// shardCopy is a copy of rank's shard of epoch on node.
type shardCopy struct {
	epoch uint64
	rank  int
	node  string
}

// markComplete records the epochs whose every rank has enough copies, and removes
// shards older than the two newest complete epochs from every node.
func (b *clusterBackend) markComplete(ctx context.Context) {
	n := b.j.spec.NRanks
	b.mu.Lock()
	var fresh []uint64
	for epoch, ranks := range b.holders {
		if b.complete[epoch] || len(ranks) < n {
			continue
		}
		ok := true
		for r := 0; r < n && ok; r++ {
			ok = len(ranks[r]) >= b.want()
		}
		if ok {
			b.complete[epoch] = true
			fresh = append(fresh, epoch)
		}
	}
	var all []uint64
	for e := range b.complete {
		all = append(all, e)
	}
	b.mu.Unlock()
	sort.Slice(fresh, func(i, j int) bool { return fresh[i] < fresh[j] })
	if len(fresh) > 0 {
		b.mu.Lock()
		if c := b.created[fresh[len(fresh)-1]]; c != 0 {
			b.ckptCost = max(time.Since(time.Unix(0, int64(c))), 0)
		}
		b.mu.Unlock()
	}
	for _, e := range fresh {
		b.cj.update(func(a *api.Job) { a.Epoch = max(a.Epoch, e) })
		b.j.event(EventEpoch, Event{Epoch: e, Message: fmt.Sprintf("epoch %d complete (%d shards, %d copies each)", e, n, b.want())})
	}
	if len(fresh) > 0 {
		defer b.writeManifest()
	}
	if len(fresh) == 0 || len(all) < 3 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i] > all[j] })
	keep := all[1]
	id := b.cj.snapshot().ID
	for name := range b.nodes {
		go b.peer(name).RemoveShardsBefore(context.Background(), id, keep)
	}
	b.mu.Lock()
	for e := range b.holders {
		if e < keep {
			delete(b.holders, e)
			delete(b.complete, e)
		}
	}
	for e := range b.sums {
		if e < keep {
			delete(b.sums, e)
		}
	}
	b.mu.Unlock()
}

// writeManifest records the complete epochs the job keeps (the two newest) in the
// coordinator's manifest, DATA/coord/JOB/manifest, in the format of shard-format.md.
func (b *clusterBackend) writeManifest() {
	b.mu.Lock()
	var entries []ckpt.ManifestEntry
	for e := range b.complete {
		entries = append(entries, ckpt.ManifestEntry{Epoch: e, NRanks: b.j.spec.NRanks, CreatedNs: b.created[e]})
	}
	b.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Epoch < entries[j].Epoch })
	dir := ckpt.JobDir{Root: b.j.cfg.RunRoot, Job: b.j.spec.ID}
	if err := dir.WriteManifest(entries); err != nil {
		b.j.event(EventEpochBad, Event{Message: fmt.Sprintf("warning: recording the complete epochs: %v", err)})
	}
}

// finish collects the rank states of every node after the launcher exited, and tells
// a lost node (its agent does not answer, or membership says so) from a rank failure.
func (b *clusterBackend) finish(ctx context.Context, local []engine.RankState, failed bool) ([]engine.RankState, *nodeLoss) {
	b.refresh(ctx)
	b.markComplete(ctx)
	if !failed {
		return local, nil
	}
	id := b.cj.snapshot().ID
	var states []engine.RankState
	var silent []string
	for name := range b.nodes {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := b.peer(name).RankStates(cctx, id)
		cancel()
		if err != nil {
			silent = append(silent, name)
			continue
		}
		states = append(states, s...)
	}
	if len(silent) == 0 {
		if loss := b.checkMembers(ctx); loss != nil {
			return states, loss
		}
		return states, nil
	}
	sort.Strings(silent)
	b.mu.Lock()
	for _, n := range silent {
		b.excluded[n] = true
	}
	seen := b.lastSeen[silent[0]]
	b.mu.Unlock()
	reason := "its agent does not answer"
	if !seen.IsZero() {
		reason = noAnswerSince(seen)
	}
	return states, &nodeLoss{nodes: silent, reason: reason, at: time.Now()}
}

// choose picks the newest complete epoch whose every rank's shard survives on a node
// the job may still use.
func (b *clusterBackend) choose(ctx context.Context) (uint64, ckpt.Header, []ckpt.Skipped) {
	b.refresh(ctx)
	without := ""
	if b.pending != nil {
		without = b.pending.without
	}
	live, _ := b.liveNodes(ctx, without)
	b.mu.Lock()
	defer b.mu.Unlock()
	var candidates []uint64
	for e := range b.complete {
		candidates = append(candidates, e)
	}
	epoch, skipped, err := ckpt.Choose(candidates, func(e uint64) error {
		for r := 0; r < b.j.spec.NRanks; r++ {
			found := false
			for h := range b.holders[e][r] {
				_, ok := live[h]
				found = found || ok
			}
			if !found {
				return fmt.Errorf("rank %d's shard is on no live node", r)
			}
		}
		return nil
	})
	if err != nil {
		return 0, ckpt.Header{}, skipped
	}
	return epoch, ckpt.Header{Job: b.j.spec.ID, Epoch: epoch, NRanks: uint32(b.j.spec.NRanks), CreatedNs: b.created[epoch]}, skipped
}

func (b *clusterBackend) epochBase() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runBase = b.highest + 1
	return b.runBase
}

// startReconfig asks rank 0's node for an immediate checkpoint; the relaunch follows
// once that epoch is complete (see poll).
func (b *clusterBackend) startReconfig(ctx context.Context, rc reconfig) {
	b.mu.Lock()
	after := uint64(0)
	for e := range b.complete {
		after = max(after, e)
	}
	b.mu.Unlock()
	rc.after = after
	b.pending = &rc
	id := b.cj.snapshot().ID
	if err := b.peer(b.placement[0]).RequestHold(ctx, id); err != nil {
		b.j.event(EventEpochBad, Event{Message: fmt.Sprintf("warning: checkpoint request to %s failed: %v", b.placement[0], err)})
	}
	b.j.event(EventReconfig, Event{Message: fmt.Sprintf("%s: checkpointing now, then relaunching", rc.reason)})
}

// launchFiles writes the hostfile, rankfile and rsh node map of a launch and
// describes it.
func (s *Service) launchFiles(info api.Job, p place.Placement, live map[string]api.Node, env []string) (engine.Launch, []string, error) {
	runDir := filepath.Join(s.cfg.DataDir, "coord", info.ID)
	cores := map[string]int{}
	rshNodes := map[string]string{}
	for name, n := range live {
		cores[name] = n.Cores
		rshNodes[name] = n.API
		if host, _, err := net.SplitHostPort(n.Addr); err == nil {
			rshNodes[host] = n.API
		}
	}
	hostfile := filepath.Join(runDir, "hostfile")
	rankfile := filepath.Join(runDir, "rankfile")
	nodesFile := filepath.Join(runDir, "rsh-nodes.json")
	nodesJSON, _ := json.Marshal(rshNodes)
	for path, content := range map[string][]byte{
		hostfile: []byte(place.Hostfile(p)), rankfile: []byte(place.Rankfile(p, cores)), nodesFile: nodesJSON,
	} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return engine.Launch{}, nil, err
		}
	}
	wrapper := []string{s.cfg.ShoalBin, "exec-rank"}
	for _, f := range info.Spec.Files {
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
			if f.Name == info.Spec.Argv[0] {
				mode = 0o755
			}
		}
		wrapper = append(wrapper, "--stage", files.Stage{Name: f.Name, Sum: f.SHA256, Mode: mode}.String())
	}
	wrapper = append(wrapper, "--")
	over := false
	for name, n := range p.Counts() {
		over = over || n > cores[name]
	}
	for k, v := range info.Spec.Env {
		env = append(env, k+"="+v)
	}
	l := engine.Launch{
		NRanks: info.Spec.Ranks, Program: info.Spec.Argv[0], Args: info.Spec.Argv[1:],
		Wrapper: wrapper, Hostfile: hostfile, Rankfile: rankfile,
		RshAgent: s.cfg.ShoalBin + " rsh", Oversubscribe: over, Env: env,
	}
	launcherEnv := []string{
		"SHOAL_NODE_DATA=" + s.cfg.DataDir,
		"SHOAL_JOB=" + info.ID,
		"SHOAL_RSH_NODES=" + nodesFile,
		"SHOAL_SECRET_FILE=" + s.cfg.SecretFile,
	}
	return l, launcherEnv, nil
}
