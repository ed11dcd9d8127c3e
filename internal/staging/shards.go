package staging

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"shoal/internal/api"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// Book is the job's epoch book as the staging of its shards reads and
// changes it: the coordinator's, which others change too. Its methods must be
// safe for concurrent use.
type Book interface {
	// WasCorrupt reports whether the book last knew node's copy of rank's
	// shard of epoch as corrupt.
	WasCorrupt(epoch uint64, rank int, node string) bool
	// FoundCorrupt records that node's copy of rank's shard of epoch failed
	// check as it was read: the book counts it no more.
	FoundCorrupt(epoch uint64, rank int, node, check string)
	// Copied records a verified copy of a shard made on c.Node, fetched from
	// a holder or rebuilt from its parity group: either way a new file that
	// the node's index lists only at its next rescan, so the book keeps it
	// until then (epochs.Ledger).
	Copied(c epochs.ShardCopy)
}

// Run is the run whose shards are staged, as [Shards] sees it.
type Run struct {
	Job string // the job's id
	// Peer returns a client of the agent of node, a node of the run.
	Peer func(node string) Peer
	// Sources are the live nodes shards may be read from, by name, with
	// their API addresses.
	Sources map[string]node.Node
	Book    Book
	// Event records an event of the job; safe for concurrent use.
	Event func(typ string, e job.Event)
}

// Outcome is how the staging of a run's shards ended: the nodes that did not
// answer, the first failure, and the shards copied (not found in place) with
// the bytes that crossed the network for them.
type Outcome struct {
	Down   []string
	Err    error
	Copied []epochs.Replica
	Wire   int64
	// Corrupt are the copies found corrupt as they were read, in words
	// ("rank 1's shard of epoch 2 on n2"): the book counts them no more.
	Corrupt []string
}

// CorruptReason says why a staging stopped when copies the book counted
// turned out corrupt as they were read (o.Corrupt): "rank 1's shard of epoch
// 2 on n2 corrupt when staged". Not a failure of the job, since the book no
// longer counts them, but a relaunch from the newest epoch that is still
// whole. "" when some other error stopped the staging, or none did.
func (o Outcome) CorruptReason() string {
	if o.Err == nil || len(o.Corrupt) == 0 || !errors.Is(o.Err, errkind.Corrupt) {
		return ""
	}
	slices.Sort(o.Corrupt)
	return fmt.Sprintf("%s corrupt when staged", strings.Join(o.Corrupt, ", "))
}

// corruptCheck is the check a corrupt copy failed, from the error of a copy
// refused for it: "checksum mismatch", or "verification".
func corruptCheck(err error) string {
	for _, c := range []string{"checksum mismatch", "bad magic", "truncated"} {
		if strings.Contains(err.Error(), c) {
			return c
		}
	}
	return "verification"
}

