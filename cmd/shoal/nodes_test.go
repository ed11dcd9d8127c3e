package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"shoal/internal/node"
)

// A node that is gone runs no ranks, whatever count it announced last; a
// suspect one may still. A gone node still in the job store's configuration
// shows its role marked gone, and a line after the table says what that means.
func TestPrintNodesGone(t *testing.T) {
	now := time.Now()
	nodes := []node.Node{
		{Name: "n1", State: "alive", Ranks: 2, Role: node.RoleLeader, Since: now},
		{Name: "n2", State: "suspect", Ranks: 2, Role: node.RoleVoter, Since: now},
		{Name: "n3", State: "dead", Ranks: 3, Role: node.RoleVoter, Since: now},
		{Name: "n4", State: "left", Ranks: 1, Since: now},
		{Name: "n5", State: "unreachable", Role: node.RoleFollower, Since: now},
		{Name: "n6", State: "left", Role: node.RoleLeader, Since: now},
	}
	var out bytes.Buffer
	printNodes(&out, nodes, now)
	table, note, _ := strings.Cut(strings.TrimSpace(out.String()), "\n\n")
	var got []string
	for _, l := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(l)
		// NAME CORES SPEED STATE SINCE RANKS ROLE: no address or arch here.
		got = append(got, strings.Join(append([]string{f[0], f[3], f[5]}, f[6:]...), " "))
	}
	want := []string{"n1 alive 2 leader", "n2 suspect 2 voter", "n3 dead - voter (gone)", "n4 left - -",
		"n5 unreachable - follower (gone)", "n6 left - leader (gone)"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("shoal nodes: NAME STATE RANKS ROLE\ngot  %q\nwant %q\n%s", got, want, &out)
	}
	if !strings.HasPrefix(note, "(gone): the node keeps its place in the job store until the leader takes it out") {
		t.Errorf("shoal nodes: after the table %q, want the line saying what (gone) means", note)
	}
	out.Reset()
	printNodes(&out, nodes[:2], now)
	if strings.Contains(out.String(), "(gone)") {
		t.Errorf("shoal nodes with no node gone: %q, want no (gone) line", &out)
	}
}
