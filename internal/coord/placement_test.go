package coord

import (
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/place"
)

func TestTightest(t *testing.T) {
	nodes := []place.Node{{Name: "a", Cores: 2}, {Name: "b", Cores: 4}, {Name: "c", Cores: 0}}
	for _, c := range []struct {
		p    place.Placement
		want float64
	}{
		{nil, 0},
		{place.Placement{"a", "b"}, 0.5},
		{place.Placement{"a", "a", "a", "b", "b"}, 1.5},
		{place.Placement{"b", "b", "b", "b", "b", "b"}, 1.5},
		{place.Placement{"c", "b"}, 0.25}, // a node of no cores is skipped, not divided by
	} {
		if got := tightest(c.p, nodes); got != c.want {
			t.Errorf("tightest(%v) = %g, want %g", c.p, got, c.want)
		}
	}
}

func TestPerIteration(t *testing.T) {
	for _, c := range []struct {
		secs float64
		want string
	}{
		{0.651, "651 ms"}, {0.0004, "0 ms"}, {0.84, "840 ms"}, {0.88, "880 ms"}, {1.494, "1.49 s"}, {12.3, "12 s"},
	} {
		if got := perIteration(c.secs); got != c.want {
			t.Errorf("perIteration(%g) = %q, want %q", c.secs, got, c.want)
		}
	}
}

// A job whose MPI the coordinating node lacks is refused at submission, naming the
// launcher and its packages; a task farm needs none.
func TestLaunchable(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, c := range []struct {
		spec job.Spec
		want string
	}{
		{job.Spec{}, "mpirun.openmpi not found (install Open MPI"},
		{job.Spec{Engine: "mpich"}, "mpiexec.mpich not found (install MPICH"},
		{job.Spec{Farm: &job.FarmSpec{}}, ""},
	} {
		err := launchable(c.spec)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("launchable(engine %q, farm %v) = %v, want %q", c.spec.Engine, c.spec.Farm != nil, err, c.want)
		}
	}
}

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
		cur, doubted, err := linksDoubted(in, now, c.reportedOn)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if doubted != c.want {
			t.Errorf("%s: doubted %v (predicted %.2f s of communication), want %v", c.name, doubted, cur.Comm, c.want)
		}
	}
}
