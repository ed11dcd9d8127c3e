package main

import (
	"slices"
	"strings"
	"testing"
)

func TestMovedArgs(t *testing.T) {
	peers := []string{"10.77.0.11:7946", "10.77.0.12:7946"}
	tests := []struct {
		name  string
		args  string
		peers []string
		want  string
	}{
		{name: "joiner",
			args:  "shoal agent --bind 10.77.0.13:7946 --data-dir /d --name n3 --join 10.77.0.11:7946 --cores 2",
			peers: peers,
			want:  "shoal agent --bind 10.77.0.103:7946 --data-dir /d --name n3 --join 10.77.0.11:7946,10.77.0.12:7946 --cores 2"},
		{name: "the first node: --init goes, --join comes",
			args:  "shoal agent --bind=10.77.0.13:7946 --init --name n1",
			peers: peers,
			want:  "shoal agent --bind 10.77.0.103:7946 --name n1 --join 10.77.0.11:7946,10.77.0.12:7946"},
		{name: "alone: --init stays",
			args: "shoal agent -bind 10.77.0.13:7946 -init",
			want: "shoal agent --bind 10.77.0.103:7946 -init"},
		{name: "alone: --join stays",
			args: "shoal agent --bind 10.77.0.13:7946 --join 10.77.0.11",
			want: "shoal agent --bind 10.77.0.103:7946 --join 10.77.0.11"},
		{name: "--api at the old address moves, its port kept",
			args: "shoal agent --bind 10.77.0.13:7946 --api 10.77.0.13:9000",
			want: "shoal agent --bind 10.77.0.103:7946 --api 10.77.0.103:9000"},
		{name: "--api elsewhere stays",
			args: "shoal agent --bind 10.77.0.13:7946 --api=127.0.0.1:9000",
			want: "shoal agent --bind 10.77.0.103:7946 --api 127.0.0.1:9000"},
		{name: "bind from --config: added",
			args:  "shoal agent --config /etc/shoal.toml",
			peers: peers[:1],
			want:  "shoal agent --config /etc/shoal.toml --bind 10.77.0.103:7946 --join 10.77.0.11:7946"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := movedArgs(strings.Fields(tt.args), "10.77.0.13", "10.77.0.103:7946", tt.peers)
			if want := strings.Fields(tt.want); !slices.Equal(got, want) {
				t.Errorf("movedArgs(%s)\n got %s\nwant %s", tt.args, strings.Join(got, " "), tt.want)
			}
		})
	}
}
