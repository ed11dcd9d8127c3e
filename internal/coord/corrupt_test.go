package coord

import (
	"errors"
	"fmt"
	"testing"

	"shoal/internal/errkind"
	"shoal/internal/staging"
)

// A staging stopped by copies found corrupt as they were read relaunches the
// run (the book counts them no more); any other error fails it as before.
func TestCorruptLoss(t *testing.T) {
	refused := fmt.Errorf("stage rank 1's shard of epoch 2 from n2 to n1: %w: shard: checksum mismatch", errkind.Corrupt)
	for _, tt := range []struct {
		name   string
		staged staging.Outcome
		want   string // the loss's words; "" for none
	}{
		{"staged", staging.Outcome{}, ""},
		{"a copy refused as corrupt", staging.Outcome{Err: refused, Corrupt: []string{"rank 1's shard of epoch 2 on n2"}},
			"rank 1's shard of epoch 2 on n2 corrupt when staged"},
		{"two", staging.Outcome{Err: refused, Corrupt: []string{"rank 3's shard of epoch 2 on n3", "rank 1's shard of epoch 2 on n2"}},
			"rank 1's shard of epoch 2 on n2, rank 3's shard of epoch 2 on n3 corrupt when staged"},
		{"another error first", staging.Outcome{Err: errors.New("stage: no space left on device"), Corrupt: []string{"rank 1's shard of epoch 2 on n2"}}, ""},
	} {
		loss := corruptLoss(tt.staged)
		switch {
		case tt.want == "" && loss != nil:
			t.Errorf("%s: corruptLoss = %q, want none", tt.name, loss)
		case tt.want != "" && (loss == nil || !loss.corrupt || loss.String() != tt.want):
			t.Errorf("%s: corruptLoss = %v, want a relaunch saying %q", tt.name, loss, tt.want)
		}
	}
}
