package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
)

// A node that is gone runs no ranks, whatever count it announced last; a
// suspect one may still.
func TestPrintNodesGone(t *testing.T) {
	now := time.Now()
	nodes := []api.Node{
		{Name: "n1", State: "alive", Ranks: 2, Role: api.RoleLeader, Since: now},
		{Name: "n2", State: "suspect", Ranks: 2, Role: api.RoleVoter, Since: now},
		{Name: "n3", State: "dead", Ranks: 3, Role: api.RoleVoter, Since: now},
		{Name: "n4", State: "left", Ranks: 1, Since: now},
	}
	var out bytes.Buffer
	printNodes(&out, nodes, now)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(l)
		got = append(got, strings.Join([]string{f[0], f[len(f)-4], f[len(f)-2], f[len(f)-1]}, " "))
	}
	want := []string{"n1 alive 2 leader", "n2 suspect 2 voter", "n3 dead - voter", "n4 left - -"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("shoal nodes: NAME STATE RANKS ROLE\ngot  %q\nwant %q\n%s", got, want, &out)
	}
}
