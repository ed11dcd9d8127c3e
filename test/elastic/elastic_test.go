// Package elastic runs elastic jobs (shoal run --min-ranks/--max-ranks) on the
// testbed: the rank count follows the hosts as they are killed and added, and
// every run ends with the checksum of an uninterrupted run. The tests share one
// testbed (instance 239) of hosts of 2, 2 and 3 cores, the scenario Shoal was
// built for; each test kills hosts and adds others, in order.
package elastic

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
	"shoal/test/watch"
)

var bed = &testenv.Shared{Config: testbed.Config{Nodes: 3, Cores: []int{2, 2, 3}, Instance: 239}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// heatArgs is a run of about 10 s at its pace on any count: long enough to
// lose or add a host after its first epochs and still have work left.
var heatArgs = []string{"--size", "420", "--steps", "4000", "--pace", "2500"}

var (
	referenceOnce sync.Once
	reference     string
	referenceErr  string
)

// wantChecksum is heat's checksum from an uninterrupted run of heatArgs on
// this machine, on 2 ranks: the same on any count.
func wantChecksum(t *testing.T) string {
	t.Helper()
	referenceOnce.Do(func() {
		p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, testenv.Built(t, "bin/shoal"),
			"run", "-n", "2", "--ckpt-interval", "0", "--", testenv.Built(t, "build/examples/heat"), "--size", "420", "--steps", "4000")
		if code := p.Wait(3 * time.Minute); code != 0 {
			referenceErr = fmt.Sprintf("the reference run exited %d:\n%s", code, p.Output())
			return
		}
		if reference = watch.Field(p.Output(), "checksum"); reference == "" {
			referenceErr = "the reference run printed no checksum:\n" + p.Output()
		}
	})
	if referenceErr != "" {
		t.Fatal(referenceErr)
	}
	return reference
}

// run starts an elastic heat from host n1 with flags.
func run(t *testing.T, b *testbed.Bed, flags ...string) *watch.Proc {
	t.Helper()
	args := append([]string{testenv.Built(t, "bin/shoal"), "run", "--ckpt-interval", "500ms", "--no-replan"}, flags...)
	args = append(append(args, "--", testenv.Built(t, "build/examples/heat")), heatArgs...)
	cmd, err := b.Command(context.Background(), "n1", args...)
	if err != nil {
		t.Fatal(err)
	}
	return watch.Start(t, cmd)
}

// finishes waits for p to exit 0 and checks its checksum.
func finishes(t *testing.T, p *watch.Proc) string {
	t.Helper()
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("shoal run exited %d", code)
	}
	out := p.Output()
	if got, want := watch.Field(out, "checksum"), wantChecksum(t); got != want {
		t.Errorf("checksum %q, want the uninterrupted run's %q", got, want)
	}
	return out
}

// nodes is what host n1 says of the nodes: name → state.
func nodes(t *testing.T, b *testbed.Bed) map[string]string {
	t.Helper()
	states := map[string]string{}
	for name, n := range nodeViews(t, b) {
		states[name] = n.State
	}
	return states
}

// nodeView is what `shoal nodes --json` says of one node.
type nodeView struct {
	State string
	Ranks int
}

// nodeViews is what host n1 says of the nodes, by name (none when it cannot say).
func nodeViews(t *testing.T, b *testbed.Bed) map[string]nodeView {
	t.Helper()
	out, err := b.Exec(context.Background(), "n1", testenv.Built(t, "bin/shoal"), "nodes", "--json")
	if err != nil {
		return nil
	}
	var list struct {
		Nodes []struct {
			Name string
			nodeView
		}
	}
	json.Unmarshal(out, &list)
	views := map[string]nodeView{}
	for _, n := range list.Nodes {
		views[n.Name] = n.nodeView
	}
	return views
}

// alive waits until n1 sees exactly the hosts named alive.
func alive(t *testing.T, b *testbed.Bed, want ...string) {
	t.Helper()
	poll.Until(t, time.Minute, func() string {
		states := nodes(t, b)
		var live []string
		for name, state := range states {
			if state == "alive" {
				live = append(live, name)
			}
		}
		if len(live) != len(want) {
			return fmt.Sprintf("alive: %v, want %v", states, want)
		}
		for _, w := range want {
			if states[w] != "alive" {
				return fmt.Sprintf("alive: %v, want %v", states, want)
			}
		}
		return ""
	})
}

// add adds a host of cores cores and returns its name.
func add(t *testing.T, b *testbed.Bed, cores int) string {
	t.Helper()
	h, err := b.Add(context.Background(), testbed.HostConfig{Cores: cores})
	if err != nil {
		t.Fatalf("add a host of %d cores: %v", cores, err)
	}
	return h.Name
}

