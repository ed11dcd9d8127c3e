package coord

import (
	"testing"

	"shoal/internal/api"
)

// A job's first event says who its ranks run as: a job that names no owner runs
// as the agents' user, and says so when that is root.
func TestSubmittedMessage(t *testing.T) {
	tests := []struct {
		owner    *api.Owner
		agentUID int
		want     string
	}{
		{nil, 0, "submitted; runs as root, the agents' user, on every node; n1 coordinates"},
		{nil, 999, "submitted; runs as the agents' user (uid 999) on every node; n1 coordinates"},
		{&api.Owner{UID: 1001, GID: 1001, Name: "alice"}, 0, "submitted; runs as alice (uid 1001) on every node; n1 coordinates"},
		{&api.Owner{UID: 1002, GID: 1002}, 0, "submitted; runs as uid 1002 on every node; n1 coordinates"},
	}
	for _, tt := range tests {
		if got := submittedMessage(tt.owner, tt.agentUID, "n1"); got != tt.want {
			t.Errorf("submittedMessage(%v, %d) = %q, want %q", tt.owner, tt.agentUID, got, tt.want)
		}
	}
}
