package coord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"shoal/internal/engine"
	"shoal/internal/epochs"
	"shoal/internal/fanout"
	"shoal/internal/job"
	"shoal/internal/mtbf"
	"shoal/internal/node"
	"shoal/internal/place"
	"shoal/internal/shard"
	"shoal/internal/staging"
)

// clusterBackend runs a job over the cluster's nodes. Each rank writes its shards to
// its own node; the backend has every shard copied to as many nodes as the job's
// redundancy asks, counts an epoch complete when every rank's shard is that durable
// (its [epochs.Book] decides), and after a node is lost relaunches from the newest
// complete epoch whose shards all survive, on the nodes that remain.
type clusterBackend struct {
	cfg ClusterConfig
	rec Record // the job's record
	j   *jobRun

	// The current run, changed only by prepare; read by the job's goroutine and by
	// goroutines it waits for.
	placement place.Placement
	nodes     map[string]node.Node // the nodes of the current run, as placed
	// lastPlan is the planner's account of the newest placement. The job's
	// measured traffic is its record's (see trafficAt).
	lastPlan *job.Plan
	// trafficGen counts the changes of traffic; replanWeighed is the count
	// autoReplan last weighed. launchEpoch is the newest complete epoch when
	// the current run was launched: a traffic report of an epoch no newer is an
	// earlier run's.
	trafficGen, replanWeighed int
	launchEpoch               uint64
	// trafficOn is the placement the ranks ran in when they reported traffic.
	trafficOn place.Placement
	// setAside is the live nodes the current run left out for their
	// instruction set, and leftOutNote what the job was told of it.
	setAside    map[string]node.Node
	leftOutNote string

	// mu guards the fields below up to run, and the measures of progress and
	// costs further down: the copies under way and the watch share them.
	mu       sync.Mutex
	book     epochs.Book
	inflight map[epochs.ShardCopy]bool  // replications under way
	encoding map[epochs.ParityCopy]bool // parity rows being computed
	wire     map[uint64]wireBytes       // by epoch not yet complete: what its copies moved
	contacts map[string]contact
	excluded map[string]bool // nodes that stopped answering; not placed on
	// noOverlay are the live nodes the last liveNodes left out because the job
	// runs with --mpi-overlay and their agents carry no overlay.
	noOverlay []string
	// indexes are the latest shard indexes of the nodes, by node, as the watch
	// and refresh got them; changed is set when one changed or a copy was made,
	// and poll has yet to account for it.
	indexes map[string]shard.Index
	// fenced are the indexes a takeover's fence read, each right after its
	// node's revoke, which the first refresh takes instead of asking (job
	// goroutine only).
	fenced  map[string]fencedIndex
	changed bool
	made    epochs.Ledger // copies and rows made that the indexes may not show yet
	run     *runWatch     // the watch of the current run, while there is one
	stopped *runWatch     // a watch stopped whose goroutines may not have ended (settleWatch)
	news    chan struct{} // tells the job's loop that changed was set (see watch)

	// onBook, when set, receives a copy of the book whenever its complete epochs
	// change (one became complete, older ones were pruned), from the job's
	// goroutine, so the job's state store can keep it.
	onBook    func(epochs.Book)
	reconfigs chan reconfig // asked for by the job service (ClusterRun.Reconfigure)
	// placed is the current run's placement for other goroutines (ClusterRun.Uses).
	placedMu sync.Mutex
	placed   place.Placement
	pending  *reconfig // a planned reconfiguration waiting for its checkpoint (job goroutine only)
	// handed is set once the run is held at a checkpoint for another
	// coordinator (see reconfig.handOver): it only waits to be stopped (job
	// goroutine only).
	handed bool
	// doubted is when membership first said a node of the run was not alive,
	// by node, until it is alive again (job goroutine only).
	doubted map[string]time.Time
	// waiting holds the nodes membership declared dead that the run waits for
	// (see Patience), with the start of their silence (job goroutine only).
	waiting map[string]time.Time
	// liveKey names the live nodes the last poll saw (job goroutine only).
	liveKey string
	// staged receives how the staging of the current run's shards ended, while
	// it goes on in the background (job goroutine only; see stage).
	staged <-chan staging.Outcome

	// What a rebalance is weighed with, measured on this job (under mu: the
	// watch notes progress), and what was last weighed (job goroutine only).
	launchAt time.Time // when the current run's placement was made (this node's clock)
	progBase time.Time // the time of the report on rank 0's node before the launch
	// mtbfRecord says what the current run's SHOAL_MTBF rests on (auto interval).
	mtbfRecord  string
	restartCost time.Duration // the last launch: placement to the first progress report
	ckptCost    time.Duration // the newest complete epoch: written to durable
	progFirst   *job.Progress // the current run's first progress report
	progLast    *job.Progress // and its latest
	progSeen    time.Time     // when the latest was first seen (this node's clock)
	autoWeighed string        // the live nodes an automatic rebalance was last weighed for
	// covered is the shard count of the last epoch said to cover fewer ranks
	// than its run (see coverage; job goroutine only).
	covered int
	// corrupt are the copies found corrupt and not yet reported (under mu;
	// see reportCorrupt).
	corrupt []epochs.CorruptCopy
	// copiedTo are the nodes a copy of a shard or a parity row was made to
	// (under mu): they hold something of the job before their index shows it.
	copiedTo map[string]bool
	// received are the indexes the watch received, with when (under mu): the
	// silences of ranks they report are as of then (checkHung).
	received map[string]nodeIndex
	// pinUntil is when the book's Pin lapses (under mu): a copy out of the
	// cluster that never said it ended holds no epoch for ever.
	pinUntil time.Time
	// kept is the epoch kept outside the cluster that the next relaunch
	// restarts from, whose shards its nodes fetch (see kept.go); keptRefused
	// are the kept epochs that could not be, by epoch, and keptUnread is set
	// once the job was told that this node cannot read the store (job
	// goroutine only).
	kept        *keptEpoch
	keptRefused map[uint64]bool
	keptUnread  bool
	// keep copies the job's complete epochs to its durable store, when this
	// node does (see keep.go); set before the job's loop starts.
	keep *keeper
}

