// Package roam checks hosts whose address changes while they run (`shoal testbed
// readdress`, a phone moving to another network): the node's agent starts again at the
// new address under its name and data dir, the cluster takes the new address, a voter
// of the job store votes again there, and a job with a rank on the node ends with the
// result of an uninterrupted run. The tests share one testbed (instance 261) of three
// hosts of 2 cores.
package roam

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 261

var bed = &testenv.Shared{Config: testbed.Config{Nodes: 3, Cores: []int{2}, Instance: instance}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// rejoinWithin bounds the time from a readdress to the cluster listing the node at its
// new address: the agent notices within a second; the others declare the old address
// dead (about 4 s on the LAN preset) and take the new one DeadNodeReclaimTime (5 s)
// later, at the moved node's next rejoin (every 2 s). Measured: 10 to 11 s.
const rejoinWithin = 30 * time.Second

type node struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	State string `json:"state"`
	Role  string `json:"role"`
}

// nodes is `shoal nodes --json` run in host from.
func nodes(t *testing.T, b *testbed.Bed, from string) ([]node, error) {
	t.Helper()
	out, err := b.Exec(context.Background(), from, testenv.Built(t, "bin/shoal"), "nodes", "--json")
	if err != nil {
		return nil, fmt.Errorf("shoal nodes in %s: %v", from, err)
	}
	var list struct {
		Nodes []node `json:"nodes"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("shoal nodes --json in %s: %v", from, err)
	}
	return list.Nodes, nil
}

// seenAt says "" once every host but moved lists moved alive at ip, a voter or the
// leader of the job store when voting, and a leader.
func seenAt(t *testing.T, b *testbed.Bed, moved, ip string, voting bool) func() string {
	return func() string {
		hosts, err := b.Hosts()
		if err != nil {
			return err.Error()
		}
		want := net.JoinHostPort(ip, "7946")
		for _, h := range hosts {
			if h.Name == moved {
				continue
			}
			list, err := nodes(t, b, h.Name)
			if err != nil {
				return err.Error()
			}
			found, leader := false, false
			for _, n := range list {
				leader = leader || n.Role == "leader"
				if n.Name == moved {
					found = true
					if n.Addr != want || n.State != "alive" || (voting && n.Role != "voter" && n.Role != "leader") {
						return fmt.Sprintf("%s lists %s %s at %s, role %q; want alive at %s (voting: %v)", h.Name, moved, n.State, n.Addr, n.Role, want, voting)
					}
				}
			}
			if !found {
				return fmt.Sprintf("%s does not list %s", h.Name, moved)
			}
			if !leader {
				return fmt.Sprintf("%s knows no leader of the job store", h.Name)
			}
		}
		return ""
	}
}

// A voter of the job store that is not its leader moves: the cluster lists it alive at
// its new address under its name, voting again (a voter, or the leader if it won an
// election meanwhile), with a leader; a job submitted on it runs.
func TestVoterMoves(t *testing.T) {
	b := bed.Up(t)
	ctx := context.Background()
	moved := ""
	poll.Until(t, 30*time.Second, func() string {
		list, err := nodes(t, b, "n1")
		if err != nil {
			return err.Error()
		}
		leader, voter := "", ""
		for _, n := range list {
			switch n.Role {
			case "leader":
				leader = n.Name
			case "voter":
				voter = n.Name
			}
		}
		if leader == "" || voter == "" {
			return fmt.Sprintf("n1 lists no leader and voter: %+v", list)
		}
		moved = voter
		return ""
	})
	start := time.Now()
	h, err := b.Readdress(ctx, moved, "")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, rejoinWithin, seenAt(t, b, moved, h.IP, true))
	t.Logf("%s alive and voting at %s after %v", moved, h.IP, time.Since(start).Round(100*time.Millisecond))
	out, err := b.Exec(ctx, moved, testenv.Built(t, "bin/shoal"), "run", "-n", "2", "--", "/bin/true")
	if err != nil {
		t.Fatalf("a job submitted on %s after it moved: %v\n%s", moved, err, out)
	}
}

// heatArgs is the job, one rank on each host; heatPace makes it last about 15 s (the pace changes no result, so the reference run goes without it).
var (
	heatArgs = []string{"--size", "200", "--steps", "300"}
	heatPace = []string{"--pace", "50000"}
)

// A host with ranks of a heat job moves mid-run. The ranks' connections to its old
// address cannot be kept, so the job restarts from an epoch; it keeps one rank a node
// and waits for nodes rather than doubling up (--wait-for-nodes), so the relaunch
// waits for the node and places it again at its new address with the rank it had,
// restored from the shard the node kept. The job ends with the checksum of
// an uninterrupted run, and the cluster lists the node alive at its new address.
func TestHeatNodeMoves(t *testing.T) {
	b := bed.Up(t)
	heat := testenv.Built(t, "build/examples/heat")
	ref := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, testenv.Built(t, "bin/shoal"),
		append([]string{"run", "-n", "3", "--ckpt-interval", "0", "--", heat}, heatArgs...)...)
	if code := ref.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("the reference run exited %d", code)
	}
	want := watch.Field(ref.Output(), "checksum")

	cmd, err := b.Command(context.Background(), "n1", append([]string{testenv.Built(t, "bin/shoal"),
		"run", "-n", "3", "--ranks-per-node", "1", "--wait-for-nodes", "1m", "--ckpt-interval", "2s", "--", heat}, append(heatArgs, heatPace...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	j := watch.Start(t, cmd)
	id := j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`^shoal: epoch 1 complete`, time.Minute)
	moved := "n3"
	if testenv.CoordinatorOf(t, b, id) == moved {
		moved = "n2"
	}
	h, err := b.Readdress(context.Background(), moved, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s moved to %s", moved, h.IP)
	if code := j.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("shoal run exited %d\n%s", code, j.Output())
	}
	out := j.Output()
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum %q, want the uninterrupted run's %q", got, want)
	}
	poll.Until(t, rejoinWithin, seenAt(t, b, moved, h.IP, false))

	// The node's rank at the launch and at the relaunch: the same rank restores from
	// the shard it kept.
	block := regexp.MustCompile(`\b` + moved + `:[0-9-]+`)
	launch := regexp.MustCompile(`shoal: launching 3 ranks on [^\n]*`).FindAllString(out, -1)
	restart := regexp.MustCompile(`restarting 3 ranks from epoch \d+ on [^\n]*`).FindString(out)
	t.Logf("restart: %q", restart)
	switch {
	case len(launch) < 2 || restart == "":
		t.Errorf("the job did not relaunch after %s moved (launches: %q)", moved, launch)
	case block.FindString(launch[1]) == "":
		t.Errorf("the relaunch placed no rank on %s at its new address: %q", moved, launch[1])
	case block.FindString(launch[1]) != block.FindString(launch[0]):
		t.Errorf("the relaunch moved %s's ranks (%q, first %q): its shards were not where they restored", moved, launch[1], launch[0])
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
