package job

import (
	"strings"
	"testing"
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
			Decision{State: Succeeded, Reason: "every rank finished"}},
		{"success after restarts", Outcome{Kind: RanksSucceeded}, 3, 3,
			Decision{State: Succeeded, Reason: "every rank finished"}},
		{"the program's own failure", Outcome{Kind: AppFailed, Rank: 1, Code: 7}, 0, 3,
			Decision{State: Failed, ExitCode: 7, Reason: "rank 1 exited with code 7; not restarting (the program failed by itself)"}},
		{"a rank killed", killed, 0, 3,
			Decision{State: Restarting, Restart: true, Reason: "rank 2 killed by signal 9; restart 1 of 3"}},
		{"the last restart", killed, 2, 3,
			Decision{State: Restarting, Restart: true, Reason: "rank 2 killed by signal 9; restart 3 of 3"}},
		{"restarts used up", killed, 3, 3,
			Decision{State: Failed, Exhausted: true, Reason: "rank 2 killed by signal 9; giving up after 3 restarts (--max-restarts)"}},
		{"no restarts allowed", killed, 0, 0,
			Decision{State: Failed, Exhausted: true, Reason: "rank 2 killed by signal 9; giving up after 0 restarts (--max-restarts)"}},
		{"a node lost", nodeLost, 1, 3,
			Decision{State: Restarting, Restart: true, Reason: "node n3 lost (no answer for 4.4 s); restart 2 of 3"}},
		{"a node lost, restarts used up", nodeLost, 1, 1,
			Decision{State: Failed, Exhausted: true, Reason: "node n3 lost (no answer for 4.4 s); giving up after 1 restart (--max-restarts)"}},
		{"mpirun failed and no rank said why", launcher, 0, 3,
			Decision{State: Restarting, Restart: true, Reason: "mpirun exited with status 205 and no rank said why: ORTE has lost communication with a remote daemon.; restart 1 of 3"}},
		{"mpirun failed, restarts used up", launcher, 3, 3,
			Decision{State: Failed, Exhausted: true, Reason: "mpirun exited with status 205 and no rank said why: ORTE has lost communication with a remote daemon.; giving up after 3 restarts (--max-restarts)"}},
		{"the coordinator lost", coordinator, 0, 3,
			Decision{State: Restarting, Restart: true, Reason: "coordinator n1 lost; restart 1 of 3"}},
		{"the coordinator lost, restarts used up", coordinator, 2, 2,
			Decision{State: Failed, Exhausted: true, Reason: "coordinator n1 lost; giving up after 2 restarts (--max-restarts)"}},
		{"the lead moved", Outcome{Kind: LeadMoved, Detail: "coordinator n1 lost the lead"}, 0, 3,
			Decision{State: Restarting, Reason: "coordinator n1 lost the lead; relaunching (not counted against --max-restarts)"}},
		{"the lead moved does not count, even with none left", Outcome{Kind: LeadMoved, Detail: "coordinator n1 lost the lead and won it back"}, 2, 2,
			Decision{State: Restarting, Reason: "coordinator n1 lost the lead and won it back; relaunching (not counted against --max-restarts)"}},
		{"a copy corrupt when staged does not count, even with none left", Outcome{Kind: CopyCorrupt, Detail: "rank 1's shard of epoch 2 on n2 corrupt when staged"}, 2, 2,
			Decision{State: Restarting, Reason: "rank 1's shard of epoch 2 on n2 corrupt when staged; relaunching from the newest epoch still whole (not counted against --max-restarts)"}},
		{"a node leaving", Outcome{Kind: Move, Detail: "node n3 leaving"}, 0, 3,
			Decision{State: Moving, Reason: "node n3 leaving: checkpointing now, then relaunching"}},
		{"a move does not count, even with none left", Outcome{Kind: Move, Detail: "rebalancing onto n4"}, 3, 3,
			Decision{State: Moving, Reason: "rebalancing onto n4: checkpointing now, then relaunching"}},
		{"hung", Outcome{Kind: RanksHung, Rank: 3, Detail: "rank 3 on n2 made no snapshot call for 41 s (usually every 400 ms), idle: hung"}, 0, 3,
			Decision{State: Restarting, Restart: true, Reason: "rank 3 on n2 made no snapshot call for 41 s (usually every 400 ms), idle: hung; restart 1 of 3"}},
		{"hung, restarts used up", Outcome{Kind: RanksHung, Rank: 3, Detail: "rank 3 on n2 made no snapshot call for 41 s: hung"}, 3, 3,
			Decision{State: Failed, Exhausted: true, Reason: "rank 3 on n2 made no snapshot call for 41 s: hung; giving up after 3 restarts (--max-restarts)"}},
		{"cannot start", Outcome{Kind: StartFailed, Detail: "too few nodes"}, 0, 3,
			Decision{State: Failed, Reason: "too few nodes"}},
		{"no epoch survives", Outcome{Kind: StartFailed, Detail: "epoch 4 lost: shards of ranks 3, 4 were only on n3, n4"}, 1, 3,
			Decision{State: Failed, Reason: "epoch 4 lost: shards of ranks 3, 4 were only on n3, n4"}},
		{"cancelled", Outcome{Kind: UserCancelled}, 1, 3,
			Decision{State: Cancelled, ExitCode: 130, Reason: "cancelled"}},
		{"an unknown outcome fails", Outcome{Detail: "?"}, 0, 3,
			Decision{State: Failed, Reason: "unknown outcome 0: ?"}},
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
	for k := RanksSucceeded; k <= UserCancelled; k++ {
		for _, used := range []int{0, 5} {
			d := RestartPolicy{MaxRestarts: 3}.Decide(Outcome{Kind: k}, used)
			if !CanTransition(Running, d.State) {
				t.Errorf("outcome %d (%d used): running → %s is not a transition", k, used, d.State)
			}
			if d.Restart && d.State != Restarting {
				t.Errorf("outcome %d: a restart into %s", k, d.State)
			}
		}
	}
}

