package main

// shoalbench scalesim puts figures on a cluster of 1,000 to 10,000 nodes from
// one process on this machine (bench/scale-sim runs it; docs/scale.md, "Simulated
// to 10,000 nodes", has a run). Each figure says where it comes from:
//
//	measured      Shoal's own code run here at that size
//	extrapolated  measured at smaller sizes, carried to 5k and 10k by the growth
//	              the cost has (docs/scale.md, "What grows with n today")
//	count         arithmetic on the code's constants, no run
//	model         a fit to the testbed's measurements at 4, 32 and 128 hosts
//
// 1. Membership (measured, extrapolated): n hashicorp/memberlist nodes configured
//    as an agent configures its own (membership.MemberlistConfig of
//    membership.DefaultLANConfig), over memberlist's in-memory transport, counted
//    by a wrapper (simnet.go); gossip unencrypted, as the in-memory transport
//    needs no key (an agent's is AES-GCM: the same packets, a little longer).
//    Each node announces an agent's metadata. Idle for -idle: packets and bytes
//    each node sends, this process's CPU per node, and suspicions and deaths
//    while nothing fails; then the size of one push-pull exchange (ten joins
//    of members, the same exchange: an idle window shorter than the push-pull
//    interval would see a share of them that depends on their phase), whose
//    rate is one a scaled PushPullInterval; then one node is killed and the
//    time until the others declare it dead is measured. The simulation runs in
//    real time: when its CPU nears the machine's cores its probes miss their
//    timeouts and it measures the starvation, not the protocol; it stops there.
//    Shoal's own layer over memberlist (its suspicion rechecks, reconnects, the
//    death confirmation) does not run: what is measured is memberlist's protocol
//    with Shoal's settings.
// 2. The voter plan (measured): jobstore.PlanVoters with n live members.
// 3. Placement (measured): what coord.plan runs for a 10,000-rank job, past the
//    planner's limits: place.Spread; and place.Choose at those limits.
// 4. Link probing (count): links.PerRound probes a round per node.
// 5. The leader's idle CPU (model).
//
//	shoalbench scalesim [-nodes 128,300] [-idle 30s] [-detect 120s] [-seed 1]

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"shoal/internal/jobstore"
	"shoal/internal/links"
	"shoal/internal/membership"
	"shoal/internal/place"
)

// The sizes the figures are given at.
var simSizes = []int{1000, 5000, 10000}

// The testbed's idle measurements that calibrate the model (docs/scale.md,
// "Measured at 128 hosts"): hosts, the leader's share of a core, each other
// agent's.
var idleMeasured = []struct {
	hosts         int
	leader, other float64
}{{4, 0.014, 0.0050}, {32, 0.076, 0.0042}, {128, 0.165, 0.0066}}

// boundedFollowers is the Raft followers the leader has under bounded
// membership (docs/scale.md, "Bounded membership: the design"): 4 other voters
// and 2 standbys.
const boundedFollowers = jobstore.MaxVoters - 1 + 2

// The agent's link probe sizes (internal/agent/links.go, probeSmall and
// probeLarge: the large one follows when the small one took under 50 ms) and
// DefaultLinkInterval.
const (
	probeSmallBytes = 256 << 10
	probeLargeBytes = 4 << 20
	linkInterval    = 5 * time.Minute
)