// Shards makes the copies and rebuilds that bring the ranks' shards of epoch
// to their nodes, in parallel, and says how that went.
func Shards(ctx context.Context, run Run, epoch uint64, fetches []epochs.Replica, rebuilds []epochs.Rebuild) Outcome {
	var wg sync.WaitGroup
	errs := make(chan error, len(fetches)+len(rebuilds))
	var down downNodes
	var mu sync.Mutex
	var out Outcome
	sources := run.Sources
	for _, f := range fetches {
		wg.Add(1)
		go func(f epochs.Replica, to Peer, from string) {
			defer wg.Done()
			ref := shard.Ref{Job: run.Job, Epoch: f.Epoch, Rank: f.Rank}
			corrupt := run.Book.WasCorrupt(f.Epoch, f.Rank, f.To)
			got, err := to.Fetch(ctx, ref, from)
			if errors.Is(err, errkind.Corrupt) {
				// The holder's copy failed verification as it was read: damaged
				// since its node's index was taken. Counted no more, the run
				// restarts from an epoch whose shards are good.
				run.Book.FoundCorrupt(f.Epoch, f.Rank, f.From, corruptCheck(err))
				mu.Lock()
				out.Corrupt = append(out.Corrupt, fmt.Sprintf("rank %d's shard of epoch %d on %s", f.Rank, f.Epoch, f.From))
				mu.Unlock()
			}
			if err != nil {
				down.note(err, f.To)
				if errors.Is(err, errkind.BadGateway) {
					down.note(errkind.Unreachable, f.From) // the holder did not answer the copy
				}
				errs <- fmt.Errorf("stage rank %d's shard of epoch %d from %s to %s: %w", f.Rank, f.Epoch, f.From, f.To, err)
				return
			}
			// Kept until f.To's index shows it: one taken before the copy
			// still lists a corrupt copy it replaced.
			run.Book.Copied(epochs.ShardCopy{Epoch: f.Epoch, Rank: f.Rank, Node: f.To})
			if corrupt {
				run.Event(job.EventShardCorrupt, job.Event{Epoch: f.Epoch, Rank: job.RankOf(f.Rank), Message: epochs.RepairNote(f.Epoch, f.Rank, f.To, f.From)})
			}
			if got.Copied {
				mu.Lock()
				out.Copied = append(out.Copied, f)
				out.Wire += got.Wire
				mu.Unlock()
			}
		}(f, run.Peer(f.To), sources[f.From].API)
	}
	for _, rb := range rebuilds {
		wg.Add(1)
		go func(rb epochs.Rebuild, to Peer) {
			defer wg.Done()
			ref := shard.Ref{Job: run.Job, Epoch: rb.Epoch, Rank: rb.Rank}
			req := api.RebuildRequest{Group: rb.Group, M: rb.M, Data: Members(rb.Members, sources)}
			for _, r := range rb.Rows {
				req.Parity = append(req.Parity, api.ParitySource{Row: r.Row, From: sources[r.Holder].API})
			}
			if err := to.Rebuild(ctx, ref, req); err != nil {
				down.note(err, rb.To)
				for _, name := range byAPI(errkind.NoAnswerFrom(err), sources) {
					down.note(errkind.Unreachable, name) // a piece's holder that did not answer rb.To
				}
				errs <- fmt.Errorf("rebuild rank %d's shard of epoch %d on %s from its parity group: %w", rb.Rank, rb.Epoch, rb.To, err)
				return
			}
			// Kept until rb.To's index shows it, as a copy fetched is: one
			// taken before still lists the corrupt copy it may have replaced.
			run.Book.Copied(epochs.ShardCopy{Epoch: rb.Epoch, Rank: rb.Rank, Node: rb.To})
		}(rb, run.Peer(rb.To))
	}
	wg.Wait()
	close(errs)
	out.Down, out.Err = down.list(), <-errs
	sort.Slice(out.Copied, func(i, j int) bool { return out.Copied[i].Rank < out.Copied[j].Rank })
	if out.Err == nil && len(rebuilds) > 0 {
		ranks := make([]string, len(rebuilds))
		for i, rb := range rebuilds {
			ranks[i] = fmt.Sprintf("%d on %s", rb.Rank, rb.To)
		}
		run.Event(job.EventStage, job.Event{Message: fmt.Sprintf("rebuilt from parity the shards of epoch %d no live node held: rank %s", epoch, strings.Join(ranks, ", rank "))})
	}
	return out
}

// byAPI names the nodes of nodes at the API addresses addrs; an address of
// none of them is left out.
func byAPI(addrs []string, nodes map[string]node.Node) []string {
	var out []string
	for name, n := range nodes {
		if slices.Contains(addrs, n.API) {
			out = append(out, name)
		}
	}
	return out
}

// Members names the holders of a group's shards by their API addresses, as
// nodes has them; a member whose holder is not one of nodes has none.
func Members(ms []epochs.GroupMember, nodes map[string]node.Node) []api.Member {
	out := make([]api.Member, len(ms))
	for i, m := range ms {
		out[i] = api.Member{Rank: m.Rank, Bytes: m.Bytes, Sum: m.Sum}
		if n, ok := nodes[m.Holder]; ok && m.Holder != "" {
			out[i].From = n.API
		}
	}
	return out
}