// TestRestartsCount: the tracker counts the restarts its decisions use; a
// loss that interrupts a relaunch before it launched is the same restart
// decided again, until MaxUnlaunched in a row.
func TestRestartsCount(t *testing.T) {
	lost := Outcome{Kind: NodeLost, Detail: "node n3 lost"}
	r := Restarts{Policy: RestartPolicy{MaxRestarts: 2}}
	if d := r.Decide(lost, false); !d.Restart || r.Used != 1 {
		t.Fatalf("first loss: %+v, used %d; want a restart, used 1", d, r.Used)
	}
	for i := 0; i < MaxUnlaunched; i++ {
		if d := r.Decide(lost, true); !d.Restart || r.Used != 1 || !strings.Contains(d.Reason, "restart 1 of 2") {
			t.Fatalf("loss %d while staged: %+v, used %d; want restart 1 of 2 again", i+1, d, r.Used)
		}
	}
	if d := r.Decide(lost, true); !d.Restart || r.Used != 2 || !strings.Contains(d.Reason, "restart 2 of 2") {
		t.Errorf("loss %d while staged: %+v, used %d; want it counted, restart 2 of 2", MaxUnlaunched+1, d, r.Used)
	}
	if d := r.Decide(lost, false); d.State != Failed || !d.Exhausted || r.Used != 2 {
		t.Errorf("a third loss: %+v, used %d; want failed, exhausted", d, r.Used)
	}
	if d := r.Decide(Outcome{Kind: Move}, false); d.State != Moving || r.Used != 2 {
		t.Errorf("a move: %+v, used %d; want moving, not counted", d, r.Used)
	}
	fresh := Restarts{Policy: RestartPolicy{MaxRestarts: 3}}
	if fresh.Decide(lost, true); fresh.Used != 1 {
		t.Errorf("a loss while the first launch was staged: used %d, want 1 (no relaunch to decide again)", fresh.Used)
	}
}
