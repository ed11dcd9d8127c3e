package place

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestChooseAgreesWithBruteForce generates small jobs (up to 8 ranks on up to 4 nodes,
// with slot limits, varied cores, speeds, links and traffic) and checks, on every one,
// that Choose's plan respects the slots, that its cost is Predict's, and that it is
// within 5 % of the best placement found by trying every rank → node map.
func TestChooseAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2024))
	const want = 1.05
	instances, worst, optimal := 0, 1.0, 0
	var worstIn string
	for instances < 1000 {
		in, desc := genInstance(rng)
		plan, err := Choose(in)
		if errors.Is(err, ErrTooFewSlots) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		instances++
		checkPlan(t, in, plan, desc)
		best, bestP := bruteForce(in)
		r := plan.Cost.Total() / best
		if r > worst {
			worst, worstIn = r, fmt.Sprintf("%s: got %s (%.6g s), optimum %s (%.6g s)", desc, plan.Placement, plan.Cost.Total(), bestP, best)
		}
		if r <= 1+1e-9 {
			optimal++
		}
		if r > want {
			t.Errorf("%s: Choose = %s at %.6g s, brute force %s at %.6g s: %.3f× the optimum, want at most %.2f×",
				desc, plan.Placement, plan.Cost.Total(), bestP, best, r, want)
		}
	}
	t.Logf("%d instances: %d optimal, worst %.4f× the optimum (%s)", instances, optimal, worst, worstIn)
}

// checkPlan checks what every plan must be: every rank on a node within its slots, the
// cost Predict gives, no worse than Spread, and a reason.
func checkPlan(t *testing.T, in Input, plan Plan, desc string) {
	t.Helper()
	if len(plan.Placement) != in.Ranks {
		t.Fatalf("%s: %d ranks placed, want %d", desc, len(plan.Placement), in.Ranks)
	}
	counts := plan.Placement.Counts()
	for _, n := range in.Nodes {
		if counts[n.Name] > in.Options.slots(n) {
			t.Fatalf("%s: %s has %d ranks for %d slots", desc, n.Name, counts[n.Name], in.Options.slots(n))
		}
	}
	got, err := Predict(in, plan.Placement)
	if err != nil {
		t.Fatalf("%s: Predict(%s): %v", desc, plan.Placement, err)
	}
	if got != plan.Cost {
		t.Errorf("%s: plan cost %+v, Predict %+v", desc, plan.Cost, got)
	}
	spread, _ := Spread(in.Nodes, in.Ranks, in.Options)
	if sc, _ := Predict(in, spread); sc != plan.SpreadCost || plan.Cost.Total() > sc.Total()*(1+1e-9) {
		t.Errorf("%s: cost %.6g, spread cost %+v, Predict of Spread %+v", desc, plan.Cost.Total(), plan.SpreadCost, sc)
	}
	if plan.Reason == "" || strings.Contains(plan.Reason, "\n") {
		t.Errorf("%s: reason %q, want one line", desc, plan.Reason)
	}
}