func scaleSimMain(args []string) int {
	fs := flag.NewFlagSet("scalesim", flag.ContinueOnError)
	nodesFlag := fs.String("nodes", "128,300", "cluster sizes to simulate membership at, ascending")
	idle := fs.Duration("idle", 30*time.Second, "idle window measured at each size")
	detect := fs.Duration("detect", 120*time.Second, "how long to wait for a killed node to be declared dead")
	seed := fs.Int64("seed", 1, "random seed (joins, the node killed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var sizes []int
	for _, v := range strings.Split(*nodesFlag, ",") {
		k, err := strconv.Atoi(v)
		if err != nil || k < 3 || len(sizes) > 0 && k <= sizes[len(sizes)-1] {
			fmt.Fprintf(os.Stderr, "scalesim: -nodes %q: want ascending sizes of at least 3\n", *nodesFlag)
			return 2
		}
		sizes = append(sizes, k)
	}
	rng := rand.New(rand.NewSource(*seed))
	fmt.Printf("scalesim: %d CPUs, load %s, GOMAXPROCS %d\n", runtime.NumCPU(), loadavg(), runtime.GOMAXPROCS(0))
	res := map[string]string{}

	// 1. Membership.
	fmt.Println("\n1. Membership: memberlist v0.7.0 with Shoal's LAN settings over the in-memory transport (unencrypted)")
	var gs []gossipFigures
	stopped := ""
	for _, n := range sizes {
		g, err := simulateGossip(n, *idle, *detect, rng, os.Stdout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scalesim: membership at %d nodes: %v\n", n, err)
			return 1
		}
		printGossip(g)
		if g.load > 0.75*float64(runtime.NumCPU()) || g.falseDeaths > 0 {
			stopped = fmt.Sprintf("stopped at %d nodes: the simulation used %.2f of %d cores and saw %d false deaths; larger runs would measure CPU starvation, not the protocol",
				n, g.load, runtime.NumCPU(), g.falseDeaths)
			gs = append(gs, g)
			break
		}
		gs = append(gs, g)
	}
	if stopped == "" {
		stopped = fmt.Sprintf("largest run %d nodes (-nodes); the next size up was not tried", sizes[len(sizes)-1])
	}
	fmt.Println("  " + stopped)
	base := gs[len(gs)-1]
	for i := len(gs) - 1; i >= 0; i-- { // extrapolate from the largest run that was not starved
		if gs[i].load <= 0.75*float64(runtime.NumCPU()) && gs[i].falseDeaths == 0 {
			base = gs[i]
			break
		}
	}
	c0, c1 := fitCPU(gs)
	fmt.Printf("\n  at 1k/5k/10k (extrapolated from %d nodes unless measured):\n", base.n)
	fmt.Printf("  %-44s %12s %12s %12s  %s\n", "per node", "1k", "5k", "10k", "source")
	row := func(what string, f func(n int) (float64, string), format string) {
		var cells []string
		src := ""
		for _, n := range simSizes {
			v, s := f(n)
			cells = append(cells, fmt.Sprintf(format, v))
			if !strings.Contains(src, s) {
				src += map[bool]string{true: "", false: "/"}[src == ""] + s
			}
		}
		fmt.Printf("  %-44s %12s %12s %12s  %s\n", what, cells[0], cells[1], cells[2], src)
	}
	measuredAt := func(n int) (gossipFigures, bool) {
		for _, g := range gs {
			if g.n == n {
				return g, true
			}
		}
		return gossipFigures{}, false
	}
	packets := func(n int) (float64, string) {
		if g, ok := measuredAt(n); ok {
			return g.packets, "measured"
		}
		return base.packets, "extrapolated O(1)"
	}
	packetBytes := func(n int) (float64, string) {
		if g, ok := measuredAt(n); ok {
			return g.packetBytes, "measured"
		}
		return base.packetBytes, "extrapolated O(1)"
	}
	// Each node starts one exchange a scaled PushPullInterval and answers one
	// on average: it sends, each interval, the bytes of one exchange.
	interval := membership.DefaultLANConfig().PushPullInterval.Seconds()
	streamBytes := func(n int) (float64, string) {
		if g, ok := measuredAt(n); ok {
			return g.exchange / (interval * pushPullScale(n)), "measured size/interval"
		}
		return base.exchange * float64(n) / float64(base.n) / (interval * pushPullScale(n)), "extrapolated O(n) size/interval"
	}
	gossipBytes := func(n int) (float64, string) {
		a, s1 := packetBytes(n)
		b, s2 := streamBytes(n)
		if s1 == s2 {
			return a + b, s1
		}
		if strings.HasPrefix(s1, "measured") && strings.HasPrefix(s2, "measured") {
			return a + b, "measured"
		}
		return a + b, "extrapolated"
	}
	detectAll := func(n int) (float64, string) {
		if g, ok := measuredAt(n); ok && g.detectAll != math.MaxInt64 {
			return g.detectAll.Seconds(), "measured"
		}
		return base.detectAll.Seconds() * math.Log10(float64(n)) / math.Log10(float64(base.n)), "extrapolated log n"
	}
	nodeCPU := func(n int) (float64, string) {
		if g, ok := measuredAt(n); ok {
			return g.cpu, "measured"
		}
		return c0 + c1*float64(n)/pushPullScale(n), "extrapolated fit"
	}
	row("gossip packets sent /s", packets, "%.2f")
	row("gossip packet bytes sent /s", packetBytes, "%.0f")
	row("push-pull bytes sent /s", streamBytes, "%.0f")
	row("memberlist bytes /s, all", gossipBytes, "%.0f")
	row("memberlist CPU, cores (no encryption)", nodeCPU, "%.6f")
	row("a killed node dead at every node, s", detectAll, "%.1f")
	fmt.Printf("  push-pull every %s at 1k, %s at 10k (memberlist scales PushPullInterval %s past 32 nodes); suspicion timeout %s\n",
		time.Duration(pushPullScale(1000)*float64(membership.DefaultLANConfig().PushPullInterval)),
		time.Duration(pushPullScale(10000)*float64(membership.DefaultLANConfig().PushPullInterval)),
		membership.DefaultLANConfig().PushPullInterval, suspicionRange())
	rate := 0.0
	for _, g := range gs {
		rate = float64(g.suspicions) / float64(g.n) / g.window.Hours()
	}
	fmt.Printf("  false suspicions while idle: %.2f per node-hour at %d nodes (measured); cluster-wide O(n): %.0f an hour at 10k (extrapolated)\n",
		rate, gs[len(gs)-1].n, rate*10000)
	v, _ := gossipBytes(10000)
	res["gossip_bytes_s_node_10k"] = fmt.Sprintf("%.0f", v)
	v, _ = streamBytes(10000)
	res["pushpull_bytes_s_node_10k"] = fmt.Sprintf("%.0f", v)
	v, _ = detectAll(1000)
	res["detect_s_1k"] = fmt.Sprintf("%.1f", v)
	v, _ = detectAll(10000)
	res["detect_s_10k"] = fmt.Sprintf("%.1f", v)
	if g, ok := measuredAt(128); ok && g.detectAll != math.MaxInt64 {
		r := v / g.detectAll.Seconds()
		fmt.Printf("  detection at 10k against 128 nodes (target ≤ 2): %.2f\n", r)
		res["detect_10k_vs_128"] = fmt.Sprintf("%.2f", r)
	}
	res["false_suspicions_node_h"] = fmt.Sprintf("%.2f", rate)
	res["sim_nodes_max"] = strconv.Itoa(gs[len(gs)-1].n)

	// 2. The voter plan.
	fmt.Println("\n2. The voter plan: jobstore.PlanVoters (measured)")
	for _, n := range simSizes {
		cold, coldT, steadyT := planVoters(n)
		fmt.Printf("  %5d live members: asks for %d Raft servers; from the leader alone %s, settled %s a reconcile (every second on the leader)\n",
			n, cold, fmtDur(coldT), fmtDur(steadyT))
		if n == 10000 {
			res["raft_servers_10k"] = strconv.Itoa(cold)
			res["plan_voters_10k_s"] = fmt.Sprintf("%.4f", steadyT.Seconds())
		}
	}

	// 3. Placement.
	fmt.Println("\n3. Placement of a 10,000-rank job (measured): past maxPlanRanks/maxPlanNodes coord.plan takes place.Spread")
	for _, n := range simSizes {
		d, err := timeSpread(n, 10000)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scalesim: place.Spread on %d nodes: %v\n", n, err)
			return 1
		}
		fmt.Printf("  %5d nodes: place.Spread %s\n", n, fmtDur(d))
		if n == 10000 {
			res["place_10k_ranks_s"] = fmt.Sprintf("%.4f", d.Seconds())
		}
	}
	if d, err := timeChoose(128, 1024); err == nil {
		fmt.Printf("  the planner's search at its limits, place.Choose of 1,024 ranks on 128 nodes: %s\n", fmtDur(d))
		res["choose_1024_on_128_s"] = fmt.Sprintf("%.3f", d.Seconds())
	} else {
		fmt.Fprintf(os.Stderr, "scalesim: place.Choose: %v\n", err)
	}

	// 4. Link probing.
	fmt.Printf("\n4. Link probing (count): links.PerRound = %d probes a round per node, each %d KiB, or %d KiB + %d MiB on a link faster than 256 KiB in 50 ms; a round every %s and 1 s after any join\n",
		links.PerRound, probeSmallBytes>>10, probeSmallBytes>>10, probeLargeBytes>>20, linkInterval)
	for _, n := range simSizes {
		probes := n * min(n-1, links.PerRound)
		lo, hi := float64(probes*probeSmallBytes), float64(probes*(probeSmallBytes+probeLargeBytes))
		fmt.Printf("  %5d nodes: a round (and what one join costs) %d probes, %.2f to %.1f GB cluster-wide; per node %.1f to %.1f MB fetched and as much served on average; idle %.1f to %.1f kB/s per node each way\n",
			n, probes, lo/1e9, hi/1e9, lo/float64(n)/1e6, hi/float64(n)/1e6, lo/float64(n)/linkInterval.Seconds()/1e3, hi/float64(n)/linkInterval.Seconds()/1e3)
	}
	round := float64(links.PerRound * (probeSmallBytes + probeLargeBytes))
	fmt.Printf("  joins at one a second or more (10,000 phones that come and go): a round a second on every node, %.0f MB/s fetched per node on fast links\n", round/1e6)
	res["link_round_mb_node"] = fmt.Sprintf("%.1f", round/1e6)

	// 5. The leader's idle CPU.
	a, b := fitLeader()
	other := 0.0
	for _, m := range idleMeasured {
		other += m.other / float64(len(idleMeasured))
	}
	fmt.Printf("\n5. The leader's idle CPU (model, not a measurement): leader = a + b·followers fitted to the testbed's %v hosts: a = %.4f, b = %.6f of a core per follower\n",
		[]int{idleMeasured[0].hosts, idleMeasured[1].hosts, idleMeasured[2].hosts}, a, b)
	for _, m := range idleMeasured {
		fmt.Printf("  %4d hosts: measured %.3f, model %.3f\n", m.hosts, m.leader, a+b*float64(m.hosts-1))
	}
	ml128 := c0 + c1*128/pushPullScale(128)
	fmt.Printf("  %-7s %16s %18s %26s\n", "nodes", "unbounded (n−1)", "bounded (6)", "bounded + memberlist growth")
	for _, n := range simSizes {
		unbounded := a + b*float64(n-1)
		bounded := a + b*boundedFollowers
		grown, _ := nodeCPU(n)
		growth := max(0, grown-ml128)
		fmt.Printf("  %-7d %16.3f %18.3f %26.3f\n", n, unbounded, bounded, bounded+growth)
		if n == 10000 {
			res["leader_cpu_10k_unbounded"] = fmt.Sprintf("%.2f", unbounded)
			res["leader_cpu_10k_bounded"] = fmt.Sprintf("%.3f", bounded+growth)
		}
	}
	fmt.Printf("  each other agent (unbounded): %.4f of a core (the measured mean, flat from 4 to 128 hosts); a bounded client: its memberlist share, %.5f at 10k here (no encryption) plus what the 4- to 128-host figures hold of it\n",
		other, c0+c1*10000/pushPullScale(10000))
	fmt.Println("  'bounded + memberlist growth' adds what the simulation's memberlist costs a node at n beyond 128 (extrapolated fit)")

	keys := []string{"leader_cpu_10k_bounded", "leader_cpu_10k_unbounded", "gossip_bytes_s_node_10k", "detect_s_1k", "place_10k_ranks_s",
		"pushpull_bytes_s_node_10k", "detect_s_10k", "detect_10k_vs_128", "false_suspicions_node_h", "sim_nodes_max", "raft_servers_10k",
		"plan_voters_10k_s", "choose_1024_on_128_s", "link_round_mb_node"}
	var pairs []string
	for _, k := range keys {
		if v, ok := res[k]; ok {
			pairs = append(pairs, k+"="+v)
		}
	}
	fmt.Println("RESULT " + strings.Join(pairs, " "))
	return 0
}

