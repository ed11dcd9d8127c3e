package api

import (
	"errors"
	"strings"
	"testing"
)

// TestLaunchRefusesControlBytes: a launch's words and environment follow the
// rules of a job's.
func TestLaunchRefusesControlBytes(t *testing.T) {
	tests := []struct {
		req  LaunchRequest
		want string // "" for accepted
	}{
		{LaunchRequest{Job: "j", Argv: []string{"orted", "-mca", "ess", "env"}, Env: map[string]string{"A": "b\tc"}}, ""},
		{LaunchRequest{Job: "j", Argv: []string{"orted", "-mca\x00"}}, "argv[1]: contains a NUL byte (byte 4)"},
		{LaunchRequest{Job: "j", Argv: []string{"orted"}, Env: map[string]string{"A": "\x1b"}}, `env "A": value contains control byte 0x1b (byte 0)`},
		{LaunchRequest{Job: "j", Argv: []string{"orted"}, Env: map[string]string{"A\n": "x"}}, `env key "A\n": contains control byte 0x0a (byte 1)`},
	}
	for _, tt := range tests {
		err := tt.req.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("argv %q env %q: %v, want accepted", tt.req.Argv, tt.req.Env, err)
		case tt.want != "" && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("argv %q env %q: got %v, want a bad request containing %q", tt.req.Argv, tt.req.Env, err, tt.want)
		}
	}
}
