package main

import (
	"slices"
	"testing"
	"time"

	"shoal/internal/job"
	nodepkg "shoal/internal/node"
)

func TestPollersAreTheSurvivingVoters(t *testing.T) {
	view := []nodepkg.Node{{Name: "n1", Role: nodepkg.RoleLeader}, {Name: "n2", Role: nodepkg.RoleVoter},
		{Name: "n3", Role: nodepkg.RoleVoter}, {Name: "n4", Role: nodepkg.RoleClient}, {Name: "n5", Role: nodepkg.RoleFollower}}
	if got := pollers(view, []string{"n2", "n3", "n4", "n5"}); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Errorf("pollers = %v, want the surviving voters n2 n3", got)
	}
	if got := pollers(nil, []string{"n2", "n4"}); !slices.Equal(got, []string{"n2", "n4"}) {
		t.Errorf("pollers without a view = %v, want every survivor", got)
	}
}

func TestCompleteFrom(t *testing.T) {
	for _, c := range []struct {
		typ, msg string
		want     bool
	}{
		{"epoch", "epoch 2 complete (4 shards, 2 copies each)", true},
		{"epoch", "epoch 5 complete (4 shards, 2 copies each)", true},
		{"epoch", "epoch 1 complete (4 shards, 2 copies each)", false},
		{"epoch", "epoch 3 kept in s3://b/j (1 MB by 2 nodes, 0.1 s)", false},
		{"output", "epoch 7 complete", false},
	} {
		if got := completeFrom(job.Event{Type: c.typ, Message: c.msg}, 2); got != c.want {
			t.Errorf("completeFrom(%s %q, 2) = %v, want %v", c.typ, c.msg, got, c.want)
		}
	}
}

func TestLaunchedAgain(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	evs := []job.Event{
		{Type: "launch", Time: at(0), Message: "launching 4 ranks"},
		{Type: "node-lost", Time: at(1), Message: "node n1 lost"},
		{Type: "launch", Time: at(2), Message: "launching 4 ranks from epoch 2"}, // the run that ran again
		{Type: "output", Time: at(3), Message: "[0] heat: resumed at step 40"},
		{Type: "reconfig", Time: at(4), Message: "moving: node n1 failed"},
		{Type: "output", Time: at(5), Message: "[0] step 50"},
		{Type: "launch", Time: at(6), Message: "launching 4 ranks from epoch 3"},
	}
	got := launchedAgain(evs, at(2))
	if want := []string{`reconfig "moving: node n1 failed"`}; !slices.Equal(got, want) {
		t.Errorf("launchedAgain = %q, want %q", got, want)
	}
	if got := launchedAgain(evs[:4], at(2)); len(got) != 0 {
		t.Errorf("launchedAgain with no later launch = %q, want none", got)
	}
}
