package main

import (
	"slices"
	"testing"

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
