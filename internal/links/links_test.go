package links

import (
	"reflect"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/place"
)

func TestPick(t *testing.T) {
	t0 := time.Unix(1000, 0)
	measured := map[string]time.Time{"a": t0.Add(2 * time.Second), "b": t0, "d": t0.Add(time.Second)}
	for _, tt := range []struct {
		k    int
		want []string
	}{
		{2, []string{"c", "e"}},           // never measured first, by name
		{4, []string{"c", "e", "b", "d"}}, // then the longest ago
		{9, []string{"c", "e", "b", "d", "a"}},
	} {
		if got := Pick([]string{"e", "d", "c", "b", "a"}, measured, tt.k); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Pick(k=%d) = %v, want %v", tt.k, got, tt.want)
		}
	}
}

func link(from, to string, rttMs, mbit float64, estimated bool) api.Link {
	return api.Link{From: from, To: to, RTT: api.Duration(time.Duration(rttMs * float64(time.Millisecond))), Bandwidth: mbit * 1e6 / 8, Estimated: estimated}
}

func TestComplete(t *testing.T) {
	measured := []api.Link{
		link("a", "b", 1, 1000, false),
		link("b", "c", 4, 10, false),
		link("a", "d", 2, 100, false),
		link("d", "c", 3, 50, false),
		link("x", "x", 1, 1, false), // to itself: ignored
		link("a", "c", 9, 9, true),  // an estimate given as input: ignored
	}
	got := Complete([]string{"a", "b", "c", "d"}, measured)
	want := []api.Link{
		link("a", "b", 1, 1000, false),
		link("a", "c", 5, 50, true), // through d (bottleneck 50) beats through b (10)
		link("a", "d", 2, 100, false),
		link("b", "a", 1, 1000, true), // the reverse direction
		link("b", "c", 4, 10, false),
		link("b", "d", 3, 100, true), // through a
		link("c", "a", 5, 50, true),
		link("c", "b", 4, 10, true),
		link("c", "d", 3, 50, true),
		link("d", "a", 2, 100, true),
		link("d", "b", 3, 100, true),
		link("d", "c", 3, 50, false),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Complete =\n%+v\nwant\n%+v", got, want)
	}
	// A node nobody reaches gets no link.
	if got := Complete([]string{"a", "b", "z"}, measured[:1]); len(got) != 2 {
		t.Errorf("Complete with an unreached node = %+v, want a→b and b→a only", got)
	}
}

func TestForPlanner(t *testing.T) {
	got := ForPlanner([]api.Link{link("a", "b", 2, 800, false), link("b", "a", 4, 400, false), link("c", "a", 1, 80, true)})
	want := place.Links{
		{A: "a", B: "b"}: {Latency: 0.002, Bandwidth: 50e6}, // the slower direction, half the longer round trip
		{A: "a", B: "c"}: {Latency: 0.0005, Bandwidth: 10e6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ForPlanner = %+v, want %+v", got, want)
	}
}
