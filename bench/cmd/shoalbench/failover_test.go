package main

import (
	"slices"
	"testing"

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
