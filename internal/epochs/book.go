// Package epochs keeps what a job's coordinator knows of the job's checkpoint
// epochs ([Book]): which node holds which shard and parity row, which checksum
// each rank's own node wrote, which epochs are complete (every shard durable
// with the job's redundancy), which to restart from, what to copy or encode
// next, what to prune, and the copies made that the nodes' indexes may not
// show yet ([Ledger]). It is pure: the coordinator feeds it the nodes' indexes
// and acts on its answers.
package epochs

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"shoal/internal/job"
	"shoal/internal/shard"
)

// ErrLost means a job had complete epochs but none survives: for each, some
// rank's shard was only on nodes that are gone. [*LostError] says which.
var ErrLost = errors.New("epochs: epoch lost")

// LostError names the newest complete epoch of a job that is lost, the ranks
// whose shards are gone, and the nodes that held them.
type LostError struct {
	Epoch uint64
	Ranks []int    // the ranks with no good copy on a live node, ascending
	Nodes []string // the nodes that held those ranks' copies, by name
	// Corrupt are the live nodes whose copies of those ranks' shards are
	// there but failed verification, by name.
	Corrupt []string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("epoch %d lost: %s", e.Epoch, e.detail())
}

// detail says which ranks' shards are gone and where they were.
func (e *LostError) detail() string {
	ranks := make([]string, len(e.Ranks))
	for i, r := range e.Ranks {
		ranks[i] = strconv.Itoa(r)
	}
	noun := "ranks"
	if len(e.Ranks) == 1 {
		noun = "rank"
	}
	which := noun + " " + strings.Join(ranks, ", ")
	corrupt := strings.Join(e.Corrupt, ", ")
	switch {
	case len(e.Nodes) == 0 && len(e.Corrupt) == 0:
		return fmt.Sprintf("shards of %s are on no node", which)
	case len(e.Nodes) == 0:
		return fmt.Sprintf("shards of %s are corrupt on %s", which, corrupt)
	case len(e.Corrupt) == 0:
		return fmt.Sprintf("shards of %s were only on %s", which, strings.Join(e.Nodes, ", "))
	}
	return fmt.Sprintf("shards of %s were only on %s, and are corrupt on %s", which, strings.Join(e.Nodes, ", "), corrupt)
}

func (e *LostError) Unwrap() error { return ErrLost }

// Book is what a job's coordinator knows of the job's checkpoint epochs:
// which nodes hold a verified copy of each rank's shard, which epochs are complete
// (every rank's shard durable with the job's redundancy), and which to restart
// from when nodes are lost. It is plain data, decides without I/O or a clock, and
// is JSON-serialisable, so a coordinator taking over a job can start from its
// predecessor's book. It is not safe for concurrent use.
//
// The book trusts a copy only when its checksum equals that of the shard the
// rank's own node wrote in the run that took the epoch: a node that was cut off
// and comes back may hold shards its fenced ranks wrote under numbers a later run
// has reused, and those must never be counted.
type Book struct {
	// NRanks is the rank count of the current run, and of the epochs it
	// writes. An elastic job's runs differ in count (see [Book.Resize]):
	// each epoch keeps its own, the length of its Shards.
	NRanks int `json:"nranks"`
	// Redundancy is how many verified copies, on as many nodes, make a shard
	// durable; a run on fewer nodes wants one copy per node (see [Book.Want]).
	Redundancy int `json:"redundancy"`
	// Parity, when set, protects the shards with Reed–Solomon parity rather
	// than copies (parity.go); Redundancy is then M+1, the copies a run
	// on too few nodes for parity keeps instead.
	Parity *ParitySpec       `json:"parity,omitempty"`
	Epochs map[uint64]*Entry `json:"epochs"`
	// Highest is the highest epoch number any node was seen holding: a new run
	// writes above it, so no number is ever reused.
	Highest uint64 `json:"highest"`
	// RunBase is the first epoch the current run may write.
	RunBase uint64 `json:"run_base"`
	// Floor is the oldest epoch pruning kept: older ones are gone for good, and
	// an index that still lists one (its node has yet to delete it) must not
	// bring it back to be counted complete a second time.
	Floor uint64 `json:"floor,omitempty"`
	// Pin is an epoch being copied out of the cluster (the durable tier's
	// upload): pruning keeps it, and every newer one, until it is unpinned
	// (0), so that a copy slower than two checkpoint intervals is not cut
	// short by its epoch's removal. Whoever sets it bounds how long it holds.
	Pin uint64 `json:"pin,omitempty"`
}

