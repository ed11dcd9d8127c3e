package jobs

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
)

var longHeat = []string{"--size", "1000", "--steps", "16000"}

// TestGracefulLeave has n3 leave mid-run: the job must relaunch from the epoch taken
// for the leave, with the ranks held still after it, so no work is lost.
func TestGracefulLeave(t *testing.T) {
	out := runHeatWithLoss(t, longHeat, 3, 2, 1, "2s", func(b *testbed.Bed, j *job) {
		if out, err := b.Exec(context.Background(), "n3", filepath.Join(root, "bin/shoal"), "leave"); err != nil {
			t.Fatalf("shoal leave: %v\n%s", err, out)
		}
		evs := events(t, b, "n1", j.id)
		var reconfig, taken, restart int
		var restartMsg string
		for i, e := range evs {
			switch {
			case e.Type == "reconfigure" && reconfig == 0:
				reconfig = i + 1
			case e.Type == "epoch" && reconfig > 0 && taken == 0:
				taken = i + 1
			case e.Type == "restart" && restart == 0:
				restart, restartMsg = i+1, e.Message
			}
			if e.Type == "node-lost" {
				t.Errorf("a polite leave was treated as a loss: %s", e.Message)
			}
		}
		if reconfig == 0 || taken == 0 || restart == 0 || !(reconfig < taken && taken < restart) {
			t.Fatalf("events out of order: reconfigure at %d, next epoch at %d, restart at %d", reconfig, taken, restart)
		}
		epoch := regexp.MustCompile(`^epoch (\d+) complete`).FindStringSubmatch(evs[taken-1].Message)
		if epoch == nil || !strings.Contains(restartMsg, "from epoch "+epoch[1]+" ") {
			t.Errorf("restart %q does not use the epoch taken for the leave (%s)", restartMsg, evs[taken-1].Message)
		}
		if !strings.HasSuffix(restartMsg, "; 0s of work lost") {
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
	runHeatWithLoss(t, longHeat, 2, 1, 1, "1s", func(b *testbed.Bed, j *job) {
		ctx := context.Background()
		if _, err := b.Add(ctx, testbed.HostConfig{Cores: 2}); err != nil {
			t.Fatalf("add a host: %v", err)
		}
		shoal := filepath.Join(root, "bin/shoal")
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
		j.waitLine(`launching 6 ranks .*n3`, time.Minute)
	})
	if len(placement["n3"]) == 0 {
		t.Errorf("after the rebalance the job has no rank on the new node n3: %v", placement)
	}
}