// The 3-core host of 2 + 2 + 3 is killed: the job, one rank per core, shrinks
// from 7 to 4 ranks on the 4 cores left, and ends with the uninterrupted
// run's checksum.
func TestShrinkOnHostLoss(t *testing.T) {
	wantChecksum(t) // before the testbed loads the machine
	b := bed.Up(t)
	alive(t, b, "n1", "n2", "n3")
	p := run(t, b, "--min-ranks", "2", "--max-ranks", "16")
	p.WaitLine(`launching 7 ranks \(one per core on n1, n2, n3\) on 3 nodes`, time.Minute)
	p.WaitLine(`epoch 2 complete`, time.Minute)
	if _, err := b.Kill(context.Background(), "n3"); err != nil {
		t.Fatal(err)
	}
	m := p.WaitLine(`node n3 lost \([^)]*\): shrinking from 7 to 4 ranks \(one per core on n1, n2\), from epoch (\d+)`, time.Minute)
	p.WaitLine(`restarting 4 ranks from epoch `+m[1]+` on 2 nodes`, time.Minute)
	// The lost host runs nothing now, whatever it announced last.
	poll.Until(t, 10*time.Second, func() string {
		if n3 := nodeViews(t, b)["n3"]; n3.State != "dead" || n3.Ranks != 0 {
			return fmt.Sprintf("n1 shows n3 %s with %d ranks, want dead with 0", n3.State, n3.Ranks)
		}
		return ""
	})
	out := finishes(t, p)
	if !regexp.MustCompile(`epoch \d+'s 7 shards are on the resized run's nodes`).MatchString(out) {
		t.Errorf("no line says the 7 old shards were brought to the new run's nodes:\n%s", out)
	}
}

// A host joins a job that runs one rank per core: it grows onto it (the
// rebalance rule, on by default for an elastic job) and ends with the
// uninterrupted run's checksum.
func TestGrowOnJoin(t *testing.T) {
	wantChecksum(t)
	b := bed.Up(t)
	live := liveHosts(t, b)
	if len(live) < 2 {
		t.Fatalf("too few hosts alive: %v", live)
	}
	// Two hosts of 2 cores: n1 and n2.
	for _, h := range live {
		if h != "n1" && h != "n2" {
			b.Kill(context.Background(), h)
		}
	}
	alive(t, b, "n1", "n2")
	p := run(t, b, "--max-ranks", "8")
	p.WaitLine(`launching 4 ranks \(one per core on n1, n2\) on 2 nodes`, time.Minute)
	p.WaitLine(`epoch 2 complete`, time.Minute)
	joined := add(t, b, 3)
	p.WaitLine(fmt.Sprintf(`node %s available: a relaunch as 7 ranks, .*; rebalancing`, joined), time.Minute)
	p.WaitLine(fmt.Sprintf(`rebalancing onto %s: growing from 4 to 7 ranks \(one per core on n1, n2, %s\), from epoch \d+`, joined, joined), time.Minute)
	p.WaitLine(`launching 7 ranks`, time.Minute)
	finishes(t, p)
}

// A program that protects a plain per-rank region (nqueens' cursor) cannot
// change its count: run elastic, it fails at once, saying so.
func TestPerRankRegionRefused(t *testing.T) {
	b := bed.Up(t)
	cmd, err := b.Command(context.Background(), "n1", testenv.Built(t, "bin/shoal"), "run", "--min-ranks", "2", "--max-ranks", "4", "--",
		testenv.Built(t, "build/examples/nqueens"), "10")
	if err != nil {
		t.Fatal(err)
	}
	p := watch.Start(t, cmd)
	if code := p.Wait(time.Minute); code == 0 {
		t.Fatalf("an elastic nqueens succeeded:\n%s", p.Output())
	}
	if out := p.Output(); !strings.Contains(out, "per-rank region") {
		t.Errorf("nothing says the per-rank region is refused:\n%s", out)
	}
}

// Two hosts killed at once, with the checkpoints kept as Reed–Solomon parity
// (rs:2+2): the shards they held are rebuilt, and the job shrinks onto the
// cores left.
func TestShrinkWithParityAfterTwoLosses(t *testing.T) {
	wantChecksum(t) // before the testbed loads the machine
	b := bed.Up(t)
	for len(liveHosts(t, b)) < 5 {
		add(t, b, 1)
	}
	live := liveHosts(t, b)
	alive(t, b, live...)
	p := run(t, b, "--min-ranks", "2", "--max-ranks", "6", "--redundancy", "rs:2+2")
	layout := p.WaitLine(`launching 6 ranks \([^)]*\) on \d+ nodes \(([^)]*)\)`, time.Minute)[1]
	p.WaitLine(`epoch 2 complete`, time.Minute)
	var victims []string
	for _, part := range strings.Fields(layout) {
		if h, _, _ := strings.Cut(part, ":"); h != "n1" && len(victims) < 2 {
			victims = append(victims, h)
		}
	}
	if len(victims) < 2 {
		t.Fatalf("fewer than two hosts but n1 hold ranks: %s", layout)
	}
	for _, v := range victims {
		if _, err := b.Kill(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	p.WaitLine(`: shrinking from 6 to \d ranks \(`, 2*time.Minute)
	out := finishes(t, p)
	if !strings.Contains(out, "rebuilt from parity") {
		t.Errorf("no shard was rebuilt from parity after losing %v:\n%s", victims, out)
	}
}

// liveHosts are the testbed's hosts whose processes run.
func liveHosts(t *testing.T, b *testbed.Bed) []string {
	t.Helper()
	status, _, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range status {
		if s.AgentAlive {
			out = append(out, s.Name)
		}
	}
	return out
}