// newClusterBackend returns the backend of job rj, whose record is rec. book
// is where its epochs are recorded from: empty for a new job; for a job a new
// coordinator resumes, the book its predecessor kept. The backend keeps a copy.
func newClusterBackend(cfg ClusterConfig, rec Record, rj *jobRun, book epochs.Book) *clusterBackend {
	b := &clusterBackend{
		cfg: cfg, rec: rec, j: rj, book: book.Clone(),
		inflight: map[epochs.ShardCopy]bool{}, encoding: map[epochs.ParityCopy]bool{}, wire: map[uint64]wireBytes{}, contacts: map[string]contact{}, excluded: map[string]bool{},
		indexes: map[string]shard.Index{}, received: map[string]nodeIndex{}, copiedTo: map[string]bool{}, made: epochs.NewLedger(), news: make(chan struct{}, 1), doubted: map[string]time.Time{},
		waiting: map[string]time.Time{}, keptRefused: map[uint64]bool{},
		reconfigs: make(chan reconfig, 4),
	}

	if f := cfg.OnBook; f != nil {
		id := rj.spec.ID
		b.onBook = func(book epochs.Book) { f(id, book) }
	}
	return b
}

// reconfig is a planned relaunch: a node leaving, or a rebalance over new nodes.
type reconfig struct {
	without string        // node to leave out ("" for a rebalance)
	after   uint64        // relaunch once an epoch newer than this is complete (see startReconfig)
	done    chan struct{} // closed once the job runs without the node (or ended)
	reason  string
	// force relaunches a rebalance even when it is estimated not to pay.
	force bool
	// refused, when not nil, receives why a rebalance was not done, before done
	// is closed.
	refused *string
	// sameNodes keeps the relaunch on the nodes of the current run: a move by
	// the job's traffic rearranges its ranks; nodes that joined are the
	// rebalance rule's to weigh (--auto-rebalance).
	sameNodes bool
	// handOver, when not nil, makes the reconfiguration a hand-over to the
	// next coordinator (the job service's HandOver): no relaunch here; once the held
	// checkpoint is complete, where the run stopped is put here before done is
	// closed, and the run waits, its ranks held, to be stopped.
	handOver *job.Handover
}

