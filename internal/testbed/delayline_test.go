package testbed

import (
	"strings"
	"testing"
	"time"
)

// seq returns the values in turn, as the delay line's random source.
func seq(vs ...float64) func() float64 {
	i := 0
	return func() float64 { v := vs[i%len(vs)]; i++; return v }
}

func TestDelayLineAdmit(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	type arrival struct {
		at   time.Duration // after t0
		want time.Duration // release after t0; -1: dropped
	}
	tests := []struct {
		name     string
		line     delayLine
		arrivals []arrival
	}{
		{"fixed delay", delayLine{delay: 10 * ms, rand: seq(0.5)},
			[]arrival{{0, 10 * ms}, {5 * ms, 15 * ms}}},
		// jitter spreads over delay ± jitter: 0 → -jitter, 0.75 → +jitter/2
		{"jitter", delayLine{delay: 10 * ms, jitter: 8 * ms, rand: seq(0, 0.75)},
			[]arrival{{0, 2 * ms}, {20 * ms, 34 * ms}}},
		// a frame never leaves before the one ahead of it: no reordering
		{"no reordering", delayLine{delay: 10 * ms, jitter: 8 * ms, rand: seq(1, 0)},
			[]arrival{{0, 18 * ms}, {1 * ms, 18 * ms}, {30 * ms, 48 * ms}, {31 * ms, 48 * ms}}},
		{"never before arrival", delayLine{delay: 2 * ms, jitter: 8 * ms, rand: seq(0)},
			[]arrival{{0, 0}, {3 * ms, 3 * ms}}},
		// loss draws first: a draw below loss drops the frame
		{"loss", delayLine{delay: 10 * ms, loss: 0.01, rand: seq(0.005, 0.5, 0.02)},
			[]arrival{{0, -1}, {1 * ms, 11 * ms}}},
	}
	for _, tt := range tests {
		l := tt.line
		for i, a := range tt.arrivals {
			release, kept := l.admit(t0.Add(a.at))
			got := release.Sub(t0)
			if !kept {
				got = -1
			}
			if got != a.want {
				t.Errorf("%s: frame %d arriving at %v: released at %v, want %v (-1: dropped)", tt.name, i, a.at, got, a.want)
			}
		}
	}
}

func TestProfileOfHost(t *testing.T) {
	tests := []struct {
		hc                HostConfig
		profile, rate     string
		wantErrSubstrings string
	}{
		{HostConfig{}, "", "", ""},
		{HostConfig{Profile: "none"}, "", "", ""},
		{HostConfig{Profile: "wifi"}, "wifi", WiFi.Rate, ""},
		{HostConfig{Profile: "WiFi"}, "wifi", WiFi.Rate, ""},
		{HostConfig{Profile: "wifi", Rate: "10mbit"}, "wifi", "10mbit", ""},
		{HostConfig{Profile: "lte"}, "", "", `Profile = "lte": unknown profile: want none or one of android, wifi`},
		{HostConfig{Profile: "android"}, "android", "", ""},
	}
	for _, tt := range tests {
		err := tt.hc.Validate()
		if tt.wantErrSubstrings != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstrings) {
				t.Errorf("HostConfig%+v.Validate() = %v, want an error with %q", tt.hc, err, tt.wantErrSubstrings)
			}
			continue
		}
		if err != nil {
			t.Errorf("HostConfig%+v.Validate() = %v", tt.hc, err)
		}
		got := tt.hc.withDefaults()
		if got.Profile != tt.profile || got.Rate != tt.rate {
			t.Errorf("HostConfig%+v: profile %q rate %q, want %q and %q", tt.hc, got.Profile, got.Rate, tt.profile, tt.rate)
		}
	}
	c := Config{Nodes: 3, Profile: []string{"wifi", "none"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Profile has 2 values for 3 nodes") {
		t.Errorf("Config with 2 profiles for 3 nodes: Validate() = %v", err)
	}
	c = Config{Nodes: 3, Profile: []string{"none", "wifi", "wifi"}}
	if got := c.Host(2).Profile; got != "wifi" {
		t.Errorf("profile of n3: %q, want wifi", got)
	}
}
