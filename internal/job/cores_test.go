package job

import "testing"

func TestCoresNeeded(t *testing.T) {
	cases := []struct {
		ranks int
		over  float64
		want  int
	}{{6, 0, 6}, {6, 1, 6}, {6, 2, 3}, {7, 2, 4}, {6, 3, 2}, {1, 1.5, 1}}
	for _, c := range cases {
		if got := (Spec{Ranks: c.ranks, MaxOversubscribe: c.over}).CoresNeeded(); got != c.want {
			t.Errorf("CoresNeeded(%d ranks, %g) = %d, want %d", c.ranks, c.over, got, c.want)
		}
	}
}