func printGossip(g gossipFigures) {
	fmt.Printf("  n=%d (measured, %s idle): per node per second %.2f packets, %.0f packet bytes, %.3f streams, %.0f stream bytes; CPU %.6f of a core per node (%.2f cores in all); %d suspicions, %d deaths while idle\n",
		g.n, g.window, g.packets, g.packetBytes, g.streams, g.streamBytes, g.cpu, g.load, g.suspicions, g.falseDeaths)
	fmt.Printf("  n=%d one push-pull exchange: %.0f bytes both ways (%.0f a node)\n", g.n, g.exchange, g.exchange/float64(g.n))
	fmt.Printf("  n=%d killed node declared dead: first %s, median %s, all %s (%d of %d)\n",
		g.n, fmtDetect(g.detectFirst), fmtDetect(g.detectMedian), fmtDetect(g.detectAll), g.seen, g.n-1)
}

func fmtDetect(d time.Duration) string {
	if d == math.MaxInt64 {
		return "not within -detect"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// pushPullScale is memberlist v0.7.0's multiplier of PushPullInterval for n
// nodes (util.go, pushPullScale): 1 up to 32 nodes, then ⌈log2 n − 5⌉ + 1.
func pushPullScale(n int) float64 {
	if n <= 32 {
		return 1
	}
	return math.Ceil(math.Log2(float64(n))-5) + 1
}

// suspicionRange is the suspicion timeout at 1k and 10k nodes.
func suspicionRange() string {
	c := membership.DefaultLANConfig()
	lo1, hi1 := c.SuspicionTimeout(1000)
	lo10, hi10 := c.SuspicionTimeout(10000)
	return fmt.Sprintf("%s to %s at 1k, %s to %s at 10k", lo1, hi1, lo10, hi10)
}

// fitCPU fits a node's memberlist CPU to c0 + c1·n/pushPullScale(n) by least
// squares over the runs: probes cost the same at any n, the state exchanged
// grows as n and comes every scale(n) intervals.
func fitCPU(gs []gossipFigures) (c0, c1 float64) {
	var xs, ys []float64
	for _, g := range gs {
		xs = append(xs, float64(g.n)/pushPullScale(g.n))
		ys = append(ys, g.cpu)
	}
	return fitLine(xs, ys)
}

// fitLeader fits the leader's measured idle CPU to a + b·(hosts − 1).
func fitLeader() (a, b float64) {
	var xs, ys []float64
	for _, m := range idleMeasured {
		xs = append(xs, float64(m.hosts-1))
		ys = append(ys, m.leader)
	}
	return fitLine(xs, ys)
}

// fitLine is the least-squares line y = a + b·x; with one point, a = y.
func fitLine(xs, ys []float64) (a, b float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	if d := n*sxx - sx*sx; d != 0 {
		b = (n*sxy - sx*sy) / d
	}
	return (sy - b*sx) / n, b
}

// planVoters times jobstore.PlanVoters with n live members: from a
// configuration of the leader alone (it returns how many servers the plan
// leaves), and settled (the servers it wants, 5 voting), as the leader runs it
// every second. Each time is the median of several calls.
func planVoters(n int) (servers int, cold, settled time.Duration) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	members := make([]jobstore.Member, n)
	var all []jobstore.Server
	for i := range members {
		name := fmt.Sprintf("n%05d", i+1)
		addr := fmt.Sprintf("10.%d.%d.%d:7948", i>>16&255, i>>8&255, i&255)
		members[i] = jobstore.Member{Name: name, Raft: addr, Alive: true, Since: t0.Add(time.Duration(i) * time.Second)}
		if i < jobstore.VoterTarget(n)+jobstore.MaxStandbys {
			all = append(all, jobstore.Server{Name: name, Addr: addr, Voter: i < jobstore.VoterTarget(n)})
		}
	}
	leader := members[0].Name
	alone := []jobstore.Server{{Name: leader, Addr: members[0].Raft, Voter: true}}
	changes := jobstore.PlanVoters(alone, members, leader)
	servers = len(alone)
	for _, c := range changes {
		switch c.Kind {
		case jobstore.AddNonvoter:
			servers++
		case jobstore.Remove:
			servers--
		}
	}
	return servers, medianTime(5, func() { jobstore.PlanVoters(alone, members, leader) }),
		medianTime(5, func() { jobstore.PlanVoters(all, members, leader) })
}

// simNodes is n nodes of 4, 8, 16 and 32 cores in turn at speeds 1 to 1.3.
func simNodes(n int) []place.Node {
	ns := make([]place.Node, n)
	for i := range ns {
		ns[i] = place.Node{Name: fmt.Sprintf("n%05d", i+1), Arch: "amd64", Cores: 4 << (i % 4), Speed: 1 + float64(i%7)/20}
	}
	return ns
}

func timeSpread(n, ranks int) (time.Duration, error) {
	nodes := simNodes(n)
	if _, err := place.Spread(nodes, ranks, place.Options{}); err != nil {
		return 0, err
	}
	return medianTime(5, func() { place.Spread(nodes, ranks, place.Options{}) }), nil
}

func timeChoose(n, ranks int) (time.Duration, error) {
	in := place.Input{Nodes: simNodes(n), Ranks: ranks}
	start := time.Now()
	_, err := place.Choose(in)
	return time.Since(start), err
}

// medianTime runs f k times and returns the median time of one.
func medianTime(k int, f func()) time.Duration {
	ds := make([]time.Duration, k)
	for i := range ds {
		start := time.Now()
		f()
		ds[i] = time.Since(start)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[k/2]
}
