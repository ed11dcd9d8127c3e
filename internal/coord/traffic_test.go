package coord

import (
	"testing"
)

// TestCopiesNote: an epoch's line says how its copies crossed the
// network: as changes, compressed, both, or (whole and raw) nothing.
func TestCopiesNote(t *testing.T) {
	for _, c := range []struct {
		w    wireBytes
		want string
	}{
		{wireBytes{raw: 4e6, sent: 4e6, wire: 4e6}, ""},
		{wireBytes{}, ""},
		{wireBytes{raw: 4e6, sent: 4e6, wire: 1e6}, "; copies sent compressed: 4.0 MB as 1.0 MB"},
		{wireBytes{raw: 4e6, sent: 5e5, wire: 5e5}, "; copies sent as changes: 4.0 MB as 0.5 MB"},
		{wireBytes{raw: 4e6, sent: 2e6, wire: 1e6}, "; copies sent as changes: 4.0 MB as 2.0 MB; copies sent compressed: 2.0 MB as 1.0 MB"},
	} {
		b := &clusterBackend{wire: map[uint64]wireBytes{3: c.w}}
		if got := b.copiesNote(3); got != c.want {
			t.Errorf("copiesNote(%+v) = %q, want %q", c.w, got, c.want)
		}
		if _, ok := b.wire[3]; ok {
			t.Errorf("copiesNote(%+v) kept the epoch's count", c.w)
		}
	}
}
