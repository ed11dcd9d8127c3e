package testbed

import (
	"slices"
	"testing"
)

// Every process of a host reads the S3 server's settings from the testbed's file
// (Config.S3), in the shell that runs before nsenter, after joining the host's
// cgroups; without Config.S3 (or on a host Config.S3Hosts leaves out) or cgroups
// there is no shell.
func TestPrefixReadsS3Env(t *testing.T) {
	n := names{201}
	h := Host{Name: "n1", Index: 1, Netns: n.netns(1), UTS: n.utsPath(1)}
	withCgroups := h
	withCgroups.Cgroups = []string{"/sys/fs/cgroup/shoal-testbed-201/n1"}
	tests := []struct {
		name    string
		h       Host
		s3Env   string
		s3Hosts []string
		want    []string // the argv before nsenter
	}{
		{"neither", h, "", nil, nil},
		{"s3", h, n.s3EnvFile(), nil, []string{"/bin/sh", "-c", `. /tmp/shoal-testbed-201/s3.env && exec "$@"`, "shoal-testbed-n1"}},
		{"s3 on this host", h, n.s3EnvFile(), []string{"n3", "n1"}, []string{"/bin/sh", "-c", `. /tmp/shoal-testbed-201/s3.env && exec "$@"`, "shoal-testbed-n1"}},
		{"s3 on another host", h, n.s3EnvFile(), []string{"n2"}, nil},
		{"cgroups", withCgroups, "", nil, []string{"/bin/sh", "-c", `echo $$ > /sys/fs/cgroup/shoal-testbed-201/n1/cgroup.procs && exec "$@"`, "shoal-testbed-n1"}},
		{"both", withCgroups, n.s3EnvFile(), nil, []string{"/bin/sh", "-c",
			`echo $$ > /sys/fs/cgroup/shoal-testbed-201/n1/cgroup.procs && . /tmp/shoal-testbed-201/s3.env && exec "$@"`, "shoal-testbed-n1"}},
		{"cgroups, s3 on another host", withCgroups, n.s3EnvFile(), []string{"n2"}, []string{"/bin/sh", "-c",
			`echo $$ > /sys/fs/cgroup/shoal-testbed-201/n1/cgroup.procs && exec "$@"`, "shoal-testbed-n1"}},
	}
	for _, tt := range tests {
		st := &state{Instance: 201, S3Env: tt.s3Env, S3Hosts: tt.s3Hosts}
		argv := prefix(st, &tt.h)
		i := slices.Index(argv, "nsenter")
		if i < 0 {
			t.Fatalf("%s: prefix = %q: want nsenter", tt.name, argv)
		}
		if got := argv[:i]; !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q before nsenter, want %q", tt.name, got, tt.want)
		}
		if slices.ContainsFunc(argv, func(a string) bool { return len(a) > 4 && a[:4] == "AWS_" }) {
			t.Errorf("%s: prefix = %q holds AWS settings in its argv", tt.name, argv)
		}
	}
}
