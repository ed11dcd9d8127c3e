package epochs

import (
	"strings"

	"shoal/internal/job"
)

// RestoreKept reports whether a restart takes the epoch kept outside the
// cluster (kept, the job record's; nil: none) rather than nodes, the epoch
// the nodes can restore ([Book.Choose]; 0: none, every copy lost or no
// complete epoch yet). Only a newer kept epoch is worth its reading over the
// network, and only from an object store: a directory is a path of the user's,
// which the coordinator's node, running as root, never reads for them.
func RestoreKept(nodes uint64, kept *job.Durable) bool {
	return kept != nil && kept.Epoch > nodes && strings.HasPrefix(kept.Location, "s3://")
}

// KeptShard is one rank's shard of an epoch kept outside the cluster, as
// the epoch's manifest lists it.
type KeptShard struct {
	Size int64
	Sum  uint64
}

// AddKept records epoch, kept outside the cluster and read back from there,
// as complete with shards (by rank) that no node holds yet: each is counted
// as its node fetches it ([Book.AddCopy]). world is the rank count of the run
// that wrote it (0: as many as shards). Whether its shards hold per-rank
// regions is not known before they are read: it is taken to restore on its
// own count only, which an elastic job then runs at. The newer epochs the
// nodes lost stay until the restart's run starts ([Book.StartRun]), which
// numbers its own above them. Pruning's floor comes down to epoch, so that
// its shards are not removed from the nodes that fetch them.
func (b *Book) AddKept(epoch uint64, shards []KeptShard, world int, createdNs uint64) {
	e := &Entry{CreatedNs: createdNs, Complete: true, Shards: make([]ShardEntry, len(shards)), PerRank: true}
	for r, s := range shards {
		e.Shards[r] = ShardEntry{Written: true, Sum: s.Sum, Size: s.Size}
	}
	if world > len(shards) {
		e.World = world
	}
	if b.Epochs == nil {
		b.Epochs = map[uint64]*Entry{}
	}
	b.Epochs[epoch] = e
	b.Highest = max(b.Highest, epoch)
	b.Floor = min(b.Floor, epoch)
}
