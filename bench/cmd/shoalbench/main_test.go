package main

import (
	"math"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no subcommand", nil, 2, "usage: shoalbench failover|chaos|interval|twoloss|traffic|compress|tlscost|scrape|scalesim [flags]"},
		{"unknown subcommand", []string{"faultbench"}, 2, `shoalbench: unknown subcommand "faultbench": want one of failover, chaos`},
		// The subcommands below fail on their arguments before they touch a
		// testbed or a file: that they fail so shows run reached them.
		{"compress without shards", []string{"compress"}, 2, ""},
		{"compress with a bad link rate", []string{"compress", "-links", "fast", "a=b"}, 2, ""},
		{"tlscost with an unknown flag", []string{"tlscost", "-nope"}, 2, ""},
		{"chaos with too few hosts", []string{"chaos", "--hosts", "3"}, 2, ""},
	}
	for _, tt := range tests {
		var stderr strings.Builder
		if got := run(tt.args, &stderr); got != tt.code {
			t.Errorf("%s: run(%q) = %d, want %d", tt.name, tt.args, got, tt.code)
		}
		if !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("%s: run(%q) printed %q, want it to contain %q", tt.name, tt.args, stderr.String(), tt.stderr)
		}
	}
}

// TestUsageNamesEverySubcommand keeps the usage line and the unknown-subcommand
// line in step with the table run dispatches on.
func TestUsageNamesEverySubcommand(t *testing.T) {
	var usage, unknown strings.Builder
	run(nil, &usage)
	run([]string{"nope"}, &unknown)
	for _, c := range subcommands {
		if !strings.Contains(usage.String(), c.name) || !strings.Contains(unknown.String(), c.name) {
			t.Errorf("subcommand %q missing from %q or %q", c.name, usage.String(), unknown.String())
		}
	}
}

func TestResultSecs(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{1.234, "1.23"},
		{0, "0.00"},
		{-0.5, "-0.50"},
		{math.NaN(), "nan"},
	}
	for _, tt := range tests {
		if got := resultSecs(tt.v); got != tt.want {
			t.Errorf("resultSecs(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
