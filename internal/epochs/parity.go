package epochs

import (
	"slices"

	"shoal/internal/erasure"
)

// A job with --redundancy rs:K+M keeps one copy of each shard, on its rank's
// node, and protects the shards of an epoch with Reed–Solomon parity instead
// of second copies: the ranks are split into groups of up to K whose shards are
// on distinct nodes, and each group has M parity rows on M other nodes
// (erasure.Plan), so any M nodes lost at once leave every shard either in
// place or rebuildable from K pieces of its group. Storage is (K+M)/K of the
// state instead of (M+1)×. A run on M nodes or fewer cannot place the rows
// apart from the data: its epochs are kept as copies on every node, as
// --redundancy M+1 would.

// ParitySpec is a job's Reed–Solomon code: K data shards and M parity rows
// per group.
type ParitySpec struct {
	K int `json:"k"`
	M int `json:"m"`
}

// GroupEntry is one parity group of an epoch: its ranks, the node planned for
// each parity row, and by row the nodes holding a verified row computed from
// the shards the book counts.
type GroupEntry struct {
	Ranks   []int      `json:"ranks"`
	Nodes   []string   `json:"nodes"`
	Holders [][]string `json:"holders"`
}

// Encode is a parity row to compute: row Row of group Group of epoch Epoch,
// on node To, from the group's shards (Members, with a holder each); To
// computes the rows of Push in the same pass and sends each to its node.
type Encode struct {
	Epoch      uint64
	Group, Row int
	M          int // rows in the group
	To         string
	Members    []GroupMember
	Push       []RowTarget
}

// RowTarget is a parity row and the node to hold it.
type RowTarget struct {
	Row int
	To  string
}

// Rows returns every row e computes: its own, then those it pushes.
func (e Encode) Rows() []RowTarget {
	return append([]RowTarget{{Row: e.Row, To: e.To}}, e.Push...)
}

// GroupMember is a rank's shard in a parity group: its length, its checksum,
// and a live node holding it ("" when none does).
type GroupMember struct {
	Rank   int
	Bytes  int64
	Sum    uint64
	Holder string
}

// RowHolder is a parity row and a live node holding it.
type RowHolder struct {
	Row    int
	Holder string
}

// Rebuild is a shard no live node holds, to rebuild on node To from the other
// pieces of its group.
type Rebuild struct {
	Epoch   uint64
	Rank    int
	To      string
	Group   int
	M       int
	Members []GroupMember // the whole group, ranks ascending
	Rows    []RowHolder   // the rows with a live holder
}

// ParityOn reports whether a run on nodes nodes protects its epochs with
// parity: the job asks for it and the rows can be placed apart from the data.
func (b *Book) ParityOn(nodes int) bool {
	return b.Parity != nil && nodes > b.Parity.M
}

// PlanGroups gives the run's epochs not yet complete their parity groups,
// planned over the run's nodes from where its ranks write (writers): the same
// groups for every epoch of a run. It does nothing for a job without parity,
// or a run on too few nodes.
func (b *Book) PlanGroups(nodes, writers []string) {
	if !b.ParityOn(len(nodes)) {
		return
	}
	var groups []erasure.Group
	for epoch, e := range b.Epochs {
		if e.Complete || e.Groups != nil || epoch < b.RunBase {
			continue
		}
		if groups == nil {
			var err error
			if groups, err = erasure.Plan(writers, nodes, b.Parity.K, b.Parity.M); err != nil {
				return
			}
		}
		e.Groups = make([]GroupEntry, len(groups))
		for i, g := range groups {
			e.Groups[i] = GroupEntry{Ranks: slices.Clone(g.Ranks), Nodes: slices.Clone(g.Parity), Holders: make([][]string, len(g.Parity))}
		}
	}
}

// IndexParity takes the parity rows the nodes that answered hold, by node,
// as Index takes their shards: each node's list replaces what the book knew
// of it, and a row counts when it was computed from the very shards the book
// counts (same ranks, same checksums).
func (b *Book) IndexParity(indexes map[string][]ParityRow) {
	for _, e := range b.Epochs {
		for g := range e.Groups {
			for r := range e.Groups[g].Holders {
				e.Groups[g].Holders[r] = slices.DeleteFunc(e.Groups[g].Holders[r], func(n string) bool {
					_, answered := indexes[n]
					return answered
				})
			}
		}
	}
	for node, rows := range indexes {
		for _, p := range rows {
			if b.rowMatches(p) {
				g := &b.Epochs[p.Epoch].Groups[p.Group]
				g.Holders[p.Row] = addName(g.Holders[p.Row], node)
			}
		}
	}
}

// ParityRow is what a node's index says of one parity row it holds.
type ParityRow struct {
	Epoch      uint64
	Group, Row int
	Ranks      []int
	Sums       []uint64
}

// rowMatches reports whether p is a row of a group the book planned, computed
// from the shards the book counts.
func (b *Book) rowMatches(p ParityRow) bool {
	e := b.Epochs[p.Epoch]
	if e == nil || p.Group < 0 || p.Group >= len(e.Groups) {
		return false
	}
	g := e.Groups[p.Group]
	if p.Row < 0 || p.Row >= len(g.Holders) || !slices.Equal(p.Ranks, g.Ranks) || len(p.Sums) != len(g.Ranks) {
		return false
	}
	for i, r := range g.Ranks {
		if sh := e.Shards[r]; !sh.Written || sh.Sum != p.Sums[i] {
			return false
		}
	}
	return true
}

