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
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
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
