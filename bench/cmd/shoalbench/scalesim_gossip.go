package main

// The membership part of shoalbench scalesim: n memberlist nodes in this
// process, configured as Shoal's agents configure theirs
// (membership.MemberlistConfig of membership.DefaultLANConfig), over simNet.

import (
	"fmt"
	"io"
	"log"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"

	"shoal/internal/membership"
)

// gossipFigures is what one simulated cluster of n nodes measured.
type gossipFigures struct {
	n int
	// settle is how long until every node saw all n alive.
	settle time.Duration
	// Per node per second over the idle window.
	packets, packetBytes, streams, streamBytes float64
	// cpu is this process's CPU time per node per second over the idle window,
	// in cores; load its CPU time per wall second (of the machine's cores).
	cpu, load float64
	// suspicions and falseDeaths: memberlist's "Suspect … has failed" lines and
	// deaths of live nodes, in the idle window.
	suspicions, falseDeaths int
	window                  time.Duration
	// exchange is the bytes of one push-pull state exchange, both ways.
	exchange float64
	// detectFirst, detectMedian, detectAll: a killed node declared dead by the
	// first live node, half of them, all of them; seen how many did.
	detectFirst, detectMedian, detectAll time.Duration
	seen                                 int
}

// simNode is one simulated node: its memberlist and what it saw.
type simNode struct {
	name string
	t    *simTransport
	ml   *memberlist.Memberlist
}

// simEvents records, for every node, when it saw the watched node die.
type simEvents struct {
	node    string
	watched atomic.Pointer[string]
	mu      *sync.Mutex
	deaths  map[string]time.Time // observer → first time it saw the watched node dead
	all     *atomic.Int64        // deaths of any node, seen by any node
}

func (e *simEvents) NotifyJoin(*memberlist.Node)   {}
func (e *simEvents) NotifyUpdate(*memberlist.Node) {}
func (e *simEvents) NotifyLeave(n *memberlist.Node) {
	e.all.Add(1)
	if w := e.watched.Load(); w != nil && *w == n.Name {
		e.mu.Lock()
		if _, ok := e.deaths[e.node]; !ok {
			e.deaths[e.node] = time.Now()
		}
		e.mu.Unlock()
	}
}

// simDelegate announces a Shoal agent's metadata and nothing else, as
// membership's delegate does (no user messages, no local state).
type simDelegate struct{ meta []byte }

