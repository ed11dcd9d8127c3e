package main

import (
	"errors"
	"os/user"
	"reflect"
	"testing"

	"shoal/internal/job"
)

// --user names a user of this node by login name or uid, never root.
func TestJobOwner(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil || nobody.Uid != "65534" || nobody.Gid != "65534" {
		t.Skip("this node has no user nobody of uid and gid 65534")
	}
	tests := []struct {
		name    string
		want    *job.Owner
		wantErr error
	}{
		{"nobody", &job.Owner{UID: 65534, GID: 65534, Name: "nobody"}, nil},
		{"65534", &job.Owner{UID: 65534, GID: 65534, Name: "nobody"}, nil},
		{"root", nil, errUserRoot},
		{"0", nil, errUserRoot},
		{"no-such-user-anywhere", nil, errNoSuchUser},
		{"4242421", nil, errNoSuchUser},
	}
	for _, tt := range tests {
		got, err := jobOwner(tt.name)
		if !errors.Is(err, tt.wantErr) || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("jobOwner(%q) = %v, %v; want %v, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// shoal run says so when a job runs as root, and only then.
func TestRootNote(t *testing.T) {
	root := &job.Owner{UID: 0, GID: 0, Name: "root"}
	alice := &job.Owner{UID: 1001, GID: 1001, Name: "alice"}
	tests := []struct {
		name  string
		owner *job.Owner // the job's
		agent *job.Owner
		warns bool
	}{
		{"no owner, agents run as root", nil, root, true},
		{"an owner", alice, root, false},
		{"no owner, agents run as a user", nil, alice, false},
		{"no owner, an agent that does not say", nil, nil, false},
	}
	for _, tt := range tests {
		note := rootNote(job.Job{ID: "heat-1", Spec: job.Spec{Owner: tt.owner}}, tt.agent)
		const want = "shoal: warning: job heat-1 runs as root on every node (the agents' user): its program may do anything there; shoal run --user NAME runs a job as NAME"
		if tt.warns && note != want || !tt.warns && note != "" {
			t.Errorf("%s: rootNote = %q, want warning %v", tt.name, note, tt.warns)
		}
	}
}
