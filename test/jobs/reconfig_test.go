package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
)

// longHeat runs 20 s or more on 6 ranks here; its pace (at least 1.5 ms a step) keeps it
// that long on a faster machine, so a rebalance still pays when the tests ask for one.
var longHeat = []string{"--size", "1000", "--steps", "16000", "--pace", "1500"}

// TestGracefulLeave has n3 leave mid-run: the job must relaunch from the epoch taken
// for the leave, with the ranks held still after it, so no work is lost. The restart
// looked at is the first after the leave: a lead that lapsed under load before it
// restarts the job too, and is not what this test is about.
func TestGracefulLeave(t *testing.T) {
	out := runHeatWithLoss(t, longHeat, nil, 3, 2, 1, "2s", func(b *testbed.Bed, j *job) {
		if out, err := b.Exec(context.Background(), "n3", filepath.Join(testenv.Root, "bin/shoal"), "leave"); err != nil {
			t.Fatalf("shoal leave: %v\n%s", err, out)
		}
		evs := events(t, b, "n1", j.id)
		// The epoch taken for the leave is the newest to complete between the
		// leave and the restart: an older one may complete in that time too.
		var reconfig, restart int
		var restartMsg string
		var taken uint64
		epochRe := regexp.MustCompile(`^epoch (\d+) complete`)
		for i, e := range evs {
			switch {
			case e.Type == "reconfigure" && reconfig == 0:
				reconfig = i + 1
			case e.Type == "epoch" && reconfig > 0 && restart == 0:
				if m := epochRe.FindStringSubmatch(e.Message); m != nil {
					n, _ := strconv.ParseUint(m[1], 10, 64)
					taken = max(taken, n)
				}
			case e.Type == "restart" && reconfig > 0 && restart == 0:
				restart, restartMsg = i+1, e.Message
			}
			if e.Type == "node-lost" {
				t.Errorf("a polite leave was treated as a loss: %s", e.Message)
			}
		}
		if reconfig == 0 || restart == 0 || taken == 0 {
			t.Fatalf("events out of order: reconfigure at %d, restart at %d, no epoch complete between them", reconfig, restart)
		}
		if !strings.Contains(restartMsg, fmt.Sprintf("from epoch %d ", taken)) {
			t.Errorf("restart %q does not use the epoch taken for the leave (%d)", restartMsg, taken)
		}
		if !strings.HasSuffix(restartMsg, "; 0 s of work lost") {
			t.Errorf("restart %q: want no work lost", restartMsg)
		}
	})
	if !strings.Contains(out, "node n3 leaving") {
		t.Error("no line saying n3 is leaving")
	}
}

// TestJoinThenRebalance adds a node to a running job's cluster: after shoal
// rebalance the job has ranks on it, and still computes the uninterrupted result.
func TestJoinThenRebalance(t *testing.T) {
	var placement map[string][]int
	runHeatWithLoss(t, longHeat, nil, 2, 1, 1, "1s", func(b *testbed.Bed, j *job) {
		ctx := context.Background()
		if _, err := b.Add(ctx, testbed.HostConfig{Cores: 2}); err != nil {
			t.Fatalf("add a host: %v", err)
		}
		shoal := filepath.Join(testenv.Root, "bin/shoal")
		if out, err := b.Exec(ctx, "n1", shoal, "rebalance", j.id); err != nil {
			t.Fatalf("shoal rebalance: %v\n%s", err, out)
		}
		out, err := b.Exec(ctx, "n1", shoal, "jobs", "--json")
		if err != nil {
			t.Fatalf("shoal jobs: %v\n%s", err, out)
		}
		var list struct {
			Jobs []struct {
				ID        string           `json:"id"`
				Placement map[string][]int `json:"placement"`
			} `json:"jobs"`
		}
		json.Unmarshal(out, &list)
		for _, jb := range list.Jobs {
			if jb.ID == j.id {
				placement = jb.Placement
			}
		}
		j.WaitLine(`launching 6 ranks .*n3`, time.Minute)
	})
	if len(placement["n3"]) == 0 {
		t.Errorf("after the rebalance the job has no rank on the new node n3: %v", placement)
	}
}

