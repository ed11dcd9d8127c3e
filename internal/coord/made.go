package coord

import "slices"

// madeLedger holds the copies and parity rows the backend saw made that their
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
type madeLedger struct {
	taken  map[string]uint64    // by node: indexes taken from it so far
	shards map[shardCopy]uint64 // copy made: its holder's taken when it was
	rows   map[rowCopy]uint64   // parity row pushed: likewise
}

// rowCopy is parity row row of group group of epoch, held on node.
type rowCopy struct {
	parityCopy
	node string
}

func newMadeLedger() madeLedger {
	return madeLedger{taken: map[string]uint64{}, shards: map[shardCopy]uint64{}, rows: map[rowCopy]uint64{}}
}

// indexTaken notes that an index of node was taken.
func (m madeLedger) indexTaken(node string) { m.taken[node]++ }

func (m madeLedger) shard(c shardCopy) { m.shards[c] = m.taken[c.node] }

func (m madeLedger) row(c rowCopy) { m.rows[c] = m.taken[c.node] }

// apply records in book, just indexed, the copies and rows made that are not
// settled (see madeLedger); those settled, and those of epochs the book no
// longer has, are forgotten.
func (m madeLedger) apply(book *EpochBook) {
	for c, at := range m.shards {
		if book.Epochs[c.epoch] == nil || m.settled(c.node, at, slices.Contains(book.Holders(c.epoch, c.rank), c.node)) {
			delete(m.shards, c)
			continue
		}
		book.AddCopy(c.epoch, c.rank, c.node)
	}
	for c, at := range m.rows {
		if book.Epochs[c.epoch] == nil || m.settled(c.node, at, book.rowHeld(c.epoch, c.group, c.row, c.node)) {
			delete(m.rows, c)
			continue
		}
		book.AddRow(c.epoch, c.group, c.row, c.node)
	}
}

// settled reports whether an entry of node, made when at indexes of it had
// been taken, is settled, the book just indexed showing it or not (shown):
// an index of node taken since shows it, or two were taken since.
func (m madeLedger) settled(node string, at uint64, shown bool) bool {
	since := m.taken[node] - at
	return since >= 2 || since == 1 && shown
}