var _ backend = (*clusterBackend)(nil)

// stageWait bounds how long a rank waits for its shard to be staged
// (SHOAL_STAGE_WAIT): poll ends the run sooner if staging fails, so this only
// matters when the coordinator itself is gone.
const stageWait = 10 * time.Minute

func (b *clusterBackend) peer(name string) Peer { return b.cfg.Peer(b.nodes[name]) }

// sources are the live nodes a restart may take shards from: the current
// run's, and those it left out for their instruction set, which may hold the
// copies of a run on theirs.
func (b *clusterBackend) sources() map[string]node.Node {
	if len(b.setAside) == 0 {
		return b.nodes
	}
	all := maps.Clone(b.setAside)
	maps.Copy(all, b.nodes)
	return all
}

// liveNodes returns the nodes the job may use now. A node excluded for not answering
// or for leaving stays excluded until membership declares it dead or left; if it
// comes back alive after that, it is a node like any other (a join).
func (b *clusterBackend) liveNodes(ctx context.Context, without string) (map[string]node.Node, error) {
	nodes, err := b.cfg.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	b.forgetGone(nodes)
	out := map[string]node.Node{}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noOverlay = nil
	for _, n := range nodes {
		if n.Live() && !b.excluded[n.Name] && n.Name != without {
			// A job over the overlay goes only where the overlay is.
			if b.j.spec.OnOverlay() && n.Overlay == "" {
				b.noOverlay = append(b.noOverlay, n.Name)
				continue
			}
			out[n.Name] = n
		}
	}
	return out, nil
}

