package main

import (
	"io"
	"testing"
	"time"
)

// parseSeconds reads what libshoal's SHOAL_CKPT_INTERVAL and SHOAL_MTBF read:
// a bare number is seconds.
func TestParseSeconds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30", 30 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{".25", 250 * time.Millisecond, true},
		{"5.", 5 * time.Second, true},
		{"0", 0, true},
		{"-5", -5 * time.Second, true},
		{"500ms", 500 * time.Millisecond, true},
		{"1m30s", 90 * time.Second, true},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"", 0, false},
		{".", 0, false},
		{"10x", 0, false},
		{"99999999999", 0, false},
	} {
		got, err := parseSeconds(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSeconds(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// --mtbf takes seconds as SHOAL_MTBF does.
func TestMTBFFlag(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want time.Duration
	}{
		{"3600", time.Hour},
		{"0.5", 500 * time.Millisecond},
		{"90m", 90 * time.Minute},
	} {
		f, _, code := parseRunFlags([]string{"-n", "2", "--mtbf", c.arg, "/bin/true"}, io.Discard, io.Discard)
		if code != -1 || f.mtbf != c.want {
			t.Errorf("--mtbf %s: exit %d, mtbf %v; want it parsed, %v", c.arg, code, f.mtbf, c.want)
		}
	}
}
