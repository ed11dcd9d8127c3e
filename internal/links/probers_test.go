package links

import (
	"fmt"
	"slices"
	"testing"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i+1)
	}
	return out
}

func TestProbersSmallClusterIsEveryone(t *testing.T) {
	live := names(5)
	got := Probers("n3", live, PerRound)
	if want := []string{"n1", "n2", "n4", "n5"}; !slices.Equal(got, want) {
		t.Errorf("Probers(n3, 5 nodes) = %v, want every other node %v", got, want)
	}
	if got := Probers("n1", []string{"n1"}, PerRound); len(got) != 0 {
		t.Errorf("Probers of the only node = %v, want none", got)
	}
}

func TestProbersBoundedAndSpread(t *testing.T) {
	live := names(128)
	count := map[string]int{}
	for _, j := range live {
		got := Probers(j, live, PerRound)
		if len(got) != PerRound || slices.Contains(got, j) {
			t.Fatalf("Probers(%s) = %v, want %d nodes without the joiner", j, got, PerRound)
		}
		// The same set whatever the order of live, and with duplicates.
		rev := slices.Clone(live)
		slices.Reverse(rev)
		if again := Probers(j, append(rev, j, "n7"), PerRound); !slices.Equal(again, got) {
			t.Fatalf("Probers(%s) depends on the order of live: %v then %v", j, got, again)
		}
		for _, p := range got {
			count[p]++
		}
	}
	// 128 joins of 8 probers each: 8 a node on average; none should carry
	// more than a few times that.
	for n, c := range count {
		if c > 4*PerRound {
			t.Errorf("%s probes %d of 128 joiners, want about %d", n, c, PerRound)
		}
	}
}

func TestProbersStableWhenOthersJoin(t *testing.T) {
	live := names(64)
	before := Probers("n5", live, PerRound)
	after := Probers("n5", append(live, "n65", "n66"), PerRound)
	kept := 0
	for _, p := range before {
		if slices.Contains(after, p) {
			kept++
		}
	}
	if kept < PerRound-2 {
		t.Errorf("two nodes joining changed n5's probers from %v to %v, want at most 2 replaced", before, after)
	}
}
