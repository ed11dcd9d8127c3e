package traffic

import (
	"math"
	"testing"

	"shoal/internal/job"
)

func TestTrafficProfile(t *testing.T) {
	reports := map[int]Report{
		0: {Rank: 0, SecondsTotal: 10, SecondsMPI: 2, Sent: []PeerReport{{Peer: 1, Bytes: 1000, Messages: 10}, {Peer: 2, Bytes: 50, Messages: 5}}},
		1: {Rank: 1, SecondsTotal: 20, SecondsMPI: 10, Sent: []PeerReport{{Peer: 0, Bytes: 2000, Messages: 20}, {Peer: 1, Bytes: 9, Messages: 9}}},
		2: {Rank: 2, SecondsTotal: 5},
	}
	p := Profile(reports, func(rank int) float64 { return 100 })
	// 0↔1: 1000/10 + 2000/20 = 200 B/s, 1 + 1 = 2 msgs/s; 0↔2: 50/10 = 5 B/s. A
	// rank's traffic to itself is not a flow.
	want := []job.Flow{{From: 0, To: 1, Bytes: 200, Messages: 2}, {From: 0, To: 2, Bytes: 5, Messages: 0.5}}
	if len(p.Flows) != len(want) {
		t.Fatalf("flows %+v, want %+v", p.Flows, want)
	}
	for i := range want {
		if p.Flows[i] != want[i] {
			t.Errorf("flow %d = %+v, want %+v", i, p.Flows[i], want[i])
		}
	}
	// Outside MPI: 0.8, 0.5, 1 of the time, at speed 100.
	if w := (0.8 + 0.5 + 1) * 100 / 3; math.Abs(p.Work-w) > 1e-9 {
		t.Errorf("work %g, want %g", p.Work, w)
	}
	if f := (0.2 + 0.5 + 0) / 3; math.Abs(p.MPIFraction-f) > 1e-9 {
		t.Errorf("MPI fraction %g, want %g", p.MPIFraction, f)
	}
	for _, tt := range []struct {
		old, next float64
		want      bool
	}{{200, 210, false}, {200, 300, true}, {200, 100, true}, {0, 0, false}, {0, 1, true}} {
		o := &job.TrafficProfile{Flows: []job.Flow{{Bytes: tt.old}}}
		n := &job.TrafficProfile{Flows: []job.Flow{{Bytes: tt.next}}}
		if got := Changed(o, n); got != tt.want {
			t.Errorf("Changed(%g → %g) = %v, want %v", tt.old, tt.next, got, tt.want)
		}
	}
	if !Changed(nil, p) {
		t.Error("Changed(nil, p) = false: a first profile is always taken")
	}
}

// A profile of another count replaces the one recorded, however alike.
func TestTrafficOfAnotherCount(t *testing.T) {
	old := &job.TrafficProfile{Ranks: 7, Flows: []job.Flow{{From: 0, To: 1, Bytes: 100}}}
	same := &job.TrafficProfile{Ranks: 7, Flows: []job.Flow{{From: 0, To: 1, Bytes: 110}}}
	resized := &job.TrafficProfile{Ranks: 4, Flows: []job.Flow{{From: 0, To: 1, Bytes: 100}}}
	if Changed(old, same) {
		t.Error("a profile 10 % off replaced the one recorded")
	}
	if !Changed(old, resized) {
		t.Error("a profile of 4 ranks did not replace one of 7")
	}
}
