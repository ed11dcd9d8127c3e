package main

import (
	"testing"

	"shoal/internal/api"
)

func TestDescribeRedundancy(t *testing.T) {
	for _, tt := range []struct {
		spec api.JobSpec
		want string
	}{
		{api.JobSpec{}, "copy (each shard on 2 nodes)"},
		{api.JobSpec{Redundancy: 3}, "copy:3 (each shard on 3 nodes)"},
		{api.JobSpec{Parity: &api.Parity{K: 3, M: 2}}, "rs:3+2 (one copy of each shard, Reed–Solomon parity over groups of 3 on 2 other nodes)"},
	} {
		if got := describeRedundancy(tt.spec); got != tt.want {
			t.Errorf("describeRedundancy(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}
