package engine

import "testing"

// TestFailureLine: the reason given for a launcher that failed with no rank
// saying why is its most telling line: an rsh hook's own failure before Open
// MPI's help box of generic causes (captured from mpirun 4.1.4, a node
// refusing the launch), else the last line that is not a box rule.
func TestFailureLine(t *testing.T) {
	refused := `shoal rsh: node n2: bad request: node n2 only launches MPI daemons (its MPI installations' own), executed without a shell, and refuses "( test ! -r ./.profile || . ./.profile;  orted -mca ess \"env\" -mca ess_base_jobi"…: launch: not a single command of literal words: "(" is shell syntax (a subshell or a redirection)`
	box := `--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
--------------------------------------------------------------------------
`
	for _, tt := range []struct{ name, out, want string }{
		{"a node refused the launch", refused + "\n" + box, refused},
		{"no rsh line", box, "and network routing requirements)."},
		{"a plain line", "ORTE has lost communication with a remote daemon.\n\n", "ORTE has lost communication with a remote daemon."},
		{"nothing", "\n", "(no output)"},
	} {
		if got := FailureLine(tt.out); got != tt.want {
			t.Errorf("%s: FailureLine = %q, want %q", tt.name, got, tt.want)
		}
	}
}
