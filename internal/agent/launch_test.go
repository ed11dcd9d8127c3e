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

// TestRanksFromStore: every node's list shows the ranks the job store's
// jobs that have not ended place on each node, whoever coordinates them, on a
// client as on a server; a job that ends gives its ranks back, and a node that
// is gone shows none.
func TestRanksFromStore(t *testing.T) {
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
					got = append(got, fmt.Sprintf("%s=%d", n.Name, n.Ranks))
				}
				slices.Sort(got)
				if s := strings.Join(got, " "); s != want {
					return fmt.Sprintf("%s sees ranks %q, want %q", a.Name(), s, want)
				}
			}
			return ""
		}
	}
	store := agents[0].Store()
	submit := func(j job.Job) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() string {
			if err := store.Submit(j, nil); err != nil {
				return err.Error()
			}
			return ""
		})
	}
	j1 := job.Job{ID: "j1", State: job.Running, Coordinator: "n1", Placement: map[string][]int{"n1": {0, 1}, "n2": {2, 3, 4}}}
	submit(j1)
	submit(job.Job{ID: "j2", State: job.Staging, Coordinator: "n3", Placement: map[string][]int{"n2": {0}, "n3": {1}}})
	submit(job.Job{ID: "waiting", State: job.Pending})
	submit(job.Job{ID: "old", State: job.Succeeded, Ended: time.Now(), Placement: map[string][]int{"n3": {0, 1, 2}}})
	poll.Until(t, 10*time.Second, ranks("n1=2 n2=4 n3=1"))
	j1.State, j1.Ended = job.Succeeded, time.Now()
	if err := store.Update("j1", &j1, nil, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, ranks("n1=0 n2=1 n3=1"))
	agents[2].Shutdown()
	agents = agents[:2]
	poll.Until(t, 15*time.Second, ranks("n1=0 n2=1 n3=0"))
}

// TestLaunchAnnouncesNothing: grants given and revoked (a launch, a
// relaunch) send no metadata update by gossip, so a launch over N nodes does
// not have every node of the cluster handle N updates.
func TestLaunchAnnouncesNothing(t *testing.T) {
	agents := startCluster(t, 2)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive"))
	sub := agents[0].Membership().Subscribe()
	defer sub.Close()
	l := agents[1].Launcher()
	l.Grant("j1", "n1", 2, time.Minute, nil)
	l.Grant("j2", "n1", 1, time.Minute, nil)
	l.Revoke("j1")
	l.Grant("j1", "n1", 2, time.Minute, nil)
	time.Sleep(5 * time.Second) // longer than the 3 s grants once waited to settle before they were announced
	for {
		select {
		case ev := <-sub.C:
			if ev.Type == membership.EventUpdate && ev.Node.Name == "n2" {
				t.Errorf("n2's grants sent a metadata update: %+v", ev.Node.Meta)
			}
			continue
		default:
		}
		break
	}
}
