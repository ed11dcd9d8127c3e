package engine

import (
	"slices"
	"testing"
)

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
		{"no rsh line: the box's title", box, "ORTE was unable to reliably start one or more daemons."},
		{"a box and Open MPI's note of help aggregated", "[n1:4711] some earlier line\n" + box +
			"[n1:14818] 2 more processes have sent help message help-errmgr-base.txt / no-path\n" +
			"[n1:14818] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages\n",
			"ORTE was unable to reliably start one or more daemons."},
		{"a line after a box", box + "mpirun: Forwarding signal 18 to job\n", "mpirun: Forwarding signal 18 to job"},
		{"only the note", "[n1:14818] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages\n",
			"[n1:14818] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages"},
		{"a plain line", "ORTE has lost communication with a remote daemon.\n\n", "ORTE has lost communication with a remote daemon."},
		{"nothing", "\n", "(no output)"},
	} {
		if got := FailureLine(tt.out); got != tt.want {
			t.Errorf("%s: FailureLine = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The rank Open MPI's mpirun saw die of a signal is that rank's death when its
// wrapper, killed with it, said nothing; a wrapper's own word is kept.
func TestLauncherNotice(t *testing.T) {
	out := `--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun.openmpi noticed that process rank 16 with PID 21986 on node n19 exited on signal 9 (Killed).
--------------------------------------------------------------------------
`
	n := LauncherNotice(out)
	if n == nil || *n != (Notice{Rank: 16, Signal: 9}) {
		t.Fatalf("LauncherNotice = %+v, want rank 16, signal 9", n)
	}
	for _, s := range []string{"", "ORTE has lost communication with a remote daemon.\n",
		"mpirun noticed that process rank 1 with PID 0 on node vm exited on non-zero status 3.\n"} {
		if n := LauncherNotice(s); n != nil {
			t.Errorf("LauncherNotice(%q) = %+v, want nil", s, n)
		}
	}

	const at = 5000
	states := []RankState{
		{Rank: 15, State: StateStopped, Signal: 15, TimeNs: 4000},
		{Rank: 16, PID: 7, State: StateVanished},
		{Rank: 17, State: StateSignaled, Signal: 9, TimeNs: 3000},
	}
	got := (&Notice{Rank: 16, Signal: 9}).Apply(append([]RankState(nil), states...), at)
	want := []RankState{states[0], {Rank: 16, PID: 7, State: StateSignaled, Signal: 9, TimeNs: at}, states[2]}
	if !slices.Equal(got, want) {
		t.Errorf("Apply to a vanished rank: %+v, want %+v", got, want)
	}
	if got := (&Notice{Rank: 15, Signal: 9}).Apply(append([]RankState(nil), states...), at); !slices.Equal(got, states) {
		t.Errorf("Apply to a rank its wrapper said stopped: %+v, want it kept", got)
	}
	if got := (&Notice{Rank: 3, Signal: 9}).Apply(nil, at); !slices.Equal(got, []RankState{{Rank: 3, State: StateSignaled, Signal: 9, TimeNs: at}}) {
		t.Errorf("Apply with no state of the rank: %+v", got)
	}
	var none *Notice
	if got := none.Apply(states, at); !slices.Equal(got, states) {
		t.Errorf("a nil Notice changed the states: %+v", got)
	}
}