// Entry is what the book knows of one epoch.
type Entry struct {
	CreatedNs uint64 `json:"created_ns,omitempty"` // when the checkpoint was taken
	Complete  bool   `json:"complete,omitempty"`
	// Shards is by rank, as long as the communicator libshoal was given in
	// the run that wrote the epoch: that run's rank count, or fewer when the
	// program gave libshoal a communicator of its first ranks only (it parks
	// the others, as NAS MG does), which the shards' headers say.
	Shards []ShardEntry `json:"shards"`
	// World is the rank count of the run that wrote the epoch when it is more
	// than len(Shards); 0 when they are equal. The ranks from len(Shards) on
	// have no shard, and a restart gives them none.
	World int `json:"world,omitempty"`
	// PerRank is set when a shard of the epoch holds a plain per-rank
	// region (libshoal's shoal_protect): the epoch restores on its own rank
	// count only. Without, every region is distributed or replicated and a
	// run of any count restores from it.
	PerRank bool `json:"per_rank,omitempty"`
	// Groups are the epoch's parity groups (a job with parity, once planned).
	Groups []GroupEntry `json:"groups,omitempty"`
}

// ShardEntry is what the book knows of one rank's shard of an epoch.
type ShardEntry struct {
	// Written is set once the rank's own node reported the shard; Sum is then
	// its checksum, which every counted copy has.
	Written bool   `json:"written,omitempty"`
	Sum     uint64 `json:"sum,omitempty"`
	Size    int64  `json:"size,omitempty"` // bytes, once written
	// Holders are the nodes with a verified copy, by name.
	Holders []string `json:"holders,omitempty"`
	// Corrupt are the nodes whose copy failed verification when they last
	// answered, by name (see [Book.IndexBad]): there, but never counted.
	Corrupt []string `json:"corrupt,omitempty"`
}

// CorruptCopy is a copy of a rank's shard of an epoch that a node holds and
// that failed verification, with what else holds the shard.
type CorruptCopy struct {
	Epoch uint64
	Rank  int
	Node  string
	Error string // the failed check (shard.Bad.Error): "checksum mismatch"
	// Good are the nodes holding a verified copy, by name; none when every
	// copy the book knows of is gone or corrupt.
	Good []string
}

// Replica is a copy of a rank's shard of an epoch to make, from a node that holds
// it to one that does not.
type Replica struct {
	Epoch    uint64
	Rank     int
	From, To string
}

// NewBook returns the empty book of a job of nranks ranks whose shards are
// kept with redundancy copies.
func NewBook(nranks, redundancy int) Book {
	return Book{NRanks: nranks, Redundancy: redundancy, Epochs: map[uint64]*Entry{}}
}

// DefaultRedundancy is how many copies of each shard a job keeps when its
// spec names none (job.Spec.Redundancy 0).
const DefaultRedundancy = 2

// BookOf returns the empty book of a job of spec: its shards kept as
// spec.Redundancy copies ([DefaultRedundancy] when 0), or, under Reed–Solomon
// parity rs:K+M, protected by M parity rows, with M+1 copies where a run has
// too few nodes for parity (see [Book.ParityOn]): a run that keeps copies
// instead survives the same M nodes lost at once.
func BookOf(spec job.Spec) Book {
	red := spec.Redundancy
	if red == 0 {
		red = DefaultRedundancy
	}
	if p := spec.Parity; p != nil {
		red = p.M + 1
	}
	b := NewBook(spec.Ranks, red)
	if p := spec.Parity; p != nil {
		b.Parity = &ParitySpec{K: p.K, M: p.M}
	}
	return b
}

// Clone returns a deep copy of b.
func (b *Book) Clone() Book {
	c := *b
	c.Epochs = make(map[uint64]*Entry, len(b.Epochs))
	for e, ent := range b.Epochs {
		ce := *ent
		ce.Shards = make([]ShardEntry, len(ent.Shards))
		for r, s := range ent.Shards {
			s.Holders, s.Corrupt = slices.Clone(s.Holders), slices.Clone(s.Corrupt)
			ce.Shards[r] = s
		}
		ce.Groups = cloneGroups(ent.Groups)
		c.Epochs[e] = &ce
	}
	return c
}

