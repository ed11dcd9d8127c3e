package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
)

// --hang-after: auto by default, off, or a duration of at least a second, into
// the job's spec; anything else is refused in one line naming the flag.
func TestHangAfterFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want job.Duration
		err  string
	}{
		{nil, 0, ""},
		{[]string{"--hang-after", "auto"}, 0, ""},
		{[]string{"--hang-after", "off"}, job.HangOff, ""},
		{[]string{"--hang-after", "30"}, job.Duration(30 * time.Second), ""},
		{[]string{"--hang-after", "1.5s"}, job.Duration(1500 * time.Millisecond), ""},
		{[]string{"--hang-after", "2m", "--hang-after", "auto"}, 0, ""},
		{[]string{"--hang-after", "0.5"}, 0, `invalid value "0.5" for flag -hang-after: want auto, off, or seconds (30) or a duration (90s, 2m) of at least 1s`},
		{[]string{"--hang-after", "0"}, 0, `invalid value "0" for flag -hang-after`},
		{[]string{"--hang-after", "-5s"}, 0, `invalid value "-5s" for flag -hang-after`},
		{[]string{"--hang-after", "never"}, 0, `invalid value "never" for flag -hang-after`},
	} {
		var stdout, stderr bytes.Buffer
		f, _, code := parseRunFlags(append(append([]string{"-n", "2"}, c.args...), "/bin/true"), &stdout, &stderr)
		if c.err != "" {
			if code != exitUsage || !strings.Contains(stderr.String(), c.err) || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
				t.Errorf("%q: exit %d, stderr %q; want %d and one line containing %q", c.args, code, stderr.String(), exitUsage, c.err)
			}
			continue
		}
		if got := f.jobSpec([]string{"/bin/true"}, nil).HangAfter; code != -1 || got != c.want {
			t.Errorf("%q: exit %d, hang_after %v, want %v (%s)", c.args, code, got, c.want, stderr.String())
		}
	}
}

// shoal run --help says what --hang-after takes and its default rule.
func TestHangAfterHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("shoal run --help: exit %d", code)
	}
	for _, w := range []string{"-hang-after DURATION", "auto: ten times a rank's usual time between calls, at least 10 s", "off: never"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("shoal run --help does not say %q", w)
		}
	}
}