// genInstance makes a random small job: 1 to 4 nodes, 1 to 8 ranks.
func genInstance(rng *rand.Rand) (Input, string) {
	n := 1 + rng.IntN(4)
	ranks := 1 + rng.IntN(8)
	in := Input{Ranks: ranks}
	for i := 0; i < n; i++ {
		in.Nodes = append(in.Nodes, Node{
			Name:  fmt.Sprintf("n%d", i+1),
			Cores: 1 + rng.IntN(4),
			Speed: []float64{0, 1, 1, 2, 0.5, 3}[rng.IntN(6)],
		})
	}
	rng.Shuffle(len(in.Nodes), func(i, j int) { in.Nodes[i], in.Nodes[j] = in.Nodes[j], in.Nodes[i] })
	in.Options = []Options{{}, {MaxOversubscribe: 2}, {MaxOversubscribe: 3}, {MaxOversubscribe: 0.5},
		{MaxPerNode: 2}, {MaxOversubscribe: 4, MaxPerNode: 3}}[rng.IntN(6)]
	in.Work = []float64{0, 1e-3, 0.01, 0.1, 1}[rng.IntN(5)]

	links := []string{"missing", "uniform", "random", "one slow site link"}[rng.IntN(4)]
	fast := Link{Latency: 20e-6, Bandwidth: 1.25e9}
	switch links {
	case "uniform":
		in.Links = Links{}
		for i := 1; i <= n; i++ {
			for j := i + 1; j <= n; j++ {
				in.Links[NodePair{fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", j)}] = fast
			}
		}
	case "random":
		in.Links = Links{}
		for i := 1; i <= n; i++ {
			for j := i + 1; j <= n; j++ {
				if rng.IntN(4) > 0 { // some stay unknown
					in.Links[NodePair{fmt.Sprintf("n%d", j), fmt.Sprintf("n%d", i)}] = Link{
						Latency: []float64{10e-6, 100e-6, 2e-3}[rng.IntN(3)], Bandwidth: []float64{1.25e6, 12.5e6, 125e6, 1.25e9}[rng.IntN(4)]}
				}
			}
		}
	case "one slow site link":
		// Sites of consecutive nodes; between them 10 Mbit/s and 5 ms.
		cut := 1 + rng.IntN(max(n-1, 1))
		in.Links = Links{}
		for i := 1; i <= n; i++ {
			for j := i + 1; j <= n; j++ {
				k := fast
				if (i <= cut) != (j <= cut) {
					k = Link{Latency: 5e-3, Bandwidth: 1.25e6}
				}
				in.Links[NodePair{fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", j)}] = k
			}
		}
	}

	pattern := []string{"none", "ring", "shuffled ring", "all-to-all", "random"}[rng.IntN(5)]
	size := []float64{1e3, 1e5, 1e6, 1e7}[rng.IntN(4)]
	ring := func(order []int) {
		for i := range order {
			j := order[(i+1)%len(order)]
			if j != order[i] {
				in.Traffic = append(in.Traffic, Flow{order[i], j, size, 1}, Flow{j, order[i], size, 1})
			}
		}
	}
	switch pattern {
	case "ring":
		order := make([]int, ranks)
		for i := range order {
			order[i] = i
		}
		ring(order)
	case "shuffled ring":
		ring(rng.Perm(ranks))
	case "all-to-all":
		for i := 0; i < ranks; i++ {
			for j := 0; j < ranks; j++ {
				if i != j {
					in.Traffic = append(in.Traffic, Flow{i, j, size / float64(ranks), 1})
				}
			}
		}
	case "random":
		for k := rng.IntN(2 * ranks); k > 0; k-- {
			in.Traffic = append(in.Traffic, Flow{rng.IntN(ranks), rng.IntN(ranks), size * rng.Float64(), float64(1 + rng.IntN(10))})
		}
	}
	return in, fmt.Sprintf("%d ranks on %v %+v, work %g, links %s, traffic %s of %g bytes", ranks, in.Nodes, in.Options, in.Work, links, pattern, size)
}

// bruteForce tries every rank → node map within the slots and returns the lowest
// predicted time, computed here straight from the model's definition.
func bruteForce(in Input) (float64, Placement) {
	ns := in.Nodes
	n := len(ns)
	slots := make([]int, n)
	for a, nd := range ns {
		slots[a] = in.Options.slots(nd)
	}
	work := in.Work
	if work <= 0 {
		for _, nd := range ns {
			work = max(work, speed(nd))
		}
	}
	traffic := in.Traffic
	if len(traffic) == 0 && !in.Measured {
		traffic = NeighbourTraffic(in.Ranks)
	}
	// pairTime[a][b] for each flow, a link shared by both directions.
	type flowTime struct {
		from, to int
		t        []float64 // [a*n+b]
	}
	var flows []flowTime
	for _, f := range traffic {
		if f.From == f.To {
			continue
		}
		ft := flowTime{f.From, f.To, make([]float64, n*n)}
		for a := range ns {
			for b := range ns {
				ft.t[a*n+b] = in.Links.Between(ns[a].Name, ns[b].Name).time(f.Messages, f.Bytes)
			}
		}
		flows = append(flows, ft)
	}
	at := make([]int, in.Ranks)
	count := make([]int, n)
	comm := make([]float64, n)
	best, bestAt := math.Inf(1), []int(nil)
	var rec func(r int)
	rec = func(r int) {
		if r == in.Ranks {
			for a := range comm {
				comm[a] = 0
			}
			for _, f := range flows {
				a, b := at[f.from], at[f.to]
				comm[a] += f.t[a*n+b]
				if b != a {
					comm[b] += f.t[a*n+b]
				}
			}
			worst := 0.0
			for a, nd := range ns {
				if count[a] == 0 {
					continue
				}
				comp := work / speed(nd) * max(1, float64(count[a])/float64(nd.Cores))
				worst = max(worst, comp+comm[a])
			}
			if worst < best {
				best, bestAt = worst, append([]int(nil), at...)
			}
			return
		}
		for a := 0; a < n; a++ {
			if count[a] < slots[a] {
				at[r] = a
				count[a]++
				rec(r + 1)
				count[a]--
			}
		}
	}
	rec(0)
	p := make(Placement, len(bestAt))
	for r, a := range bestAt {
		p[r] = ns[a].Name
	}
	return best, p
}

func TestChooseDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	for i := 0; i < 100; i++ {
		in, desc := genInstance(rng)
		first, err := Choose(in)
		if errors.Is(err, ErrTooFewSlots) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		again, _ := Choose(in)
		shuffled := in
		shuffled.Nodes = append([]Node(nil), in.Nodes...)
		rng.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
		shuffled.Traffic = append([]Flow(nil), in.Traffic...)
		rng.Shuffle(len(shuffled.Traffic), func(i, j int) { shuffled.Traffic[i], shuffled.Traffic[j] = shuffled.Traffic[j], shuffled.Traffic[i] })
		reordered, _ := Choose(shuffled)
		if !reflect.DeepEqual(first, again) {
			t.Errorf("%s: Choose gave %+v, then %+v", desc, first, again)
		}
		if !reflect.DeepEqual(first, reordered) {
			t.Errorf("%s: Choose gave %+v, with nodes and flows in another order %+v", desc, first, reordered)
		}
	}
}

// sites is 4 nodes of 2 cores: n1, n2 at one site, n3, n4 at another, 1 Gbit/s inside a
// site and 10 Mbit/s between them.
func sites() Links {
	lan, wan := Link{Latency: 50e-6, Bandwidth: 125e6}, Link{Latency: 5e-3, Bandwidth: 1.25e6}
	return Links{{"n1", "n2"}: lan, {"n3", "n4"}: lan,
		{"n1", "n3"}: wan, {"n1", "n4"}: wan, {"n2", "n3"}: wan, {"n2", "n4"}: wan}
}

func ringTraffic(ranks int, bytes float64) []Flow {
	var fs []Flow
	for i := 0; i < ranks; i++ {
		j := (i + 1) % ranks
		fs = append(fs, Flow{i, j, bytes, 1}, Flow{j, i, bytes, 1})
	}
	return fs
}

// quotaHosts is n nodes n1… of cores cores each, whose ranks share cpus cores' worth of
// CPU (a quota), each core a whole CPU's speed.
func quotaHosts(n, cores int, cpus float64) []Node {
	var ns []Node
	for i := 1; i <= n; i++ {
		ns = append(ns, Node{Name: fmt.Sprintf("n%d", i), Cores: cores, CPUs: cpus, Speed: 1})
	}
	return ns
}

func TestChoosePackOrSpread(t *testing.T) {
	four := nodes("n1", 2, "n2", 2, "n3", 2, "n4", 2)
	tests := []struct {
		name   string
		in     Input
		want   string // the placement
		reason string // how the reason starts
	}{
		{"communication-heavy over a slow site link: packs on one site, oversubscribed",
			Input{Nodes: four, Ranks: 8, Work: 0.1, Traffic: ringTraffic(8, 1e6), Links: sites(), Options: Options{MaxOversubscribe: 2}},
			"n1:0-3 n2:4-7", "packed 8 ranks on n1, n2: over 4 nodes the "},
		{"compute-heavy: spreads over every core",
			Input{Nodes: four, Ranks: 8, Work: 10, Traffic: ringTraffic(8, 1e3), Links: sites(), Options: Options{MaxOversubscribe: 2}},
			"", "spread 8 ranks over 4 nodes: compute dominates (predicted 10 s/iter against 15 s packed on 3)"},
		{"hosts under a half-CPU quota: a compute job spreads, one rank a host at half a CPU, not two sharing it",
			Input{Nodes: quotaHosts(4, 2, 0.5), Ranks: 4, Work: 10, Traffic: ringTraffic(4, 1e3), Links: sites()},
			"n1:0 n2:1 n3:2 n4:3", "spread 4 ranks over 4 nodes: compute dominates"},
		{"hosts under a half-CPU quota: a communication-heavy job still packs on one site",
			Input{Nodes: quotaHosts(4, 2, 0.5), Ranks: 4, Work: 0.1, Traffic: ringTraffic(4, 1e6), Links: sites()},
			"n1:0-1 n2:2-3", "packed 4 ranks on n1, n2: over 4 nodes the "},
		{"a slow node is left out when the others have cores to spare",
			Input{Nodes: []Node{{Name: "n1", Cores: 4, Speed: 1}, {Name: "n2", Cores: 4, Speed: 1}, {Name: "n3", Cores: 4, Speed: 0.25}}, Ranks: 6, Work: 1},
			"", "packed 6 ranks on n1, n2: over 3 nodes n3's compute would make each iteration 4.0× as long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Choose(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, tt.in, plan, tt.name)
			if tt.want != "" && plan.Placement.String() != tt.want {
				t.Errorf("placement %s, want %s", plan.Placement, tt.want)
			}
			if !strings.HasPrefix(plan.Reason, tt.reason) {
				t.Errorf("reason %q, want it to start %q", plan.Reason, tt.reason)
			}
			t.Logf("%s: %s", plan.Placement, plan.Reason)
		})
	}
}

// BenchmarkChoose times the planner on jobs of the size a cluster of small machines
// runs: a ring (a 1-D halo), a 2-D halo and all-to-all traffic, nodes in sites of 8
// with a slow link between sites.
func BenchmarkChoose(b *testing.B) {
	for _, size := range []struct{ ranks, nodes int }{{64, 16}, {256, 32}, {128, 128}} {
		for _, pattern := range []string{"ring", "2-D halo", "all-to-all"} {
			in := benchInput(size.ranks, size.nodes, pattern)
			b.Run(fmt.Sprintf("%d ranks on %d nodes, %s", size.ranks, size.nodes, pattern), func(b *testing.B) {
				var plan Plan
				for i := 0; i < b.N; i++ {
					plan, _ = Choose(in)
				}
				b.ReportMetric(plan.Cost.Total()/plan.SpreadCost.Total(), "cost/spread")
			})
		}
	}
}

func benchInput(ranks, n int, pattern string) Input {
	in := Input{Ranks: ranks, Work: 0.05, Links: Links{}, Options: Options{MaxOversubscribe: 2}}
	for i := 0; i < n; i++ {
		in.Nodes = append(in.Nodes, Node{Name: fmt.Sprintf("n%02d", i+1), Cores: []int{4, 8}[i%2], Speed: []float64{1, 1.5, 0.8}[i%3]})
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			k := Link{Latency: 50e-6, Bandwidth: 125e6}
			if i/8 != j/8 {
				k = Link{Latency: 2e-3, Bandwidth: 12.5e6}
			}
			in.Links[NodePair{in.Nodes[i].Name, in.Nodes[j].Name}] = k
		}
	}
	switch pattern {
	case "ring":
		in.Traffic = ringTraffic(ranks, 1e6)
	case "2-D halo":
		side := int(math.Sqrt(float64(ranks)))
		for r := 0; r < ranks; r++ {
			x, y := r%side, r/side
			for _, d := range [][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}} {
				nx, ny := (x+d[0]+side)%side, (y+d[1]+side)%side
				in.Traffic = append(in.Traffic, Flow{r, ny*side + nx, 5e5, 1})
			}
		}
	case "all-to-all":
		for i := 0; i < ranks; i++ {
			for j := 0; j < ranks; j++ {
				if i != j {
					in.Traffic = append(in.Traffic, Flow{i, j, 1e7 / float64(ranks), 1})
				}
			}
		}
	}
	return in
}