func (b *clusterBackend) prepare(ctx context.Context, req launchRequest) (engine.Launch, []string, string, error) {
	info := b.rec.Job()
	restartEpoch, env := req.epoch, req.env
	without := ""
	if b.pending != nil {
		without = b.pending.without
	}
	live, p, why, err := b.placeRanks(ctx, info.Spec, without, restartEpoch)
	if err != nil {
		return engine.Launch{}, nil, "", err
	}
	candidates := b.placeNodes(live)
	if info.Spec.Relocation == "block" && len(b.placement) == len(p) {
		if bp, err := place.Block(b.placement, candidates); err == nil {
			p = bp
		}
	}
	from, to := b.j.ranks, len(p)
	b.mu.Lock()
	b.book.Resize(to)
	// written is the epoch's shards, world the ranks of the run that wrote
	// them: fewer shards when the program gave libshoal a communicator of
	// its first ranks only, whose ranks restore on a run of the same count.
	written, world := b.book.Ranks(restartEpoch), b.book.World(restartEpoch)
	b.mu.Unlock()
	moves := ""
	if from == to {
		moves = place.DescribeMoves(b.placement, p, live)
	} else if from > 0 {
		e := job.Resized(req.cause, from, to, restartEpoch, why)
		b.j.event(e.Type, e)
		b.trafficOn = nil // what the ranks reported was of the old count
	}
	if rc := b.pending; rc != nil {
		b.mu.Lock()
		if rc.without != "" {
			b.excluded[rc.without] = true // until membership shows it gone
		}
		b.mu.Unlock()
		b.recordAvoid()
		b.pending = nil
		defer close(rc.done)
	}
	old := b.nodes
	b.placement, b.nodes = p, live
	// A new job's first run has no earlier run: no node of it holds anything
	// of the job, to fence or to read.
	fresh := old == nil && b.j.resume == nil
	// What rank 0's node reports before the launch is an earlier run's progress.
	var base time.Time
	if !fresh {
		if idx, err := b.peer(p[0]).Shards(ctx, info.ID, "", 0); err == nil && idx.Progress != nil {
			base = idx.Progress.At
		}
	}
	b.mu.Lock()
	b.launchAt, b.progFirst, b.progLast, b.progBase = time.Now(), nil, nil, base
	b.launchEpoch = b.book.Newest()
	b.mu.Unlock()
	byNode := map[string][]int{}
	for r, n := range p {
		byNode[n] = append(byNode[n], r)
	}
	b.placedMu.Lock()
	b.placed = p
	b.placedMu.Unlock()
	plan := b.lastPlan
	b.rec.Update(func(a *job.Job) { a.Placement, a.Plan, a.Ranks = byNode, plan, to })

	// Fence every earlier run wherever it may still have processes: the nodes of the
	// last run, and any node of this one, which may be back from being cut off with a
	// fenced run's ranks still alive. All at once, and all before staging and grants.
	// A new job's first run has none to fence, and costs no round of requests to
	// every node. (A job taken over or resumed is fenced as for a relaunch: a node
	// cut off when the job was taken over may be back with its ranks.)
	var fence sync.WaitGroup
	toFence := maps.Clone(live)
	for name, n := range b.setAside {
		if _, wasIn := old[name]; wasIn {
			toFence[name] = n // alive, of another instruction set
		}
	}
	for name, n := range toFence {
		if _, wasIn := old[name]; wasIn || (!fresh && len(byNode[name]) > 0) {
			fence.Add(1)
			go func(p Peer) {
				defer fence.Done()
				p.Revoke(ctx, info.ID)
			}(b.cfg.Peer(n))
		}
	}
	fence.Wait()
	if r := b.j.resume; r != nil && r.Fetched != nil {
		// Staging sends the files from here: those a takeover began to fetch.
		if err := r.Fetched(ctx); err != nil {
			b.j.event(job.EventStage, job.Event{Message: fmt.Sprintf("warning: %v", err)})
		}
		r.Fetched = nil
	}
	awaited, err := b.stage(ctx, info, byNode, restartEpoch, world != to)
	if err != nil {
		return engine.Launch{}, nil, "", err
	}
	if restartEpoch > 0 && written != to {
		// libshoal hands each new rank its part of what the old ranks saved;
		// on a communicator of as many as wrote the epoch, its own shard.
		env = append(env, fmt.Sprintf("SHOAL_RESTART_NRANKS=%d", written))
	}
	if len(awaited) > 0 {
		// Those ranks wait for their shards: a shard that cannot be staged
		// ends the run first (poll).
		env = append(env, engine.EnvStageWait+"="+stageWait.String(), engine.EnvStageRanks+"="+engine.FormatRanks(awaited))
	}
	if b.j.spec.CheckpointAuto {
		var rec mtbf.Estimate
		if b.cfg.Failures != nil {
			rec = b.cfg.Failures()
		}
		node, why := mtbf.NodeMTBF(time.Duration(b.j.spec.MTBF), rec)
		env = append(env, mtbf.Env(node, len(byNode)))
		b.mtbfRecord = why
	}
	l, launcherEnv, err := staging.LaunchFiles(b.cfg.host(), info, p, live, env)
	if err != nil {
		return engine.Launch{}, nil, "", err
	}
	b.j.progressFile = "" // progress comes with rank 0's node's shard index (watch)
	used := make([]string, 0, len(byNode))
	for n := range byNode {
		used = append(used, n)
	}
	sort.Strings(used)
	where := fmt.Sprintf("on %d nodes (%s)", len(used), p)
	if moves != "" {
		where = fmt.Sprintf("on %s (%s)", strings.Join(used, ", "), moves)
	}
	if from == 0 && why != "" {
		where = fmt.Sprintf("(%s) %s", why, where)
	}
	return l, launcherEnv, where, nil
}