// TestAutoRebalanceUsesJoinedNode runs a job with --auto-rebalance on 2 hosts (3 ranks
// on each 2-core host) and adds a third: the coordinator must weigh the join, find
// that 2 ranks per host pays, and relaunch over all three without being asked (in
// blocks of 2, whichever host has which: the three are alike). On a loaded machine
// the job store's leader can step down as the new host joins (its followers unheard
// for a second); the new coordinator then restarts the job over all three hosts
// itself, which uses the new host as well, and the rebalance is not weighed.
// (--no-replan: the one restart counted is the rebalance's; a move by the
// traffic, weighed on the relaunched run's first slow iterations, would be a
// second.)
func TestAutoRebalanceUsesJoinedNode(t *testing.T) {
	flags := []string{"--max-oversubscribe", "3", "--auto-rebalance", "1", "--no-replan"}
	failover := false
	out := runHeatWithLoss(t, longHeat, flags, 2, 1, 1, "1s", func(b *testbed.Bed, j *job) {
		if _, err := b.Add(context.Background(), testbed.HostConfig{Cores: 2}); err != nil {
			t.Fatalf("add a host: %v", err)
		}
		m := j.WaitLine(`node n3 available: a relaunch as .* is estimated to save .*; rebalancing|(lost the lead); restarting 6 ranks from epoch \d+ on 3 nodes`, time.Minute)
		failover = m[1] != ""
		j.WaitLine(`launching 6 ranks on 3 nodes \(n\d:0-1 n\d:2-3 n\d:4-5\)`, time.Minute)
	})
	if failover {
		t.Logf("the coordinator moved as n3 joined and restarted the job over all three hosts; the rebalance itself was not weighed")
		return
	}
	if !strings.Contains(out, "rebalancing onto n3; restarting 6 ranks from epoch") || !strings.Contains(out, "; 0 s of work lost") {
		t.Errorf("the automatic rebalance lost work:\n%s", grepShoal(out))
	}
}

// TestWaitForNodes loses one of three hosts of a job that may not oversubscribe: the
// job must wait for a node to join rather than crowd the survivors, and go on from
// its checkpoint on the new host once it does. (--no-replan: the one restart
// counted is the loss's; a move by the traffic, weighed on the new host's first
// link probes, would be a second.)
func TestWaitForNodes(t *testing.T) {
	flags := []string{"--max-oversubscribe", "1", "--wait-for-nodes", "2m", "--no-replan"}
	out := runHeatWithLoss(t, heatArgs, flags, 3, 2, 1, "500ms", func(b *testbed.Bed, j *job) {
		ctx := context.Background()
		if _, err := b.Kill(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		j.WaitLine(`too few nodes: 6 ranks need 6 cores .*; waiting up to 2m0s for nodes to join`, time.Minute)
		if _, err := b.Add(ctx, testbed.HostConfig{Cores: 2}); err != nil {
			t.Fatalf("add a host: %v", err)
		}
		j.WaitLine(`launching 6 ranks on n1, n2, n4 `, time.Minute)
	})
	if strings.Contains(out, "oversubscribed") {
		t.Error("the job oversubscribed the survivors instead of waiting")
	}
}

// TestTooFewNodesFails asks for more ranks than the cluster's cores with a short
// --wait-for-nodes: the job must fail with a line naming the shortfall, exit 1.
func TestTooFewNodesFails(t *testing.T) {
	b := up(t, 2)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	j := submit(t, b, "n1", "-n", "6", "--wait-for-nodes", "2s", "--", heat, "--steps", "10")
	if code := j.Wait(time.Minute); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want := "too few nodes: 6 ranks need 6 cores at --max-oversubscribe 1; the live nodes (n1, n2) have 4, and no node joined within --wait-for-nodes 2s"
	if !strings.Contains(j.Output(), want) {
		t.Errorf("no line %q", want)
	}
}

// TestCutHealRejoin cuts n3 off a running job, so the job goes on without it, then
// heals the link: once membership has n3 back, a rebalance gives it ranks again. n3
// comes back holding the fenced run's ranks' shards; the job must still compute the
// uninterrupted result.
func TestCutHealRejoin(t *testing.T) {
	// Paced to last at least 40 s: the cut, its detection, the heal and the rejoin
	// take 20 to 30 s of it.
	paced := append([]string{"--pace", "5000"}, heatArgs...)
	out := runHeatWithLoss(t, paced, nil, 3, 2, 2, "1s", func(b *testbed.Bed, j *job) {
		ctx := context.Background()
		if err := b.Cut(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		j.WaitLine(`launching 6 ranks on n1, n2 `, time.Minute)
		time.Sleep(5 * time.Second) // n3 alone declares the others dead too (TestCutHeal)
		if err := b.Heal(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		shoal := filepath.Join(testenv.Root, "bin/shoal")
		deadline := time.Now().Add(time.Minute)
		for !nodeAlive(ctx, b, "n3") {
			if time.Now().After(deadline) {
				t.Fatal("n3 not alive again a minute after the heal")
			}
			time.Sleep(500 * time.Millisecond)
		}
		// Forced: this is about n3 being usable again, whatever the estimate says.
		if out, err := b.Exec(ctx, "n1", shoal, "rebalance", "--force", j.id); err != nil {
			t.Fatalf("shoal rebalance: %v\n%s", err, out)
		}
		j.WaitLine(`launching 6 ranks on 3 nodes \(.*n3:`, time.Minute)
	})
	if !strings.Contains(out, "node n3 lost") {
		t.Error("no line saying n3 was lost")
	}
}

// nodeAlive says whether n1's agent has node alive.
func nodeAlive(ctx context.Context, b *testbed.Bed, node string) bool {
	var list struct {
		Nodes []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	if shoalJSON(ctx, b, &list, "nodes", "--json") != nil {
		return false
	}
	for _, n := range list.Nodes {
		if n.Name == node {
			return n.State == "alive"
		}
	}
	return false
}
