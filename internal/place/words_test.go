package place

import "testing"

func TestPerIteration(t *testing.T) {
	for _, c := range []struct {
		secs float64
		want string
	}{
		{0.651, "651 ms"}, {0.0004, "0 ms"}, {0.84, "840 ms"}, {0.88, "880 ms"}, {1.494, "1.49 s"}, {12.3, "12 s"},
	} {
		if got := PerIteration(c.secs); got != c.want {
			t.Errorf("PerIteration(%g) = %q, want %q", c.secs, got, c.want)
		}
	}
}