// poll checks for a node of the run whose agent is gone and membership for a
// lost node, and when a node's shard index changed or a copy was made (see
// watch), starts the copies that make shards durable and records newly
// complete epochs. With no news and no change of the live nodes it does
// nothing more: a steady run costs no network call.
func (b *clusterBackend) poll(ctx context.Context) *nodeLoss {
	if b.handed {
		return nil // the next coordinator relaunches from the held epoch
	}
	if loss := b.shardsStaged(); loss != nil {
		return loss
	}
	nodes, err := b.cfg.Nodes(ctx)
	if loss := b.checkRefused(nodes); loss != nil {
		return loss
	}
	if err == nil {
		if loss := b.checkMembers(ctx, nodes); loss != nil {
			return loss
		}
	}
	news := b.takeNews()
	if news {
		b.followCopied()
		b.indexCached()
		b.reportCorrupt()
		b.replicate(ctx)
		b.markComplete(ctx)
		b.reportProgress()
		b.reportInterval()
	}
	joined := false
	if key := node.LiveKey(nodes); err == nil && key != b.liveKey {
		b.liveKey, joined = key, true
	}
	if b.pending == nil { // one move at a time: the next waits for this one's relaunch
		select {
		case rc := <-b.reconfigs:
			if why := b.vetRebalance(ctx, rc); why != "" {
				b.j.event(job.EventRebalance, job.Event{Message: "not rebalancing: " + why})
				if rc.refused != nil {
					*rc.refused = why
				}
				close(rc.done)
			} else {
				b.startReconfig(ctx, rc)
			}
		default:
			if news || joined { // what it weighs, progress and live nodes, changed
				b.autoRebalance(ctx)
			}
			if news { // the traffic reports come with the nodes' indexes
				b.learnTraffic()
			}
			if b.pending == nil {
				b.autoReplan(ctx)
			}
		}
	}
	if loss := b.checkHung(time.Now()); loss != nil {
		return loss
	}
	return b.checkHeld()
}

// checkHeld returns, once the checkpoint the pending reconfiguration asked for
// is complete, the planned loss that ends the run for its relaunch. A
// hand-over is not relaunched here: where the run stopped is said (its
// reconfig's handOver, then done closed), and the run waits, its ranks held,
// for the service to stop it.
func (b *clusterBackend) checkHeld() *nodeLoss {
	rc := b.pending
	if rc == nil {
		return nil
	}
	at, ok := b.held(rc)
	switch {
	case !ok:
		return nil
	case rc.handOver != nil:
		b.mu.Lock()
		*rc.handOver = job.Handover{Epoch: b.book.Newest(), At: at}
		b.mu.Unlock()
		b.handed, b.pending = true, nil
		close(rc.done)
		return nil
	}
	return &nodeLoss{nodes: []string{rc.without}, reason: rc.reason, at: at, planned: true}
}

// held reports whether the checkpoint rc asked for is complete, and when it was
// taken: the ranks hold still after it, so nothing since is lost.
func (b *clusterBackend) held(rc *reconfig) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	taken := b.book.Newest()
	return time.Unix(0, int64(b.book.CreatedNs(taken))), taken > rc.after
}