// entry returns epoch's entry, created if missing.
func (b *Book) entry(epoch uint64) *Entry {
	if b.Epochs == nil {
		b.Epochs = map[uint64]*Entry{}
	}
	e := b.Epochs[epoch]
	if e == nil {
		e = &Entry{Shards: make([]ShardEntry, b.NRanks)}
		b.Epochs[epoch] = e
	}
	return e
}

// written returns the entry of an epoch of the current run whose shards say
// they are of n ranks (at most the run's count), created or reshaped to n
// while none of its shards is written; nil when its written shards say
// another count.
func (b *Book) written(epoch uint64, n int) *Entry {
	e := b.entry(epoch)
	if len(e.Shards) == n {
		return e
	}
	if slices.ContainsFunc(e.Shards, func(s ShardEntry) bool { return s.Written }) {
		return nil
	}
	e.Shards, e.World = make([]ShardEntry, n), 0
	if n < b.NRanks {
		e.World = b.NRanks
	}
	return e
}

// shard returns rank's shard of epoch, or nil when the book has none.
func (b *Book) shard(epoch uint64, rank int) *ShardEntry {
	e := b.Epochs[epoch]
	if e == nil || rank < 0 || rank >= len(e.Shards) {
		return nil
	}
	return &e.Shards[rank]
}

// Index takes the shard indexes of the nodes that answered, by node. writers is
// the current run's placement (rank → node): a node's own ranks' shards of the
// run's epochs (RunBase and above) record the checksums copies must match. Each
// index then replaces what the book knew of its node (a copy found corrupt since,
// or removed, is no longer counted), and its copies that match count. The
// writers' reports are taken first, so a copy reported in the same round as its
// original counts at once, whatever order the answers came in.
//
// An epoch has as many shards as its shards' headers say (ShardInfo.NRanks;
// 0, unknown, is the run's count): a program that gives libshoal a
// communicator of its first k ranks writes epochs of k shards, complete
// without the others' (see [Entry.World]). A rank of that communicator is
// taken to be the run's rank of the same number, as it is when the program
// splits off its first ranks in order.
func (b *Book) Index(indexes map[string][]shard.Info, writers []string) {
	for node, shards := range indexes {
		for _, s := range shards {
			b.Highest = max(b.Highest, s.Epoch)
			n := s.NRanks
			if n == 0 {
				n = b.NRanks
			}
			if s.Epoch < b.RunBase || s.Epoch < b.Floor || n > b.NRanks || s.Rank < 0 || s.Rank >= n || s.Rank >= len(writers) || writers[s.Rank] != node {
				continue
			}
			e := b.written(s.Epoch, n)
			if e == nil {
				continue
			}
			if sh := &e.Shards[s.Rank]; !sh.Written {
				sh.Written, sh.Sum, sh.Size = true, s.Checksum, s.Size
				e.PerRank = e.PerRank || len(s.PerRank) > 0
			}
		}
	}
	for _, e := range b.Epochs {
		for r := range e.Shards {
			e.Shards[r].Holders = slices.DeleteFunc(e.Shards[r].Holders, func(n string) bool {
				_, answered := indexes[n]
				return answered
			})
		}
	}
	for node, shards := range indexes {
		for _, s := range shards {
			sh := b.shard(s.Epoch, s.Rank)
			if sh == nil || !sh.Written || sh.Sum != s.Checksum {
				continue
			}
			sh.Holders = addName(sh.Holders, node)
			if s.CreatedNs != 0 {
				b.Epochs[s.Epoch].CreatedNs = s.CreatedNs
			}
		}
	}
}

