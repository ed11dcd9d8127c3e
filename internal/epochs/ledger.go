package epochs

import "slices"

// Ledger holds the copies and parity rows the backend saw made that their
// holders' indexes may not show yet. A node lists a new file at its next
// rescan (shardstore's RescanInterval, a quarter of a second), and the book is
// rebuilt from the nodes' indexes at every poll: without the ledger, a copy
// made would drop out of the book at the next poll and be ordered again at
// once, and the node, which has it, would answer at once, in a loop that ran
// until the rescan (1,600 orders a checkpoint on two nodes).
//
// An entry lasts until an index of its holder taken after it was made shows
// it, or until two were taken: the first may have been made before the copy
// landed (a long poll answered as the copy ended); the node makes the second
// after it, and what that says the node holds, the copy or not, stands.
type Ledger struct {
	taken  map[string]uint64    // by node: indexes taken from it so far
	shards map[ShardCopy]uint64 // copy made: its holder's taken when it was
	rows   map[RowCopy]uint64   // parity row pushed: likewise
}

// RowCopy is a parity row, held on Node.
type RowCopy struct {
	ParityCopy
	Node string
}

func NewLedger() Ledger {
	return Ledger{taken: map[string]uint64{}, shards: map[ShardCopy]uint64{}, rows: map[RowCopy]uint64{}}
}

// IndexTaken notes that an index of node was taken.
func (m Ledger) IndexTaken(node string) { m.taken[node]++ }

// Copy notes that copy c was made.
func (m Ledger) Copy(c ShardCopy) { m.shards[c] = m.taken[c.Node] }

// Row notes that parity row c was made.
func (m Ledger) Row(c RowCopy) { m.rows[c] = m.taken[c.Node] }

// Apply records in book, just indexed, the copies and rows made that are not
// settled (see Ledger); those settled, and those of epochs the book no
// longer has, are forgotten.
func (m Ledger) Apply(book *Book) {
	for c, at := range m.shards {
		if book.Epochs[c.Epoch] == nil || m.settled(c.Node, at, slices.Contains(book.Holders(c.Epoch, c.Rank), c.Node)) {
			delete(m.shards, c)
			continue
		}
		book.AddCopy(c.Epoch, c.Rank, c.Node)
	}
	for c, at := range m.rows {
		if book.Epochs[c.Epoch] == nil || m.settled(c.Node, at, book.rowHeld(c.Epoch, c.Group, c.Row, c.Node)) {
			delete(m.rows, c)
			continue
		}
		book.AddRow(c.Epoch, c.Group, c.Row, c.Node)
	}
}

// settled reports whether an entry of node, made when at indexes of it had
// been taken, is settled, the book just indexed showing it or not (shown):
// an index of node taken since shows it, or two were taken since.
func (m Ledger) settled(node string, at uint64, shown bool) bool {
	since := m.taken[node] - at
	return since >= 2 || since == 1 && shown
}

// ParityCopy is parity row Row of group Group of Epoch.
type ParityCopy struct {
	Epoch      uint64
	Group, Row int
}

// ShardCopy is a copy of Rank's shard of Epoch on Node.
type ShardCopy struct {
	Epoch uint64
	Rank  int
	Node  string
}