// TestChooseSilentRanks: ranks measured sending nothing are not taken for a ring of
// neighbours: over a slow site link a compute job whose blocks would cross it is
// spread onto every core, not packed to spare the link talk that never happens.
func TestChooseSilentRanks(t *testing.T) {
	in := Input{Nodes: quotaHosts(4, 2, 0.5), Ranks: 4, Work: 0.2, Links: sites(), Measured: true}
	plan, err := Choose(in)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, in, plan, "silent")
	if got := plan.Placement.String(); got != "n1:0 n2:1 n3:2 n4:3" {
		t.Errorf("silent ranks placed %s, want one a host (%s)", got, plan.Reason)
	}
	if plan.Cost.Comm != 0 {
		t.Errorf("silent ranks predicted %g s of communication, want none", plan.Cost.Comm)
	}
	in.Measured = false // the same job, its traffic unknown: the assumed ring packs it
	if plan, err := Choose(in); err != nil || plan.Cost.Comm == 0 {
		t.Errorf("unknown traffic: %s, comm %g, %v; want the assumed ring's communication", plan.Placement, plan.Cost.Comm, err)
	}
}

// TestChooseWithoutTraffic: with no traffic measured, ranks are taken to talk to their
// neighbours (a ring); on nodes of one speed the plan is then Spread's block layout:
// packing a ring onto fewer nodes leaves every node two neighbours elsewhere.
func TestChooseWithoutTraffic(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		ranks int
		opt   Options
		want  string
	}{
		{"ranks fill the cores", nodes("n1", 2, "n2", 2, "n3", 2, "n4", 2), 8, Options{}, "n1:0-1 n2:2-3 n3:4-5 n4:6-7"},
		{"unequal cores filled", nodes("a", 2, "b", 2, "c", 3), 7, Options{}, "a:0-1 b:2-3 c:4-6"},
		{"oversubscribed evenly", nodes("a", 2, "b", 2), 8, Options{MaxOversubscribe: 2}, "a:0-3 b:4-7"},
		{"one rank per node", nodes("a", 4, "b", 4, "c", 4), 3, Options{MaxPerNode: 1}, "a:0 b:1 c:2"},
		{"cores to spare", nodes("n1", 4, "n2", 4, "n3", 4, "n4", 4), 8, Options{}, "n1:0-1 n2:2-3 n3:4-5 n4:6-7"},
		{"cores to spare, uneven", nodes("n1", 4, "n2", 4, "n3", 4), 6, Options{}, "n1:0-1 n2:2-3 n3:4-5"},
		{"all on one node, in its shared memory", nodes("n1", 8, "n2", 8), 8, Options{}, "n1:0-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Nodes: tt.nodes, Ranks: tt.ranks, Options: tt.opt}
			plan, err := Choose(in)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, in, plan, tt.name)
			if got := plan.Placement.String(); got != tt.want {
				t.Errorf("Choose = %s, want %s (%s)", got, tt.want, plan.Reason)
			}
			if spread, _ := Spread(tt.nodes, tt.ranks, tt.opt); spread.String() != tt.want && len(spread.Counts()) == len(plan.Placement.Counts()) {
				t.Errorf("Spread = %s, Choose %s", spread, plan.Placement)
			}
			withRing := in
			withRing.Traffic = NeighbourTraffic(tt.ranks)
			if again, _ := Choose(withRing); !reflect.DeepEqual(again, plan) {
				t.Errorf("with the neighbour traffic given: %+v, without: %+v", again, plan)
			}
			t.Logf("%s: %s", plan.Placement, plan.Reason)
		})
	}
}

