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
