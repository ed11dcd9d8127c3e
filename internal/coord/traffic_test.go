package coord

import (
	"math"
	"testing"

	"shoal/internal/traffic"

	"shoal/internal/job"
)

func TestTrafficProfile(t *testing.T) {
	reports := map[int]traffic.Report{
		0: {Rank: 0, SecondsTotal: 10, SecondsMPI: 2, Sent: []traffic.PeerReport{{Peer: 1, Bytes: 1000, Messages: 10}, {Peer: 2, Bytes: 50, Messages: 5}}},
		1: {Rank: 1, SecondsTotal: 20, SecondsMPI: 10, Sent: []traffic.PeerReport{{Peer: 0, Bytes: 2000, Messages: 20}, {Peer: 1, Bytes: 9, Messages: 9}}},
		2: {Rank: 2, SecondsTotal: 5},
	}
	p := profile(reports, func(rank int) float64 { return 100 })
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
		if got := changed(o, n); got != tt.want {
			t.Errorf("changed(%g → %g) = %v, want %v", tt.old, tt.next, got, tt.want)
		}
	}
	if !changed(nil, p) {
		t.Error("changed(nil, p) = false: a first profile is always taken")
	}
}

// TestCopiesNote: an epoch's line says how its copies crossed the
// network: as changes, compressed, both, or (whole and raw) nothing.
func TestCopiesNote(t *testing.T) {
	for _, c := range []struct {
		w    wireBytes
		want string
	}{
		{wireBytes{raw: 4e6, sent: 4e6, wire: 4e6}, ""},
		{wireBytes{}, ""},
		{wireBytes{raw: 4e6, sent: 4e6, wire: 1e6}, "; copies sent compressed: 4.0 MB as 1.0 MB"},
		{wireBytes{raw: 4e6, sent: 5e5, wire: 5e5}, "; copies sent as changes: 4.0 MB as 0.5 MB"},
		{wireBytes{raw: 4e6, sent: 2e6, wire: 1e6}, "; copies sent as changes: 4.0 MB as 2.0 MB; copies sent compressed: 2.0 MB as 1.0 MB"},
	} {
		b := &clusterBackend{wire: map[uint64]wireBytes{3: c.w}}
		if got := b.copiesNote(3); got != c.want {
			t.Errorf("copiesNote(%+v) = %q, want %q", c.w, got, c.want)
		}
		if _, ok := b.wire[3]; ok {
			t.Errorf("copiesNote(%+v) kept the epoch's count", c.w)
		}
	}
}