// finish collects the rank states of every node after the launcher exited, and tells
// a lost node (its agent does not answer, or membership says so) from a rank failure.
func (b *clusterBackend) finish(ctx context.Context, local []engine.RankState, failed bool, noticed *engine.Notice) ([]engine.RankState, *nodeLoss) {
	ended := time.Now().UnixNano()
	if failed || !b.quiet() {
		b.refresh(ctx)
	}
	b.markComplete(ctx)
	if !failed {
		return local, nil
	}
	id := b.rec.Job().ID
	var states []engine.RankState
	var silent []string
	var mu sync.Mutex
	// Only the nodes that ran ranks can say how one ended: a round over the
	// run's nodes, bounded as every round over nodes is.
	asked := slices.Sorted(maps.Keys(b.placement.Counts()))
	fanout.Each(len(asked), fanout.Limit, func(i int) {
		name := asked[i]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := b.peer(name).RankStates(cctx, id)
		cancel()
		if err != nil {
			b.noAnswer(name, time.Now(), err)
		} else {
			b.answered(name, time.Now())
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			silent = append(silent, name)
			return
		}
		states = append(states, s...)
	})
	states = noticed.Apply(states, ended)
	if len(silent) == 0 {
		if nodes, err := b.cfg.Nodes(ctx); err == nil {
			if loss := b.checkMembers(ctx, nodes); loss != nil {
				return states, loss
			}
		}
		if fault := b.storeFaults(ctx); fault != nil {
			return states, fault
		}
		b.learnLimits(states)
		return states, nil
	}
	sort.Strings(silent)
	b.mu.Lock()
	for _, n := range silent {
		b.excluded[n] = true
	}
	b.mu.Unlock()
	b.recordAvoid()
	reason := "its agent does not answer"
	if since := b.silentSince(silent[0]); !since.IsZero() {
		reason = noAnswerSince(since)
	}
	if b.allRefused(silent) {
		reason = agentGone
	}
	return states, &nodeLoss{nodes: silent, reason: reason, at: time.Now()}
}

// quiet reports whether every node of the run has answered the watch and
// none has shown anything of the job: no shard, parity, progress, traffic or
// interval. Such a run's end needs no last look at every node's index (a
// round of requests to every node): its ranks never used libshoal, or used it
// only in their last moments, and of a run that succeeded those moments hold
// nothing a later run needs.
//
// The nodes looked at are the holders: those the watch followed (a node it
// followed that is not one now showed nothing when last asked).
func (b *clusterBackend) quiet() bool {
	nodes := b.holders()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(nodes) == 0 {
		return false
	}
	for _, name := range nodes {
		idx, ok := b.indexes[name]
		if !ok || len(idx.Shards)+len(idx.Bad)+len(idx.Parity)+len(idx.Traffic) > 0 || idx.Progress != nil || idx.Interval != nil {
			return false
		}
	}
	return true
}

// choose picks the newest complete epoch whose every rank's shard survives on a node
// the job may still use, or the epoch kept outside the cluster when it is newer
// (restoreKept). With no complete epoch the job starts afresh; when none
// survives, it cannot go on (a [*LostEpochError]).
func (b *clusterBackend) choose(ctx context.Context) (restartPoint, error) {
	b.settleWatch()
	if b.nodes == nil {
		// A resumed job: its runs were another coordinator's. Every live node is
		// asked what it holds, and fenced before the relaunch (prepare).
		if live, err := b.liveNodes(ctx, ""); err == nil {
			b.nodes = live
		}
	}
	b.refresh(ctx)
	b.reportCorrupt()
	without := ""
	if b.pending != nil {
		without = b.pending.without
	}
	live, _ := b.liveNodes(ctx, without)
	b.mu.Lock()
	epoch, skipped, err := b.book.Choose(names(live))
	b.mu.Unlock()
	b.kept = b.restoreKept(ctx, epoch)
	if b.kept != nil {
		epoch, err = b.kept.Epoch, nil
		// Only the lost epochs newer than the kept one are passed over.
		skipped = slices.DeleteFunc(skipped, func(s epochs.Skipped) bool { return s.Epoch <= epoch })
	}
	switch {
	case errors.Is(err, epochs.ErrNoEpoch):
		return restartPoint{skipped: skipped}, nil
	case err != nil:
		return restartPoint{skipped: skipped}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	rp := restartPoint{epoch: epoch, skipped: skipped,
		header: shard.Header{Job: b.j.spec.ID, Epoch: epoch, NRanks: uint32(b.book.Ranks(epoch)), CreatedNs: b.book.CreatedNs(epoch)}}
	if b.kept != nil {
		rp.kept = b.kept.Location
	}
	return rp, nil
}

func (b *clusterBackend) epochBase(restart uint64) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.book.StartRun(restart)
}

// names returns the names of nodes, sorted.
func names(nodes map[string]node.Node) []string {
	out := make([]string, 0, len(nodes))
	for n := range nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