// Sources returns the copies that bring each rank's shard of epoch (0: none)
// to the node it will run on (byNode), from nodes of run, and the shards no
// node of run holds to rebuild there from their parity groups. A node
// believed to hold the shard fetches it all the same when another node has it:
// its copy may have been damaged since, and a node holding a good copy answers
// at once without copying. The ranks past the epoch's shards, outside the
// communicator the program gave libshoal, get none: they never read one. The
// caller keeps others from changing book meanwhile.
func Sources(book *epochs.Book, byNode map[string][]int, epoch uint64, run []string) ([]epochs.Replica, []epochs.Rebuild, error) {
	if epoch == 0 {
		return nil, nil, nil
	}
	shards := book.Ranks(epoch)
	var out []epochs.Replica
	var rebuilds []epochs.Rebuild
	for name, ranks := range byNode {
		for _, r := range ranks {
			if r >= shards {
				continue
			}
			from, have := book.Source(epoch, r, name, run)
			if from != "" {
				out = append(out, epochs.Replica{Epoch: epoch, Rank: r, From: from, To: name})
				continue
			}
			if have {
				continue
			}
			rb, ok := book.RebuildFor(epoch, r, name, run)
			if !ok {
				return nil, nil, fmt.Errorf("no live node holds rank %d's shard of epoch %d, nor enough of its parity group to rebuild it", r, epoch)
			}
			rebuilds = append(rebuilds, rb)
		}
	}
	sort.Slice(rebuilds, func(i, j int) bool { return rebuilds[i].Rank < rebuilds[j].Rank })
	return out, rebuilds, nil
}

// ResizeSources returns the copies and rebuilds that put every shard of
// epoch, written by its own count of ranks, on a node of the new run that
// runs ranks (byNode): libshoal's ranks read the old shards their nodes hold
// and send each new rank its part. A shard stays where a node of the run
// holds it: on the node of the new rank whose part starts where the old
// rank's does, if that one holds it, else on the first holder by name; a
// shard no node of the run holds is copied there from a live holder, or
// rebuilt from its parity group. As for a restart on the same count, a
// holder is asked to fetch the shard all the same when another holds it: its
// copy may have been damaged since, and a good copy answers at once. The
// caller keeps others from changing book meanwhile. Epoch 0 has none.
func ResizeSources(book *epochs.Book, byNode map[string][]int, epoch uint64, live []string) ([]epochs.Replica, []epochs.Rebuild, error) {
	if epoch == 0 {
		return nil, nil, nil
	}
	old := book.Ranks(epoch)
	m := 0
	for _, ranks := range byNode {
		m += len(ranks)
	}
	nodeOf := make([]string, m)
	for name, ranks := range byNode {
		for _, r := range ranks {
			nodeOf[r] = name
		}
	}
	var out []epochs.Replica
	var rebuilds []epochs.Rebuild
	for r := range old {
		to := nodeOf[r*m/old]
		holders := book.Holders(epoch, r)
		if !slices.Contains(holders, to) {
			for _, h := range holders {
				if len(byNode[h]) > 0 {
					to = h
					break
				}
			}
		}
		from, have := book.Source(epoch, r, to, live)
		switch {
		case from != "":
			out = append(out, epochs.Replica{Epoch: epoch, Rank: r, From: from, To: to})
		case have:
		default:
			rb, ok := book.RebuildFor(epoch, r, to, live)
			if !ok {
				return nil, nil, fmt.Errorf("no live node holds rank %d's shard of epoch %d, nor enough of its parity group to rebuild it", r, epoch)
			}
			rebuilds = append(rebuilds, rb)
		}
	}
	sort.Slice(rebuilds, func(i, j int) bool { return rebuilds[i].Rank < rebuilds[j].Rank })
	return out, rebuilds, nil
}

// DescribeResize says what was brought where for a restart on another count
// than epoch's nranks, rebuilt of them from parity: "epoch 5's 7 shards are
// on the resized run's nodes: 2 copied there (rank 4 → n1, rank 5 → n2; 25.2
// MB), 5 in place".
func (o Outcome) DescribeResize(epoch uint64, nranks, rebuilt int) string {
	moved := make([]string, len(o.Copied))
	for i, f := range o.Copied {
		moved[i] = fmt.Sprintf("rank %d → %s", f.Rank, f.To)
	}
	msg := fmt.Sprintf("epoch %d's %d shards are on the resized run's nodes", epoch, nranks)
	if len(moved) > 0 {
		msg += fmt.Sprintf(": %d copied there (%s; %.1f MB)", len(moved), strings.Join(moved, ", "), float64(o.Wire)/1e6)
	}
	if rebuilt > 0 {
		msg += fmt.Sprintf(", %d rebuilt from parity", rebuilt)
	}
	if in := nranks - len(moved) - rebuilt; in > 0 {
		msg += fmt.Sprintf(", %d in place", in)
	}
	return msg
}
