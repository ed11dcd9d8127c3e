package main

import (
	"shoal/internal/job"
	"testing"
)

func TestDescribeRedundancy(t *testing.T) {
	for _, tt := range []struct {
		spec job.Spec
		want string
	}{
		{job.Spec{}, "copy (each shard on 2 nodes)"},
		{job.Spec{Redundancy: 3}, "copy:3 (each shard on 3 nodes)"},
		{job.Spec{Parity: &job.Parity{K: 3, M: 2}}, "rs:3+2 (one copy of each shard, Reed–Solomon parity over groups of 3 on 2 other nodes)"},
	} {
		if got := describeRedundancy(tt.spec); got != tt.want {
			t.Errorf("describeRedundancy(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}