func (d simDelegate) NodeMeta(int) []byte                 { return d.meta }
func (d simDelegate) NotifyMsg([]byte)                    {}
func (d simDelegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (d simDelegate) LocalState(bool) []byte              { return nil }
func (d simDelegate) MergeRemoteState(buf []byte, _ bool) {}

// suspectCounter counts memberlist's "Suspect X has failed" log lines, the
// ones membership's log sink turns into suspect events.
// The first few of memberlist's errors go to stderr.
type suspectCounter struct{ n, errs atomic.Int64 }

func (s *suspectCounter) Write(p []byte) (int, error) {
	s.n.Add(int64(strings.Count(string(p), "has failed, no acks received")))
	if strings.Contains(string(p), "[ERR]") && s.errs.Add(1) <= 10 {
		os.Stderr.Write(p)
	}
	return len(p), nil
}

// agentMeta is what a typical agent announces: its API and Raft addresses, 8
// cores, a speed, amd64/linux, a label.
func agentMeta(i int) []byte {
	b, err := membership.Meta{
		API: fmt.Sprintf("10.%d.%d.%d:7947", i>>16&255, i>>8&255, i&255), Cores: 8, Speed: 812345678,
		Arch: "amd64", OS: "linux", Labels: map[string]string{"site": "lab"},
		Raft: fmt.Sprintf("10.%d.%d.%d:7948", i>>16&255, i>>8&255, i&255),
	}.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// simulateGossip runs n nodes: they join, settle, stay idle for window while
// their traffic, CPU and suspicions are counted, then one is killed and the
// time until the others declare it dead is measured (up to detectFor).
func simulateGossip(n int, window, detectFor time.Duration, rng *rand.Rand, progress io.Writer) (gossipFigures, error) {
	f := gossipFigures{n: n, window: window}
	sn := newSimNet()
	nodes := make([]*simNode, n)
	for i := range nodes {
		name := fmt.Sprintf("n%05d", i+1)
		nodes[i] = &simNode{name: name, t: sn.add(name)}
	}
	var mu sync.Mutex
	deaths := map[string]time.Time{}
	var allDeaths atomic.Int64
	suspects := &suspectCounter{}
	events := make([]*simEvents, n)
	stop := make(chan struct{})
	defer func() {
		close(stop)
		var wg sync.WaitGroup
		for _, nd := range nodes {
			if nd.ml != nil {
				wg.Add(1)
				go func() { defer wg.Done(); nd.ml.Shutdown() }()
			}
		}
		wg.Wait()
	}()
	for i, nd := range nodes {
		cfg := membership.DefaultLANConfig()
		cfg.Name = nd.name
		cfg.Secret = nil // unencrypted: the in-memory transport has no eavesdropper
		mc, err := membership.MemberlistConfig(cfg)
		if err != nil {
			return f, err
		}
		mc.Transport = nd.t
		mc.Logger = log.New(suspects, "", 0)
		events[i] = &simEvents{node: nd.name, mu: &mu, deaths: deaths, all: &allDeaths}
		mc.Delegate = simDelegate{meta: agentMeta(i)}
		mc.Events = events[i]
		if nd.ml, err = memberlist.Create(mc); err != nil {
			return f, fmt.Errorf("node %s: %w", nd.name, err)
		}
	}
	// Each node joins through the first, 16 at a time, then exchanges state
	// with it once more, so that every node knows every other from the start:
	// joins through random nodes leave 1,000 nodes to learn of each other by
	// gossip alone, n joins retransmitted O(log n) times by each of n nodes,
	// which this machine cannot carry in real time. A join whose exchange
	// times out (a starved responder) is tried through other nodes, up to four times.
	start := time.Now()
	var joinErr atomic.Pointer[error]
	var retried atomic.Int64
	first := nodes[0].t.addr
	for range 2 {
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		for _, nd := range nodes[1:] {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				var err error
				via := first
				for k := range 5 {
					if _, err = nd.ml.Join([]string{via}); err == nil {
						return
					}
					if k < 4 {
						retried.Add(1)
					}
					mu.Lock()
					via = nodes[rng.Intn(n)].t.addr
					mu.Unlock()
				}
				joinErr.Store(&err)
			}()
		}
		wg.Wait()
	}
	if e := joinErr.Load(); e != nil {
		return f, fmt.Errorf("join: %w", *e)
	}
	// Settled: every node sees all n; then the joins' gossip has stopped.
	for {
		least := n
		for _, nd := range nodes {
			least = min(least, nd.ml.NumMembers())
		}
		if least == n {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return f, fmt.Errorf("not settled after 10 min: a node sees %d of %d", least, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.settle = time.Since(start)
	fmt.Fprintf(progress, "  n=%d: all nodes see %d alive after %.1f s (%d joins tried again); idle for %s\n", n, n, f.settle.Seconds(), retried.Load(), window)
	sum := func() (s [4]int64) {
		for _, nd := range nodes {
			c := nd.t.counts.snapshot()
			for k := range s {
				s[k] += c[k]
			}
		}
		return s
	}
	// Quiet: the joins' alive messages are retransmitted until their queues
	// drain; idle is when a node sends no more than its probes (a ping and an
	// ack a second) and a little.
	quietFrom := time.Now()
	for {
		p0 := sum()[0]
		time.Sleep(5 * time.Second)
		rate := float64(sum()[0]-p0) / float64(n) / 5
		if rate <= 2.5 || time.Since(quietFrom) > 5*time.Minute {
			fmt.Fprintf(progress, "  n=%d: %.1f packets a node a second %.0f s after settling\n", n, rate, time.Since(quietFrom).Seconds())
			break
		}
	}
	before, cpu0, sus0, dead0, t0 := sum(), cpuTime(), suspects.n.Load(), allDeaths.Load(), time.Now()
	time.Sleep(window)
	after, cpu1, sus1, dead1, t1 := sum(), cpuTime(), suspects.n.Load(), allDeaths.Load(), time.Now()
	secs := t1.Sub(t0).Seconds()
	per := func(k int) float64 { return float64(after[k]-before[k]) / float64(n) / secs }
	f.packets, f.packetBytes, f.streams, f.streamBytes = per(0), per(1), per(2), per(3)
	f.load = (cpu1 - cpu0).Seconds() / secs
	f.cpu = f.load / float64(n)
	f.suspicions, f.falseDeaths = int(sus1-sus0), int(dead1-dead0)

	// A window shorter than the push-pull interval (3 min at 1,000 nodes) sees
	// a share of the exchanges that depends on their phase; so the size of
	// one is measured apart: a join of a member is the same exchange.
	const exchanges = 10
	s0 := sum()
	for range exchanges {
		a, b := nodes[rng.Intn(n)], nodes[rng.Intn(n)]
		if a == b {
			continue
		}
		if _, err := a.ml.Join([]string{b.t.addr}); err != nil {
			fmt.Fprintf(progress, "  n=%d: push-pull of %s with %s: %v\n", n, a.name, b.name, err)
		}
	}
	s1 := sum()
	if s1[2] > s0[2] {
		f.exchange = float64(s1[3]-s0[3]) / float64(s1[2]-s0[2])
	}

	// A node dies.
	victim := nodes[1+rng.Intn(n-1)]
	for _, e := range events {
		e.watched.Store(&victim.name)
	}
	killed := time.Now()
	victim.t.kill()
	go victim.t.drain(stop)
	victim.ml.Shutdown()
	victim.ml = nil
	deadline := killed.Add(detectFor)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(deaths)
		mu.Unlock()
		if k >= n-1 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	var ds []time.Duration
	for _, at := range deaths {
		ds = append(ds, at.Sub(killed))
	}
	mu.Unlock()
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	f.seen = len(ds)
	nan := time.Duration(math.MaxInt64)
	f.detectFirst, f.detectMedian, f.detectAll = nan, nan, nan
	if len(ds) > 0 {
		f.detectFirst = ds[0]
		if len(ds) > (n-1)/2 { // the median of all n−1, the unseen counted as later
			f.detectMedian = ds[(n-1)/2]
		}
		if len(ds) == n-1 {
			f.detectAll = ds[len(ds)-1]
		}
	}
	return f, nil
}
