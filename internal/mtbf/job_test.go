package mtbf

import (
	"testing"
	"time"
)

func TestMTBFEnv(t *testing.T) {
	for _, c := range []struct {
		rec   Estimate
		nodes int
		want  string
	}{
		{Estimate{}, 1, "SHOAL_MTBF=3600"},
		{Estimate{}, 4, "SHOAL_MTBF=900"},
		{Estimate{Failures: 1 << 30}, 4, "SHOAL_MTBF=1"}, // never 0, which libshoal refuses
	} {
		node, why := NodeMTBF(0, c.rec)
		if got := Env(node, c.nodes); got != c.want {
			t.Errorf("Env(%v, %d) by %+v = %q, want %q", node, c.nodes, c.rec, got, c.want)
		}
		if why != c.rec.String() {
			t.Errorf("the record %+v is said as %q, want %q", c.rec, why, c.rec.String())
		}
	}
	// The user's --mtbf outweighs the record.
	node, why := NodeMTBF(2*time.Minute, Estimate{Failures: 3})
	if got := Env(node, 4); got != "SHOAL_MTBF=30" || why != "as given with --mtbf" {
		t.Errorf("--mtbf 2m over 4 nodes: %q (%s), want SHOAL_MTBF=30 as given with --mtbf", got, why)
	}
}