// IndexBad takes the corrupt copies the nodes that answered list in their
// indexes (shard.Index.Bad), by node, after [Book.Index] took their good
// ones and the copies made since were added: each list replaces what the book
// knew of its node's corrupt copies, but for a node the book counts a good
// copy on (made after the index was taken, over the corrupt one). It returns
// the copies of the book's epochs found corrupt that were not before, by
// epoch, rank and node.
func (b *Book) IndexBad(bad map[string][]shard.Bad) []CorruptCopy {
	was := map[ShardCopy]bool{}
	for epoch, e := range b.Epochs {
		for r := range e.Shards {
			sh := &e.Shards[r]
			sh.Corrupt = slices.DeleteFunc(sh.Corrupt, func(n string) bool {
				_, answered := bad[n]
				if answered {
					was[ShardCopy{Epoch: epoch, Rank: r, Node: n}] = true
				}
				return answered
			})
		}
	}
	var fresh []CorruptCopy
	for node, list := range bad {
		for _, s := range list {
			sh := b.shard(s.Epoch, s.Rank)
			if sh == nil || slices.Contains(sh.Holders, node) {
				continue
			}
			sh.Corrupt = addName(sh.Corrupt, node)
			if !was[ShardCopy{Epoch: s.Epoch, Rank: s.Rank, Node: node}] {
				c := CorruptCopy{Epoch: s.Epoch, Rank: s.Rank, Node: node, Error: s.Error}
				if len(sh.Holders) > 0 {
					c.Good = slices.Clone(sh.Holders)
				}
				fresh = append(fresh, c)
			}
		}
	}
	sort.Slice(fresh, func(i, j int) bool {
		a, c := fresh[i], fresh[j]
		if a.Epoch != c.Epoch {
			return a.Epoch < c.Epoch
		}
		if a.Rank != c.Rank {
			return a.Rank < c.Rank
		}
		return a.Node < c.Node
	})
	return fresh
}

// FoundCorrupt records that node's copy of rank's shard of epoch, counted so
// far, failed verification when it was read (a copy from it refused): it is
// counted no more, and listed corrupt, as [Book.IndexBad] would once node's
// index says so. It returns the copy, with the good ones left, and whether it
// was news: false when node held no counted copy.
func (b *Book) FoundCorrupt(epoch uint64, rank int, node, why string) (CorruptCopy, bool) {
	sh := b.shard(epoch, rank)
	if sh == nil || !slices.Contains(sh.Holders, node) {
		return CorruptCopy{}, false
	}
	sh.Holders = slices.DeleteFunc(sh.Holders, func(n string) bool { return n == node })
	sh.Corrupt = addName(sh.Corrupt, node)
	c := CorruptCopy{Epoch: epoch, Rank: rank, Node: node, Error: why}
	if len(sh.Holders) > 0 {
		c.Good = slices.Clone(sh.Holders)
	}
	return c, true
}

// WasCorrupt reports whether node's copy of rank's shard of epoch failed
// verification when node last answered.
func (b *Book) WasCorrupt(epoch uint64, rank int, node string) bool {
	sh := b.shard(epoch, rank)
	return sh != nil && slices.Contains(sh.Corrupt, node)
}

// AddCopy records that node now holds a verified copy of rank's shard of epoch,
// made from one the book counts.
func (b *Book) AddCopy(epoch uint64, rank int, node string) {
	b.Highest = max(b.Highest, epoch)
	if e := b.entry(epoch); rank >= 0 && rank < len(e.Shards) {
		sh := &e.Shards[rank]
		sh.Holders = addName(sh.Holders, node)
		sh.Corrupt = slices.DeleteFunc(sh.Corrupt, func(n string) bool { return n == node })
	}
}

// Want is how many copies make a shard durable in a run on nodes nodes: the
// redundancy, or one on every node when there are fewer, and at least one;
// one when parity protects the run's epochs.
func (b *Book) Want(nodes int) int {
	if b.ParityOn(nodes) {
		return 1
	}
	return max(min(b.Redundancy, nodes), 1)
}

// MarkComplete records as complete the epochs whose every rank's shard has the
// copies a run on nodes nodes wants (with parity: one copy, and every row of
// every group held), and returns them, oldest first.
func (b *Book) MarkComplete(nodes int) []uint64 {
	want := b.Want(nodes)
	var fresh []uint64
	for epoch, e := range b.Epochs {
		if e.Complete || len(e.Shards) == 0 {
			continue
		}
		if b.ParityOn(nodes) {
			if e.paritySafe() {
				e.Complete = true
				fresh = append(fresh, epoch)
			}
			continue
		}
		ok := true
		for r := 0; r < len(e.Shards) && ok; r++ {
			ok = len(e.Shards[r].Holders) >= want
		}
		if ok {
			e.Complete = true
			fresh = append(fresh, epoch)
		}
	}
	slices.Sort(fresh)
	return fresh
}