// AddRow records that node now holds a verified row computed for the book.
func (b *Book) AddRow(epoch uint64, group, row int, node string) {
	if h := b.rowHolders(epoch, group, row); h != nil {
		*h = addName(*h, node)
	}
}

// rowHeld reports whether the book counts parity row row of group group of
// epoch on node.
func (b *Book) rowHeld(epoch uint64, group, row int, node string) bool {
	h := b.rowHolders(epoch, group, row)
	return h != nil && slices.Contains(*h, node)
}

// rowHolders returns the holders of parity row row of group group of epoch,
// nil when the book planned no such row.
func (b *Book) rowHolders(epoch uint64, group, row int) *[]string {
	e := b.Epochs[epoch]
	if e == nil || group < 0 || group >= len(e.Groups) || row < 0 || row >= len(e.Groups[group].Holders) {
		return nil
	}
	return &e.Groups[group].Holders[row]
}

// paritySafe reports whether every rank of e has a copy and every row of
// every group is held: the epoch survives any M nodes lost.
func (e *Entry) paritySafe() bool {
	if e.Groups == nil {
		return false
	}
	for _, sh := range e.Shards {
		if len(sh.Holders) == 0 {
			return false
		}
	}
	for _, g := range e.Groups {
		for _, h := range g.Holders {
			if len(h) == 0 {
				return false
			}
		}
	}
	return true
}

// Encodes returns the parity rows to compute so that the epochs not yet
// complete become safe: each row no node holds, once every shard of its
// group is written and held on one of nodes, for the node planned for it
// (if that node is still one of nodes). A group's missing rows are computed
// by one of their nodes, which pushes the others: the group's shards cross
// the network once, not once per row. busy says whether a row is being
// computed already. Epochs more than two behind the highest seen are left
// alone, as Replicas leaves them.
func (b *Book) Encodes(nodes []string, busy func(epoch uint64, group, row int) bool) []Encode {
	var epochs []uint64
	for epoch, e := range b.Epochs {
		if !e.Complete && e.Groups != nil && epoch+2 >= b.Highest {
			epochs = append(epochs, epoch)
		}
	}
	slices.Sort(epochs)
	var out []Encode
	for _, epoch := range epochs {
		e := b.Epochs[epoch]
		for gi, g := range e.Groups {
			members, ok := b.members(e, g, nodes)
			if !ok || slices.ContainsFunc(members, func(m GroupMember) bool { return m.Holder == "" }) {
				continue
			}
			var enc *Encode
			for row, h := range g.Holders {
				switch {
				case len(h) > 0 || !slices.Contains(nodes, g.Nodes[row]) || busy(epoch, gi, row):
				case enc == nil:
					enc = &Encode{Epoch: epoch, Group: gi, Row: row, M: len(g.Holders), To: g.Nodes[row], Members: members}
				default:
					enc.Push = append(enc.Push, RowTarget{Row: row, To: g.Nodes[row]})
				}
			}
			if enc != nil {
				out = append(out, *enc)
			}
		}
	}
	return out
}

// members returns group g of epoch entry e as members, each with its first
// holder among live ("" for none); false when a rank's shard is not written.
func (b *Book) members(e *Entry, g GroupEntry, live []string) ([]GroupMember, bool) {
	out := make([]GroupMember, len(g.Ranks))
	for i, r := range g.Ranks {
		sh := e.Shards[r]
		if !sh.Written {
			return nil, false
		}
		out[i] = GroupMember{Rank: r, Bytes: sh.Size, Sum: sh.Sum}
		for _, h := range sh.Holders {
			if slices.Contains(live, h) {
				out[i].Holder = h
				break
			}
		}
	}
	return out, true
}

// RebuildFor returns how to rebuild rank's shard of epoch on node to from its
// parity group's pieces on the live nodes, and whether that can be done.
func (b *Book) RebuildFor(epoch uint64, rank int, to string, live []string) (Rebuild, bool) {
	e := b.Epochs[epoch]
	if e == nil || b.Parity == nil {
		return Rebuild{}, false
	}
	for gi, g := range e.Groups {
		if !slices.Contains(g.Ranks, rank) {
			continue
		}
		members, ok := b.members(e, g, live)
		if !ok {
			return Rebuild{}, false
		}
		rb := Rebuild{Epoch: epoch, Rank: rank, To: to, Group: gi, M: len(g.Holders), Members: members}
		have := 0
		for _, m := range members {
			if m.Holder != "" && m.Rank != rank {
				have++
			}
		}
		for row, holders := range g.Holders {
			for _, h := range holders {
				if slices.Contains(live, h) {
					rb.Rows = append(rb.Rows, RowHolder{Row: row, Holder: h})
					have++
					break
				}
			}
		}
		return rb, have >= len(g.Ranks)
	}
	return Rebuild{}, false
}

func cloneGroups(gs []GroupEntry) []GroupEntry {
	if gs == nil {
		return nil
	}
	out := make([]GroupEntry, len(gs))
	for i, g := range gs {
		out[i] = GroupEntry{Ranks: slices.Clone(g.Ranks), Nodes: slices.Clone(g.Nodes), Holders: make([][]string, len(g.Holders))}
		for r, h := range g.Holders {
			out[i].Holders[r] = slices.Clone(h)
		}
	}
	return out
}
