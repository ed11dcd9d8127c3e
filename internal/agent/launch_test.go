package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/membership"
	"shoal/test/poll"
)

// fakeOrted writes a script named orted that runs its first argument with sh,
// and returns its path: an agent accepts it as a daemon only when its
// Config.ExtraDaemons names it.
func fakeOrted(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "orted")
	if err := os.WriteFile(p, []byte("#!/bin/sh\neval \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentServesLaunchesAndFences: an agent with no coordinator plugged in
// serves grants and launches, and kills a job's daemon when the job's
// coordinator node dies, and what it launched when it stops.
func TestAgentServesLaunchesAndFences(t *testing.T) {
	orted := fakeOrted(t)
	agents := startClusterWith(t, 3, func(c *Config) { c.ExtraDaemons = []string{orted} })
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive n3=alive"))
	n2 := agents[1]
	c := api.NewClient(n2.LocalAPIAddr(), n2.Secret())
	ctx := context.Background()

	if _, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: []string{orted, "'sleep 300'"}}); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("launch without a grant: error %v, want ErrNotFound", err)
	}
	// j1 is coordinated by n3, j2 by n1.
	if _, err := c.Grant(ctx, api.GrantRequest{Job: "j1", Coordinator: "n3", Ranks: 1, TTL: job.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.Launcher().Grant("j2", "n1", 1, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	// A JobService plugged in later does not take launches away.
	n2.SetJobService(nil)
	var conns []io.ReadWriteCloser
	for _, job := range []string{"j1", "j2"} {
		conn, err := c.Launch(ctx, api.LaunchRequest{Job: job, Argv: []string{orted, "'sleep 300'"}})
		if err != nil {
			t.Fatalf("launch %s: %v", job, err)
		}
		conns = append(conns, conn)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	running := func(job string, want int) func() string {
		return func() string {
			if n := n2.Launcher().Running(job); n != want {
				return fmt.Sprintf("%s: %d launches running on n2, want %d", job, n, want)
			}
			return ""
		}
	}
	poll.Until(t, 5*time.Second, running("j1", 1))
	poll.Until(t, 5*time.Second, running("j2", 1))

	agents[2].Shutdown() // n3 dies: n2 must fence j1, and only j1
	poll.Until(t, 10*time.Second, running("j1", 0))
	if n := n2.Launcher().Running("j2"); n != 1 {
		t.Errorf("j2 (coordinated by n1, alive): %d running on n2, want 1", n)
	}
	n2.Shutdown()
	if n := n2.Launcher().Running("j2"); n != 0 {
		t.Errorf("after n2 stopped: j2 has %d launches running, want 0", n)
	}
}

// TestRanksAnnounced: the ranks a node's launch grants give it show in every
// node's list, whoever coordinates the job, and go back to 0 when the grants
// are revoked, or when their coordinator dies.
func TestRanksAnnounced(t *testing.T) {
	agents := startCluster(t, 3)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive n3=alive"))
	ctx := context.Background()
	ranks := func(want string) func() string {
		return func() string {
			for _, a := range agents {
				nodes, err := a.Nodes(ctx)
				if err != nil {
					return err.Error()
				}
				var got []string
				for _, n := range nodes {
					if n.State == "alive" {
						got = append(got, fmt.Sprintf("%s=%d", n.Name, n.Ranks))
					}
				}
				if s := strings.Join(got, " "); s != want {
					return fmt.Sprintf("%s sees ranks %q, want %q", a.Name(), s, want)
				}
			}
			return ""
		}
	}
	grant := func(a *Agent, id, coordinator string, n int) {
		t.Helper()
		if _, err := api.NewClient(a.LocalAPIAddr(), a.Secret()).Grant(ctx, api.GrantRequest{Job: id, Coordinator: coordinator, Ranks: n, TTL: job.Duration(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	grant(agents[0], "j1", "n1", 2) // j1: 2 ranks on n1, 3 on n2
	grant(agents[1], "j1", "n1", 3)
	grant(agents[1], "j2", "n3", 1) // j2, coordinated by n3: 1 more on n2
	poll.Until(t, RanksSettle+5*time.Second, ranks("n1=2 n2=4 n3=0"))
	if _, err := agents[1].Launcher().Revoke("j1"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, RanksSettle+5*time.Second, ranks("n1=2 n2=1 n3=0"))
	agents[2].Shutdown() // j2's coordinator dies: n2 fences j2
	agents = agents[:2]
	poll.Until(t, RanksSettle+15*time.Second, ranks("n1=2 n2=0"))
}

// TestRelaunchAnnouncesNothing: a coordinator's relaunch revokes and grants a
// node again, usually with the same ranks; within RanksSettle that reaches
// nobody by gossip, so a launch over N nodes does not flood all N with
// metadata updates.
func TestRelaunchAnnouncesNothing(t *testing.T) {
	agents := startCluster(t, 2)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive"))
	sub := agents[0].Membership().Subscribe()
	defer sub.Close()
	l := agents[1].Launcher()
	l.Grant("j1", "n1", 2, time.Minute, nil)
	poll.Until(t, 5*time.Second, func() string {
		nodes, _ := agents[0].Nodes(context.Background())
		for _, n := range nodes {
			if n.Name == "n2" && n.Ranks != 2 {
				return fmt.Sprintf("n1 sees n2 with %d ranks, want 2", n.Ranks)
			}
		}
		return ""
	})
	updates := func() int {
		n := 0
		for {
			select {
			case ev := <-sub.C:
				if ev.Type == membership.EventUpdate && ev.Node.Name == "n2" {
					n++
				}
			default:
				return n
			}
		}
	}
	updates()
	l.Revoke("j1") // the relaunch: fence, stage, grant the same ranks
	time.Sleep(250 * time.Millisecond)
	l.Grant("j1", "n1", 2, time.Minute, nil)
	time.Sleep(RanksSettle + time.Second)
	if n := updates(); n != 0 {
		t.Errorf("n2 announced %d metadata updates for a revoke and grant of the same ranks, want 0", n)
	}
}

// TestRanksAnnouncedWhenSettled: grants that change again within RanksSettle
// (one short job after another) are announced once, after they stop changing,
// and with the last count: never in the middle of a launch.
func TestRanksAnnouncedWhenSettled(t *testing.T) {
	agents := startCluster(t, 2)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive"))
	sub := agents[0].Membership().Subscribe()
	defer sub.Close()
	var updates []int
	drain := func() {
		for {
			select {
			case ev := <-sub.C:
				if ev.Type == membership.EventUpdate && ev.Node.Name == "n2" {
					updates = append(updates, ev.Node.Meta.Ranks)
				}
			default:
				return
			}
		}
	}
	l := agents[1].Launcher()
	step := RanksSettle * 2 / 3
	l.Grant("j1", "n1", 2, time.Minute, nil)
	time.Sleep(step)
	l.Grant("j2", "n1", 1, time.Minute, nil)
	time.Sleep(step)
	l.Revoke("j1") // 1 rank left, RanksSettle*4/3 after the first change
	time.Sleep(step)
	drain()
	if len(updates) != 0 {
		t.Fatalf("n2 announced %v while its grants were still changing, want nothing yet", updates)
	}
	poll.Until(t, RanksSettle+5*time.Second, func() string {
		drain()
		if len(updates) == 0 {
			return "n2 has announced nothing"
		}
		return ""
	})
	time.Sleep(time.Second)
	drain()
	if !slices.Equal(updates, []int{1}) {
		t.Errorf("n2 announced ranks %v, want [1]: one announcement, of the settled count", updates)
	}
}

func TestSettleWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		since time.Duration // from the first change to now
		want  time.Duration
	}{
		{0, RanksSettle},
		{RanksMaxWait - RanksSettle, RanksSettle},
		{RanksMaxWait - time.Second, time.Second},
		{RanksMaxWait, 0},
		{RanksMaxWait + time.Minute, 0},
	} {
		if got := settleWait(t0, t0.Add(c.since)); got != c.want {
			t.Errorf("settleWait %v after the first change = %v, want %v", c.since, got, c.want)
		}
	}
}