// Complete returns the complete epochs, oldest first.
func (b *Book) Complete() []uint64 {
	var out []uint64
	for epoch, e := range b.Epochs {
		if e.Complete {
			out = append(out, epoch)
		}
	}
	slices.Sort(out)
	return out
}

// Newest returns the newest complete epoch, 0 when there is none.
func (b *Book) Newest() uint64 {
	c := b.Complete()
	if len(c) == 0 {
		return 0
	}
	return c[len(c)-1]
}

// CreatedNs returns when epoch's checkpoint was taken, 0 when unknown.
func (b *Book) CreatedNs(epoch uint64) uint64 {
	if e := b.Epochs[epoch]; e != nil {
		return e.CreatedNs
	}
	return 0
}

// Holders returns the nodes holding a counted copy of rank's shard of epoch, by name.
func (b *Book) Holders(epoch uint64, rank int) []string {
	if sh := b.shard(epoch, rank); sh != nil {
		return slices.Clone(sh.Holders)
	}
	return nil
}

// Prune forgets every epoch older than the oldest one kept (see
// [Book.KeepFrom]), once a complete epoch is older than that. It returns
// the oldest epoch kept; the caller removes the older shards from the nodes.
func (b *Book) Prune() (keep uint64, pruned bool) {
	c := b.Complete()
	keep, ok := b.kept(c)
	if !ok || keep <= c[0] {
		return 0, false
	}
	b.Floor = max(b.Floor, keep)
	for epoch := range b.Epochs {
		if epoch < keep {
			delete(b.Epochs, epoch)
		}
	}
	return keep, true
}

// KeepFrom is the oldest epoch a restart of the job may still use: the older
// of its two newest complete epochs (those [Book.Prune] keeps), or Floor
// when that is newer. Where copies alternate between two partners (see stride)
// and the two newest complete epochs are both odd or both even, because an
// epoch completed before the one below it, the newest complete epoch of the
// other kind is kept with them until the one between completes: two epochs of
// one kind have their copies on the same partners, and two nodes lost at once
// could take both. Every older epoch is garbage on every node, also on nodes
// no longer in the job, which the agent's retention removes. 0: none is.
func (b *Book) KeepFrom() uint64 {
	keep := b.Floor
	if k, ok := b.kept(b.Complete()); ok {
		keep = max(keep, k)
	}
	return keep
}

// kept returns the oldest of the complete epochs c (oldest first) that a
// restart may use (see KeepFrom); false when c has fewer than two.
func (b *Book) kept(c []uint64) (uint64, bool) {
	if len(c) < 2 {
		return 0, false
	}
	newest, keep := c[len(c)-1], c[len(c)-2]
	if b.alternates() && keep%2 == newest%2 {
		for i := len(c) - 3; i >= 0; i-- {
			if c[i]%2 != newest%2 {
				keep = c[i]
				break
			}
		}
	}
	if b.Pin != 0 && b.Pin >= b.Floor && b.Pin < keep {
		keep = b.Pin
	}
	return keep, true
}

// StartRun starts a new run, from epoch restart (0: afresh), whose epochs are
// numbered above every number seen, and returns the first. The epochs between
// restart and the new run's are forgotten: the stopped run's later epochs, which
// the new run does not continue from, must not be counted complete, nor copied,
// nor let pruning remove the epoch the new run restores.
func (b *Book) StartRun(restart uint64) uint64 {
	b.RunBase = b.Highest + 1
	for epoch := range b.Epochs {
		if epoch > restart && epoch < b.RunBase {
			delete(b.Epochs, epoch)
		}
	}
	return b.RunBase
}

