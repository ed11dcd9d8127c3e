package epochs

import (
	"errors"
	"fmt"
	"sort"
)

// Skipped is a complete epoch that could not be used for a restart, and why.
type Skipped struct {
	Epoch uint64
	Err   error
}

func (s Skipped) String() string { return fmt.Sprintf("epoch %d: %v", s.Epoch, s.Err) }

// Choose picks the epoch a job restarts from: the newest of complete for which verify
// returns nil. Epochs are tried newest first and never mixed: verify must check every
// rank's shard of one epoch. It returns the epochs passed over, newest first, and
// ErrNoEpoch when none is usable.
func Choose(complete []uint64, verify func(epoch uint64) error) (uint64, []Skipped, error) {
	order := append([]uint64(nil), complete...)
	sort.Slice(order, func(i, j int) bool { return order[i] > order[j] })
	var skipped []Skipped
	for i, e := range order {
		if i > 0 && e == order[i-1] {
			continue
		}
		if err := verify(e); err != nil {
			skipped = append(skipped, Skipped{Epoch: e, Err: err})
			continue
		}
		return e, skipped, nil
	}
	return 0, skipped, ErrNoEpoch
}

// ErrNoEpoch means no complete epoch is usable: the job starts from the beginning.
var ErrNoEpoch = errors.New("epochs: no usable complete epoch")
