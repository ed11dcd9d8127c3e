package coord

import (
	"context"
	"sync"
	"time"

	"shoal/internal/fanout"
	"shoal/internal/node"
	"shoal/internal/place"
	"shoal/internal/shard"
)

// seedRun gives a backend taking a job over the previous coordinator's run: its
// placement (node → ranks), so that the shards that run wrote are counted and the
// restart line says where its ranks went, and the nodes not to place on until
// membership declares them gone: those the previous run found lost (avoid) and
// the lost coordinator's. Which nodes to ask and to fence, the backend finds from
// the live nodes (choose).
func (b *clusterBackend) seedRun(byNode map[string][]int, avoid []string, lost string) {
	b.mu.Lock()
	for _, n := range avoid {
		b.excluded[n] = true
	}
	if lost != "" {
		b.excluded[lost] = true
	}
	b.mu.Unlock()
	b.recordAvoid()
	n := 0
	for _, ranks := range byNode {
		n += len(ranks)
	}
	p := make(place.Placement, n) // an elastic job's last count, not its spec's
	for name, ranks := range byNode {
		for _, r := range ranks {
			if r < 0 || r >= len(p) {
				return // not this job's placement: start without one
			}
			p[r] = name
		}
	}
	for _, n := range p {
		if n == "" {
			return
		}
	}
	b.placement = p
}

// Fencing is a fence of one job begun by a new coordinator on the nodes live
// when its takeover began ([Fence]), handed to the run in [Resume].Fenced.
type Fencing struct {
	asked map[string]bool // the nodes asked, by name
	done  chan struct{}   // closed once each has answered or timed out
	// cut is set, before done is closed, when ctx ended before every revoke
	// was made: the run fences every live node itself.
	cut bool
	mu  sync.Mutex
	// read holds what each node that answered said it holds of the job, asked
	// right after its revoke: its ranks of the old run are gone by then, so
	// nothing of the job's changes there but copies sent from other nodes,
	// which the run's watch catches as it would after a separate round.
	read map[string]fencedIndex
}

// fencedIndex is a node's index of the job read in a fence's turn, and when.
type fencedIndex struct {
	idx shard.Index
	at  time.Time
}

// Fence begins revoking job id on nodes, fanout.Limit at a time, in the
// background. A new coordinator begins it as its takeover begins, beside the
// job store's barrier and the fetch of the job's files, none of which it
// waits for: a round over every live node is the longest part of a takeover
// on a large cluster, and a revoke needs nothing committed (it is safe to
// repeat, and the job's old run is to be stopped whatever the store holds).
// ctx bounds the requests: the caller ends it when it stops leading, so that
// no revoke of its lands after the next coordinator's grants.
//
// Right after its revoke, in the same turn, each node is asked which shards of
// the job it holds, which the run's first choice of an epoch takes instead of
// a round of its own; then, when not nil, is called for it: what else a
// takeover reads from every node goes over the connection the revoke opened,
// not one of its own.
func Fence(ctx context.Context, nodes []node.Node, peer func(node.Node) Peer, id string, then func(context.Context, node.Node)) *Fencing {
	f := &Fencing{asked: map[string]bool{}, done: make(chan struct{}), read: map[string]fencedIndex{}}
	for _, n := range nodes {
		f.asked[n.Name] = true
	}
	go func() {
		defer close(f.done)
		revokeOn(ctx, nodes, peer, id, func(ctx context.Context, n node.Node) {
			if idx, err := readIndex(ctx, peer(n), id); err == nil {
				f.mu.Lock()
				f.read[n.Name] = fencedIndex{idx: idx, at: time.Now()}
				f.mu.Unlock()
			}
			if then != nil {
				then(ctx, n)
			}
		})
		f.cut = ctx.Err() != nil
	}()
	return f
}

// Done is closed once every node the fence asked has answered or timed out.
func (f *Fencing) Done() <-chan struct{} { return f.done }

// revokeOn revokes job id on every node of nodes, fanout.Limit at a time, each
// request bounded by fenceTimeout, and calls then (when not nil) for each node
// after its revoke.
func revokeOn(ctx context.Context, nodes []node.Node, peer func(node.Node) Peer, id string, then func(context.Context, node.Node)) {
	fanout.Each(len(nodes), fanout.Limit, func(i int) {
		cctx, cancel := context.WithTimeout(ctx, fenceTimeout)
		peer(nodes[i]).Revoke(cctx, id)
		cancel()
		if then != nil && ctx.Err() == nil {
			then(ctx, nodes[i])
		}
	})
}

// fenceTimeout bounds one revoke of a new coordinator's fence.
const fenceTimeout = 5 * time.Second

// fenceAll revokes the job on every live node, in parallel and bounded
// (fanout.Limit at a time): a new coordinator stops the old run's ranks
// before it reads what the nodes hold, so that no rank of the old run writes
// on while the epoch to restart from is chosen. With a fence begun at the
// takeover (early), it waits for that one and asks only the live nodes it did
// not: those that joined since, and the last coordinator when it is alive;
// the indexes that fence read are the first refresh's (b.fenced).
func (b *clusterBackend) fenceAll(ctx context.Context, early *Fencing) {
	var asked map[string]bool
	if early != nil {
		select {
		case <-early.Done():
			if !early.cut {
				asked = early.asked
				b.fenced = early.read
			}
		case <-ctx.Done():
			return
		}
	}
	live, err := b.liveNodes(ctx, "")
	if err != nil {
		return
	}
	var rest []node.Node
	for name, n := range live {
		if !asked[name] {
			rest = append(rest, n)
		}
	}
	revokeOn(ctx, rest, b.cfg.Peer, b.rec.Job().ID, nil)
}