// Choose picks the epoch to restart from: the newest complete one whose every
// rank's shard has a copy on one of the live nodes, or can be rebuilt from its
// parity group's pieces on them. It names the newer complete
// epochs passed over and why. With no complete epoch it returns [ckpt.ErrNoEpoch]
// (a fresh start); when none survives, a [*LostError] for the newest.
func (b *Book) Choose(live []string) (uint64, []Skipped, error) {
	alive := map[string]bool{}
	for _, n := range live {
		alive[n] = true
	}
	complete := b.Complete()
	var skipped []Skipped
	var lost *LostError
	for i := len(complete) - 1; i >= 0; i-- {
		epoch := complete[i]
		gone := &LostError{Epoch: epoch}
		var nodes []string
		for r, sh := range b.Epochs[epoch].Shards {
			if !slices.ContainsFunc(sh.Holders, func(n string) bool { return alive[n] }) {
				if _, ok := b.RebuildFor(epoch, r, "", live); ok {
					continue
				}
				gone.Ranks = append(gone.Ranks, r)
				for _, n := range sh.Holders {
					nodes = addName(nodes, n)
				}
				for _, n := range sh.Corrupt {
					if alive[n] {
						gone.Corrupt = addName(gone.Corrupt, n)
					}
				}
			}
		}
		if len(gone.Ranks) == 0 {
			return epoch, skipped, nil
		}
		gone.Nodes = nodes
		if lost == nil {
			lost = gone
		}
		skipped = append(skipped, Skipped{Epoch: epoch, Err: errors.New(gone.detail())})
	}
	if lost == nil {
		return 0, nil, ErrNoEpoch
	}
	return 0, skipped, lost
}

// Source returns a node of nodes, other than to, from which to copy rank's shard
// of epoch to node to (the first by name; "" when none), and whether to holds a
// copy already.
func (b *Book) Source(epoch uint64, rank int, to string, nodes []string) (from string, have bool) {
	holders := b.Holders(epoch, rank)
	have = slices.Contains(holders, to)
	for _, h := range holders {
		if h != to && slices.Contains(nodes, h) {
			return h, have
		}
	}
	return "", have
}

// Replicas returns the copies to start so that the shards of the epochs not yet
// complete reach the copies a run on nodes wants: for each shard short of copies,
// one copy from its first holder among nodes (by name) to the node one or two
// places after that holder in name order (see stride), or, when that one holds
// it or is getting it, to the first after it, going round, that does neither.
// busy says whether a copy to a node is under way; those count as copies.
// Epochs more than two behind the highest seen are left alone: newer ones will
// complete first.
func (b *Book) Replicas(nodes []string, busy func(epoch uint64, rank int, node string) bool) []Replica {
	names := slices.Clone(nodes)
	sort.Strings(names)
	want := b.Want(len(names))
	var epochs []uint64
	for epoch, e := range b.Epochs {
		if !e.Complete && epoch+2 >= b.Highest {
			epochs = append(epochs, epoch)
		}
	}
	slices.Sort(epochs)
	var out []Replica
	for _, epoch := range epochs {
		for rank, sh := range b.Epochs[epoch].Shards {
			from := ""
			for _, h := range sh.Holders {
				if slices.Contains(names, h) {
					from = h
					break
				}
			}
			copies := len(sh.Holders)
			for _, n := range names {
				if !slices.Contains(sh.Holders, n) && busy(epoch, rank, n) {
					copies++
				}
			}
			if from == "" || copies >= want {
				continue
			}
			start, _ := slices.BinarySearch(names, from)
			skip := b.stride(epoch, len(names)) - 1
			for k := range len(names) - 1 {
				to := names[(start+1+(skip+k)%(len(names)-1))%len(names)]
				if slices.Contains(sh.Holders, to) || busy(epoch, rank, to) {
					continue
				}
				out = append(out, Replica{Epoch: epoch, Rank: rank, From: from, To: to})
				break
			}
		}
	}
	return out
}

// stride is how many nodes on from a shard's holder, in name order, the copy of
// epoch goes in a run on nodes nodes: one, except for the odd epochs of a run on
// four nodes or more whose shards are kept as two copies, which go two on. Two
// nodes lost at once take both copies of one of an epoch's shards only when one
// is the other's stride places on, and on four nodes or more no two nodes are
// both one and two places apart, either way round: of the complete epochs a
// job keeps, which include an odd and an even one (see [Book.KeepFrom]),
// one is whole, and the job goes back an interval or two instead of losing its
// state. With one stride for all, two neighbours take both epochs of the first
// one's ranks. On three nodes, two lost leave one, which holds a whole epoch
// neither way.
func (b *Book) stride(epoch uint64, nodes int) int {
	if b.alternates() && nodes >= 4 && epoch%2 == 1 {
		return 2
	}
	return 1
}

// alternates reports whether the copies of odd and even epochs go to
// different partners (on four nodes or more: see stride), which what a job
// keeps follows (see kept).
func (b *Book) alternates() bool { return b.Redundancy == 2 }

