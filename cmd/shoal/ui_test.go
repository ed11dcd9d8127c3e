package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUICmdRefuses: shoal ui refuses, in one line, a listen address off
// loopback, an argument, and a data dir without an agent.
func TestUICmdRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--listen", "0.0.0.0:8080", "--data-dir", dir}, exitUsage, `shoal ui: ui: not a loopback address: --listen "0.0.0.0:8080"`},
		{[]string{"--listen", "8080", "--data-dir", dir}, exitUsage, `shoal ui: ui: listen address "8080"`},
		{[]string{"now"}, exitUsage, `shoal ui: unexpected argument "now"`},
		{[]string{"--data-dir", dir}, exitFailure, "shoal ui: no agent socket (agent.sock) in [" + dir + "]"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"ui"}, tt.args...), &stdout, &stderr)
		got := stderr.String()
		if code != tt.code || !strings.HasPrefix(got, tt.want) || strings.Count(got, "\n") != 1 {
			t.Errorf("shoal ui %v: got exit %d, %q; want exit %d, one line starting %q", tt.args, code, got, tt.code, tt.want)
		}
	}
}
