package coord

import (
	"testing"

	"shoal/internal/api"
)

func TestRestartPolicy(t *testing.T) {
	killed := Outcome{Kind: RankKilled, Rank: 2, Signal: 9}
	nodeLost := Outcome{Kind: NodeLost, Detail: "node n3 lost (no answer for 4.4 s)"}
	launcher := Outcome{Kind: LauncherFailed, Code: 205, Detail: "ORTE has lost communication with a remote daemon."}
	coordinator := Outcome{Kind: CoordinatorLost, Detail: "coordinator n1 lost"}
	tests := []struct {
		name      string
		o         Outcome
		used, max int
		want      Decision
	}{
		{"success", Outcome{Kind: RanksSucceeded}, 0, 3,
			Decision{State: api.JobSucceeded, Reason: "every rank finished"}},
		{"success after restarts", Outcome{Kind: RanksSucceeded}, 3, 3,
			Decision{State: api.JobSucceeded, Reason: "every rank finished"}},
		{"the program's own failure", Outcome{Kind: AppFailed, Rank: 1, Code: 7}, 0, 3,
			Decision{State: api.JobFailed, ExitCode: 7, Reason: "rank 1 exited with code 7; not restarting (the program failed by itself)"}},
		{"a rank killed", killed, 0, 3,
			Decision{State: api.JobRestarting, Restart: true, Reason: "rank 2 killed by signal 9; restart 1 of 3"}},
		{"the last restart", killed, 2, 3,
			Decision{State: api.JobRestarting, Restart: true, Reason: "rank 2 killed by signal 9; restart 3 of 3"}},
		{"restarts used up", killed, 3, 3,
			Decision{State: api.JobFailed, Exhausted: true, Reason: "rank 2 killed by signal 9; giving up after 3 restarts (--max-restarts)"}},
		{"no restarts allowed", killed, 0, 0,
			Decision{State: api.JobFailed, Exhausted: true, Reason: "rank 2 killed by signal 9; giving up after 0 restarts (--max-restarts)"}},
		{"a node lost", nodeLost, 1, 3,
			Decision{State: api.JobRestarting, Restart: true, Reason: "node n3 lost (no answer for 4.4 s); restart 2 of 3"}},
		{"a node lost, restarts used up", nodeLost, 1, 1,
			Decision{State: api.JobFailed, Exhausted: true, Reason: "node n3 lost (no answer for 4.4 s); giving up after 1 restart (--max-restarts)"}},
		{"mpirun failed and no rank said why", launcher, 0, 3,
			Decision{State: api.JobRestarting, Restart: true, Reason: "mpirun exited with status 205 and no rank said why: ORTE has lost communication with a remote daemon.; restart 1 of 3"}},
		{"mpirun failed, restarts used up", launcher, 3, 3,
			Decision{State: api.JobFailed, Exhausted: true, Reason: "mpirun exited with status 205 and no rank said why: ORTE has lost communication with a remote daemon.; giving up after 3 restarts (--max-restarts)"}},
		{"the coordinator lost", coordinator, 0, 3,
			Decision{State: api.JobRestarting, Restart: true, Reason: "coordinator n1 lost; restart 1 of 3"}},
		{"the coordinator lost, restarts used up", coordinator, 2, 2,
			Decision{State: api.JobFailed, Exhausted: true, Reason: "coordinator n1 lost; giving up after 2 restarts (--max-restarts)"}},
		{"the lead moved", Outcome{Kind: LeadMoved, Detail: "coordinator n1 lost the lead"}, 0, 3,
			Decision{State: api.JobRestarting, Reason: "coordinator n1 lost the lead; relaunching (not counted against --max-restarts)"}},
		{"the lead moved does not count, even with none left", Outcome{Kind: LeadMoved, Detail: "coordinator n1 lost the lead and won it back"}, 2, 2,
			Decision{State: api.JobRestarting, Reason: "coordinator n1 lost the lead and won it back; relaunching (not counted against --max-restarts)"}},
		{"a node leaving", Outcome{Kind: Move, Detail: "node n3 leaving"}, 0, 3,
			Decision{State: api.JobMoving, Reason: "node n3 leaving: checkpointing now, then relaunching"}},
		{"a move does not count, even with none left", Outcome{Kind: Move, Detail: "rebalancing onto n4"}, 3, 3,
			Decision{State: api.JobMoving, Reason: "rebalancing onto n4: checkpointing now, then relaunching"}},
		{"cannot start", Outcome{Kind: StartFailed, Detail: "too few nodes"}, 0, 3,
			Decision{State: api.JobFailed, Reason: "too few nodes"}},
		{"no epoch survives", Outcome{Kind: StartFailed, Detail: "epoch 4 lost: shards of ranks 3, 4 were only on n3, n4"}, 1, 3,
			Decision{State: api.JobFailed, Reason: "epoch 4 lost: shards of ranks 3, 4 were only on n3, n4"}},
		{"cancelled", Outcome{Kind: Cancelled}, 1, 3,
			Decision{State: api.JobCancelled, ExitCode: 130, Reason: "cancelled"}},
		{"an unknown outcome fails", Outcome{Detail: "?"}, 0, 3,
			Decision{State: api.JobFailed, Reason: "unknown outcome 0: ?"}},
	}
	for _, tt := range tests {
		got := RestartPolicy{MaxRestarts: tt.max}.Decide(tt.o, tt.used)
		if got != tt.want {
			t.Errorf("%s: Decide(%v, %d of %d)\n got %+v\nwant %+v", tt.name, tt.o, tt.used, tt.max, got, tt.want)
		}
	}
}

// Every decision leads somewhere the lifecycle allows from running, the state a
// run ends in.
func TestDecisionsAreTransitions(t *testing.T) {
	for k := RanksSucceeded; k <= Cancelled; k++ {
		for _, used := range []int{0, 5} {
			d := RestartPolicy{MaxRestarts: 3}.Decide(Outcome{Kind: k}, used)
			if !CanTransition(api.JobRunning, d.State) {
				t.Errorf("outcome %d (%d used): running → %s is not a transition", k, used, d.State)
			}
			if d.Restart && d.State != api.JobRestarting {
				t.Errorf("outcome %d: a restart into %s", k, d.State)
			}
		}
	}
}
