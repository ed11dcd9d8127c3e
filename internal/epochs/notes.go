package epochs

import (
	"fmt"
	"strings"
)

// Note says that c is corrupt and what holds the shard besides.
func (c CorruptCopy) Note() string {
	what := fmt.Sprintf("node %s: rank %d's shard of epoch %d is corrupt (%s)", c.Node, c.Rank, c.Epoch, c.Error)
	if len(c.Good) == 0 {
		return what + "; no good copy of it is left: a restart cannot use epoch " + fmt.Sprint(c.Epoch)
	}
	return fmt.Sprintf("%s; not used: a good copy is on %s", what, strings.Join(c.Good, ", "))
}

// RepairNote says that node's corrupt copy of rank's shard of epoch was
// replaced by a copy of from's.
func RepairNote(epoch uint64, rank int, node, from string) string {
	return fmt.Sprintf("node %s: rank %d's shard of epoch %d, corrupt there, repaired from %s's copy", node, rank, epoch, from)
}

// CoverageNote says that epoch holds the shards of fewer ranks than the run
// that wrote it had (see [Entry.World]): the program gave libshoal a
// communicator of its first ranks, and the others are neither checkpointed
// nor restored. "" when its shards cover every rank, or the book has no such
// epoch.
func (b *Book) CoverageNote(epoch uint64) string {
	shards, world := b.Ranks(epoch), b.World(epoch)
	if shards >= world {
		return ""
	}
	return fmt.Sprintf("checkpoints cover %d of %d ranks: the program gave libshoal a communicator of its first %d; "+
		"the others have no checkpoint, and a restart starts them afresh", shards, world, shards)
}
