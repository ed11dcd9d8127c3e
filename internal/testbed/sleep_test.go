package testbed

import (
	"errors"
	"testing"
	"time"
)

func TestParseSleep(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"15", 15 * time.Second, false},
		{"0.5", 500 * time.Millisecond, false},
		{"86400", MaxSleep, false},
		{"0", 0, true},
		{"-3", 0, true},
		{"86401", 0, true},
		{"15s", 0, true},
		{"NaN", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSleep(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSleep(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseSleep(%q): error %v does not wrap ErrInvalidConfig", tt.in, err)
		}
	}
}

func TestWakeDue(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		wakeAt, now time.Time
		want        bool
	}{
		{time.Time{}, at, false},                             // awake
		{at, at.Add(-time.Second), false},                    // still asleep
		{at, at.Add(time.Second), false},                     // the waker's turn
		{at, at.Add(2*time.Second + time.Millisecond), true}, // the waker is late: it died
	}
	for _, tt := range tests {
		if got := wakeDue(tt.wakeAt, tt.now); got != tt.want {
			t.Errorf("wakeDue(%v, %v) = %v, want %v", tt.wakeAt, tt.now, got, tt.want)
		}
	}
}