func TestChooseMissingLinks(t *testing.T) {
	ns := nodes("n1", 2, "n2", 2, "n3", 2, "n4", 2)
	in := Input{Nodes: ns, Ranks: 8, Work: 0.01, Traffic: ringTraffic(8, 1e6), Options: Options{MaxOversubscribe: 2}}
	all := Links{}
	for i := range ns {
		for j := i + 1; j < len(ns); j++ {
			all[NodePair{ns[i].Name, ns[j].Name}] = DefaultLink
		}
	}
	none, _ := Choose(in)
	in.Links = all
	given, _ := Choose(in)
	if !reflect.DeepEqual(none, given) {
		t.Errorf("no links: %+v; every link DefaultLink: %+v", none, given)
	}

	// Only the slow links named: the others are DefaultLink, and the job keeps off them.
	slow := Link{Latency: 5e-3, Bandwidth: 1.25e6}
	in.Links = Links{{"n3", "n1"}: slow, {"n1", "n4"}: slow, {"n2", "n3"}: slow, {"n4", "n2"}: slow}
	plan, err := Choose(in)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, in, plan, "slow links named")
	counts := plan.Placement.Counts()
	if site1, site2 := counts["n1"]+counts["n2"], counts["n3"]+counts["n4"]; site1 > 0 && site2 > 0 {
		t.Errorf("Choose = %s: over a 10 Mbit/s link (%s)", plan.Placement, plan.Reason)
	}
	onlyFast := in
	onlyFast.Links = nil
	if want, _ := Predict(onlyFast, plan.Placement); !near(plan.Cost.Total(), want.Total()) {
		t.Errorf("cost %+v, want %+v: the links it uses are DefaultLink", plan.Cost, want)
	}
}

func TestChooseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		err  error
		msg  string
	}{
		{"no nodes", Input{Ranks: 1}, ErrNoNodes, ""},
		{"no ranks", Input{Nodes: nodes("a", 1)}, ErrBadRankCount, ""},
		{"too few cores", Input{Nodes: nodes("a", 2, "b", 2), Ranks: 5}, ErrTooFewSlots, "5 ranks, 4 slots on 2 nodes"},
		{"one rank per node, too few nodes", Input{Nodes: nodes("a", 4, "b", 4), Ranks: 3, Options: Options{MaxPerNode: 1}}, ErrTooFewSlots, "3 ranks, 2 slots"},
		{"flow to a rank the job lacks", Input{Nodes: nodes("a", 4), Ranks: 2, Traffic: []Flow{{0, 2, 1, 1}}}, ErrBadTraffic, "0 → 2 for 2 ranks"},
		{"negative messages", Input{Nodes: nodes("a", 4), Ranks: 2, Traffic: []Flow{{0, 1, 1, -1}}}, ErrBadTraffic, ""},
		{"node twice", Input{Nodes: nodes("a", 4, "a", 2), Ranks: 2}, ErrDuplicateNode, `"a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Choose(tt.in)
			if !errors.Is(err, tt.err) || !strings.Contains(fmt.Sprint(err), tt.msg) {
				t.Errorf("Choose err = %v, want %v with %q", err, tt.err, tt.msg)
			}
			if _, serr := Spread(tt.in.Nodes, tt.in.Ranks, tt.in.Options); serr != nil && fmt.Sprint(serr) != fmt.Sprint(err) {
				t.Errorf("Choose err = %v, Spread's %v", err, serr)
			}
		})
	}
}

// TestOrdersByDefinition checks the link-greedy orders against their
// definition, on random clusters: each order after the first two starts at
// one node and grows by the first node, in capacity order, whose slowest link
// to the nodes taken is fastest.
func TestOrdersByDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range 100 {
		n := 2 + rng.IntN(20)
		in := Input{Ranks: n, Work: 0.05, Links: Links{}, Traffic: ringTraffic(n, 1e6)}
		for i := range n {
			in.Nodes = append(in.Nodes, Node{Name: fmt.Sprintf("n%02d", i), Cores: []int{1, 2, 4}[rng.IntN(3)], Speed: 1})
		}
		for i := range n {
			for j := i + 1; j < n; j++ {
				// Few distinct latencies: ties, which the order breaks by capacity.
				in.Links[NodePair{in.Nodes[i].Name, in.Nodes[j].Name}] = Link{Latency: float64(1+rng.IntN(3)) * 1e-4, Bandwidth: 1e8}
			}
		}
		m, err := newModel(in)
		if err != nil {
			t.Fatal(err)
		}
		got := m.orders()
		dist := m.messageTimes()
		byCapacity := got[1]
		for k, order := range got[2:] {
			want := []int{order[0]}
			for len(want) < len(byCapacity) {
				next, worst := -1, 0.0
				for _, a := range byCapacity {
					if slices.Contains(want, a) {
						continue
					}
					w := 0.0
					for _, b := range want {
						w = max(w, dist(a, b))
					}
					if next < 0 || w < worst {
						next, worst = a, w
					}
				}
				want = append(want, next)
			}
			if !slices.Equal(order, want) {
				t.Fatalf("round %d, order %d: %v, want %v", round, k+2, order, want)
			}
		}
	}
}
