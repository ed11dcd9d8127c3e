package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/links"
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

// The table of `shoal nodes --links`: a pair that cannot connect shows how it
// failed and when, without a round trip or bandwidth it never had, and a line
// after the table says which way it fails and what the other way does.
func TestWriteLinks(t *testing.T) {
	now := time.Unix(5000, 0)
	reach := func(r links.Result, s int) *links.Reach {
		return &links.Reach{Result: r, Checked: now.Add(-time.Duration(s) * time.Second)}
	}
	ls := []links.Link{
		{From: "n2", To: "n3", Reach: reach(links.TimedOut, 12)},
		{From: "n3", To: "n2", RTT: job.Duration(250 * time.Microsecond), Bandwidth: 125e6, Measured: now.Add(-time.Minute), Reach: reach(links.Reachable, 5)},
		{From: "n1", To: "n2", RTT: job.Duration(time.Millisecond), Bandwidth: 1e6, Estimated: true},
	}
	var b strings.Builder
	writeLinks(&b, ls, now)
	want := `FROM  TO  RTT    BANDWIDTH      AGE            CONNECT
n2    n3  -      -              -              timed out 12s ago
n3    n2  250µs  1000.0 Mbit/s  1m0s           reachable 5s ago
n1    n2  1ms    8.0 Mbit/s     - (estimated)  -
n2 -> n3 timed out 12s ago; n3 -> n2 reachable (one way only)
`
	if got := b.String(); got != want {
		t.Errorf("writeLinks =\n%s\nwant\n%s", got, want)
	}
}

// A pair cut both ways shows the relay the overlay carries it through, with
// the path's measures.
func TestWriteLinksRelayed(t *testing.T) {
	now := time.Unix(5000, 0)
	reach := &links.Reach{Result: links.TimedOut, Checked: now.Add(-3 * time.Second)}
	ls := []links.Link{
		{From: "n2", To: "n3", RTT: job.Duration(700 * time.Microsecond), Bandwidth: 100e6, Estimated: true, Via: "n4", Reach: reach},
		{From: "n3", To: "n2", RTT: job.Duration(700 * time.Microsecond), Bandwidth: 100e6, Estimated: true, Via: "n4", Reach: reach},
	}
	var b strings.Builder
	writeLinks(&b, ls, now)
	want := `FROM  TO  RTT    BANDWIDTH     AGE         CONNECT
n2    n3  700µs  800.0 Mbit/s  - (via n4)  timed out 3s ago
n3    n2  700µs  800.0 Mbit/s  - (via n4)  timed out 3s ago
n2 -> n3 timed out 3s ago; n3 -> n2 timed out too
n3 -> n2 timed out 3s ago; n2 -> n3 timed out too
`
	if got := b.String(); got != want {
		t.Errorf("writeLinks =\n%s\nwant\n%s", got, want)
	}
}