// addName adds name to the sorted list names, once.
func addName(names []string, name string) []string {
	i, found := slices.BinarySearch(names, name)
	if found {
		return names
	}
	return slices.Insert(names, i, name)
}

// Resume records in b, an empty book, epoch as complete from the shards the nodes
// hold by their indexes: a job that begins from an epoch kept outside the cluster
// (job.Spec.ResumeEpoch), whose shards the submitter put into the nodes' stores.
// The epoch's rank count is its shards' (they must agree); each rank's shard must
// be held by at least one node, every copy alike; the copies count as they are,
// however many. It fails, naming the first rank missing, when the nodes do not
// hold the whole epoch. Whether the job may run on the epoch's count is the
// caller's to check ([Book.Ranks]).
func (b *Book) Resume(epoch uint64, indexes map[string][]shard.Info) error {
	nranks := 0
	for node, shards := range indexes {
		for _, s := range shards {
			b.Highest = max(b.Highest, s.Epoch)
			if s.Epoch != epoch {
				continue
			}
			if nranks == 0 {
				nranks = s.NRanks
			}
			if s.NRanks != nranks {
				return fmt.Errorf("epoch %d: node %s holds shards of %d ranks and of %d", epoch, node, nranks, s.NRanks)
			}
		}
	}
	if nranks < 1 {
		return fmt.Errorf("epoch %d: no node holds a shard of it", epoch)
	}
	e := &Entry{Shards: make([]ShardEntry, nranks)}
	for node, shards := range indexes {
		for _, s := range shards {
			if s.Epoch != epoch || s.Rank < 0 || s.Rank >= nranks {
				continue
			}
			sh := &e.Shards[s.Rank]
			if sh.Written && sh.Sum != s.Checksum {
				return fmt.Errorf("epoch %d: rank %d's copies differ (node %s)", epoch, s.Rank, node)
			}
			sh.Written, sh.Sum, sh.Size = true, s.Checksum, s.Size
			sh.Holders = addName(sh.Holders, node)
			e.CreatedNs = max(e.CreatedNs, s.CreatedNs)
			e.PerRank = e.PerRank || len(s.PerRank) > 0
		}
	}
	for r, sh := range e.Shards {
		if len(sh.Holders) == 0 {
			return fmt.Errorf("epoch %d: no node holds rank %d's shard", epoch, r)
		}
	}
	e.Complete = true
	if b.Epochs == nil {
		b.Epochs = map[uint64]*Entry{}
	}
	b.Epochs[epoch] = e
	return nil
}

// Ranks is the number of epoch's shards, the ranks of the communicator
// libshoal was given in the run that wrote it; 0 when the book has no such
// epoch.
func (b *Book) Ranks(epoch uint64) int {
	if e := b.Epochs[epoch]; e != nil {
		return len(e.Shards)
	}
	return 0
}

// World is the rank count of the run that wrote epoch: [Book.Ranks], or
// more when libshoal was given a smaller communicator ([Entry.World]); 0 when
// the book has no such epoch.
func (b *Book) World(epoch uint64) int {
	if e := b.Epochs[epoch]; e != nil {
		return e.world()
	}
	return 0
}

func (e *Entry) world() int { return max(e.World, len(e.Shards)) }

// SetWorld records that epoch, which the book has, was written by a run of
// world ranks, more than its shards (an epoch resumed from outside the cluster,
// whose writing run the book never saw); a world no larger changes nothing.
func (b *Book) SetWorld(epoch uint64, world int) {
	if e := b.Epochs[epoch]; e != nil && world > len(e.Shards) {
		e.World = world
	}
}

// Restores reports whether a run of nranks ranks may restore from epoch: it
// was written by a run of as many, or every region of its shards is
// distributed or replicated (not [Entry.PerRank]). Epoch 0, a fresh start,
// suits any count.
func (b *Book) Restores(epoch uint64, nranks int) bool {
	e := b.Epochs[epoch]
	return epoch == 0 || e != nil && (e.world() == nranks || !e.PerRank)
}

// Resize makes nranks the count of the runs from now on, and of the epochs
// they write; the book's epochs keep their own.
func (b *Book) Resize(nranks int) { b.NRanks = nranks }
