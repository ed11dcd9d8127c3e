package agent

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"shoal/internal/node"
)

// TestFollowOrder: each client has its own order of the servers, the same
// every time, so the clients' long polls spread over the servers.
func TestFollowOrder(t *testing.T) {
	servers := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	first := map[string]int{}
	for i := 8; i < 8+700; i++ {
		client := fmt.Sprintf("n%d", i)
		order := followOrder(client, servers)
		if !slices.Equal(order, followOrder(client, reversed(servers))) {
			t.Fatalf("%s: the order depends on the order the servers were listed in", client)
		}
		if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, servers) {
			t.Fatalf("%s: order %v is not the servers %v", client, order, servers)
		}
		first[order[0]]++
	}
	for _, s := range servers {
		// 100 each on average; a server taking none or half would be no spread.
		if first[s] < 50 || first[s] > 150 {
			t.Errorf("%s is the first choice of %d of 700 clients, want about 100: %v", s, first[s], first)
		}
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestReachCandidates: the leader checks the servers and the k live others up
// longest, not every node.
func TestReachCandidates(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var nodes []node.Node
	for i := 1; i <= 128; i++ {
		state := "alive"
		if i == 9 {
			state = "dead"
		}
		nodes = append(nodes, node.Node{Name: fmt.Sprintf("n%d", i), State: state, Since: t0.Add(time.Duration(i) * time.Second)})
	}
	servers := map[string]bool{"n1": true, "n2": true, "n3": true, "n4": true, "n5": true, "n100": true, "n101": true}
	var got []string
	for _, n := range reachCandidates(nodes, servers, 7) {
		got = append(got, n.Name)
	}
	want := []string{"n1", "n2", "n3", "n4", "n5", "n100", "n101", "n6", "n7", "n8", "n10", "n11", "n12", "n13"}
	if !slices.Equal(got, want) {
		t.Errorf("candidates %v, want %v (the servers, then the 7 live others up longest; n9 is dead)", got, want)
	}
}
