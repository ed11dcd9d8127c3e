package job

import (
	"testing"
	"time"
)

func TestHung(t *testing.T) {
	s := func(rank int, silent, gap time.Duration, busy float64) Silent {
		return Silent{Rank: rank, Node: "n2", For: Duration(silent), Gap: Duration(gap), Every: Duration(gap / 100), Busy: busy}
	}
	const auto, off = Duration(0), HangOff
	tests := []struct {
		name     string
		silent   []Silent
		after    Duration
		wantHung bool
		wantRank int
	}{
		{"nothing silent", nil, auto, false, 0},
		{"stopped past the floor", []Silent{s(3, 12*time.Second, 200*time.Millisecond, 0)}, auto, true, 3},
		{"stopped within the floor", []Silent{s(3, 9*time.Second, 200*time.Millisecond, 0)}, auto, false, 0},
		{"past the floor, within ten gaps", []Silent{s(3, 15*time.Second, 2*time.Second, 0)}, auto, false, 0},
		{"past ten gaps", []Silent{s(3, 21*time.Second, 2*time.Second, 0)}, auto, true, 3},
		// Each iteration twice as long: its records come twice as far apart,
		// a silence of two usual gaps is far from ten.
		{"merely slow", []Silent{s(1, 800*time.Millisecond, 400*time.Millisecond, 1)}, auto, false, 0},
		{"first iteration, however long", []Silent{s(0, time.Hour, 0, 0)}, auto, false, 0},
		{"off", []Silent{s(3, time.Hour, 200*time.Millisecond, 0)}, off, false, 0},
		{"given bound passed", []Silent{s(3, 3500*time.Millisecond, 200*time.Millisecond, 0)}, Duration(3 * time.Second), true, 3},
		{"given bound not passed", []Silent{s(3, 2500*time.Millisecond, 200*time.Millisecond, 0)}, Duration(3 * time.Second), false, 0},
		{"given bound below ten gaps", []Silent{s(3, 5*time.Second, 2*time.Second, 0)}, Duration(3 * time.Second), true, 3},
		{"every rank computing a long phase", []Silent{
			s(0, time.Minute, 200*time.Millisecond, 1), s(1, time.Minute, 200*time.Millisecond, 0.12),
		}, auto, false, 0},
		{"the idle one named, not the longest silent", []Silent{
			s(0, 14*time.Second, 200*time.Millisecond, 0.3), s(1, 13*time.Second, 200*time.Millisecond, 0.25),
			s(2, 12*time.Second, 200*time.Millisecond, 0),
		}, auto, true, 2},
		{"the idle one within its bound, a busy one past it", []Silent{
			s(0, 12*time.Second, 200*time.Millisecond, 0.3), s(2, 9*time.Second, 200*time.Millisecond, 0),
		}, auto, false, 0},
		{"the idle one in its first iteration", []Silent{
			s(0, 12*time.Second, 200*time.Millisecond, 0.3), s(2, time.Minute, 0, 0),
		}, auto, false, 0},
		{"unknown counts as idle", []Silent{s(0, 12*time.Second, 200*time.Millisecond, 0.3), s(1, 12*time.Second, 200*time.Millisecond, -1)}, auto, true, 1},
		{"seen idle before unknown", []Silent{s(0, 12*time.Second, 200*time.Millisecond, -1), s(1, 12*time.Second, 200*time.Millisecond, 0)}, auto, true, 1},
		{"two idle: the longest silent", []Silent{s(0, 11*time.Second, 200*time.Millisecond, 0), s(1, 12*time.Second, 200*time.Millisecond, 0)}, auto, true, 1},
		{"two idle alike: the lowest", []Silent{s(5, 12*time.Second, 200*time.Millisecond, 0), s(4, 12*time.Second, 200*time.Millisecond, 0)}, auto, true, 4},
	}
	for _, tt := range tests {
		h, got := Hung(tt.silent, tt.after)
		if got != tt.wantHung || got && h.Rank != tt.wantRank {
			t.Errorf("%s: Hung = %v (rank %d), want %v (rank %d)", tt.name, got, h.Rank, tt.wantHung, tt.wantRank)
		}
	}
}

func TestHangBound(t *testing.T) {
	tests := []struct {
		after  Duration
		gap    time.Duration
		want   time.Duration
		wantOK bool
	}{
		{0, 100 * time.Millisecond, HangFloor, true},
		{0, 5 * time.Second, 50 * time.Second, true},
		{0, 0, 0, false},
		{Duration(2 * time.Second), time.Minute, 2 * time.Second, true},
		{HangOff, time.Second, 0, false},
	}
	for _, tt := range tests {
		got, ok := HangBound(tt.after, tt.gap)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("HangBound(%v, %v) = %v, %v; want %v, %v", tt.after, tt.gap, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestHangString(t *testing.T) {
	h := Hang{Silent: Silent{Rank: 3, Node: "n2", For: Duration(41 * time.Second), Every: Duration(400 * time.Millisecond), Busy: 0}}
	if got, want := h.String(), "rank 3 on n2 made no snapshot call for 41 s (usually every 400 ms), idle: hung"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	h = Hang{Silent: Silent{Rank: 0, Node: "n1", For: Duration(12 * time.Second), Every: Duration(20 * time.Microsecond), Busy: -1}}
	if got, want := h.String(), "rank 0 on n1 made no snapshot call for 12 s (usually every 0.02 ms): hung"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
