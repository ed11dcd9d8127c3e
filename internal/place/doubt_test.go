package place_test

import (
	"slices"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/place"
)

// The links a move is weighed with are checked against the job's own run: the
// layout its traffic was reported from carried an iteration's communication
// within a second, so links that predict far more of it there (a probe taken
// while a busy machine kept it waiting) move no rank, while a slow
// link that explains the job's run still counts.
func TestLinksDoubted(t *testing.T) {
	chain := func(msgs, bytes float64) []place.Flow { // heat's halo exchange over 6 ranks
		var f []place.Flow
		for r := 0; r < 5; r++ {
			f = append(f, place.Flow{From: r, To: r + 1, Messages: msgs, Bytes: bytes})
		}
		return f
	}
	link := func(a, b string, rtt time.Duration, bw float64) links.Link {
		return links.Link{From: a, To: b, RTT: job.Duration(rtt), Bandwidth: bw}
	}
	lan := []links.Link{link("n1", "n2", 200*time.Microsecond, 2e9), link("n1", "n4", 400*time.Microsecond, 2e8)}
	nodes := []place.Node{{Name: "n1", Cores: 2, Speed: 1e9}, {Name: "n2", Cores: 2, Speed: 1e9}, {Name: "n4", Cores: 2, Speed: 1e9}}
	now := place.Placement{"n1", "n1", "n2", "n2", "n4", "n4"}
	for _, c := range []struct {
		name       string
		n2n4       links.Link
		traffic    []place.Flow
		reportedOn place.Placement
		want       bool
	}{
		{"a loaded probe of n4, traffic from this layout", link("n2", "n4", 20*time.Millisecond, 2.5e7), chain(400, 3.2e6), now, true},
		{"the same probe, traffic from an earlier layout", link("n2", "n4", 20*time.Millisecond, 2.5e7), chain(400, 3.2e6), place.Placement{"n1", "n1", "n2", "n2", "n3", "n3"}, false},
		{"n4 on Wi-Fi, a job light enough for it", link("n2", "n4", 4*time.Millisecond, 2e6), chain(50, 4e5), now, false},
		{"links as fast as the job found them", link("n2", "n4", 300*time.Microsecond, 1e9), chain(400, 3.2e6), now, false},
	} {
		in := place.Input{Nodes: nodes, Ranks: 6, Work: 3e8, Traffic: c.traffic, Links: links.ForPlanner(append(slices.Clone(lan), c.n2n4))}
		cur, doubted, err := place.LinksDoubted(in, now, c.reportedOn)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if doubted != c.want {
			t.Errorf("%s: doubted %v (predicted %.2f s of communication), want %v", c.name, doubted, cur.Comm, c.want)
		}
	}
}
