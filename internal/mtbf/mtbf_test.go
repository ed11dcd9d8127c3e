package mtbf

import (
	"fmt"
	"testing"
	"time"
)

func TestEstimate(t *testing.T) {
	for _, c := range []struct {
		e        Estimate
		nodes    int
		node     time.Duration
		job      time.Duration
		describe string
	}{
		// Nothing watched yet: the prior alone.
		{Estimate{}, 4, time.Hour, 15 * time.Minute, "no node failed in 0s of node time"},
		// A day of 4 nodes without a failure: the record outweighs the prior.
		{Estimate{NodeTime: 96 * time.Hour}, 4, 97 * time.Hour, 97 * time.Hour / 4, "no node failed in 96h0m0s of node time"},
		// 5 failures in 5 node-hours: about one an hour, whatever the prior.
		{Estimate{Failures: 5, NodeTime: 5 * time.Hour}, 2, time.Hour, 30 * time.Minute, "5 nodes failed in 5h0m0s of node time"},
		{Estimate{Failures: 1, NodeTime: time.Hour}, 1, time.Hour, time.Hour, "1 node failed in 1h0m0s of node time"},
		// No nodes counts as one.
		{Estimate{}, 0, time.Hour, time.Hour, "no node failed in 0s of node time"},
	} {
		if got := c.e.NodeMTBF(); got != c.node {
			t.Errorf("%+v: node MTBF %v, want %v", c.e, got, c.node)
		}
		if got := c.e.Job(c.nodes); got != c.job {
			t.Errorf("%+v over %d nodes: job MTBF %v, want %v", c.e, c.nodes, got, c.job)
		}
		if got := c.e.String(); got != c.describe {
			t.Errorf("%+v: %q, want %q", c.e, got, c.describe)
		}
	}
}

// The record sums the live nodes' time between changes, and the estimate
// follows the failure rate: failures shorten the MTBF, a quiet stretch
// lengthens it again.
func TestRecord(t *testing.T) {
	var r Record
	t0 := time.Unix(1000, 0)
	if e := r.At(t0); e != (Estimate{}) {
		t.Fatalf("before any observation: %+v", e)
	}
	r.Observe(t0, 4)
	r.Observe(t0.Add(time.Hour), 3) // 4 node-hours
	r.Failed(t0.Add(time.Hour), "n4")
	e := r.At(t0.Add(2 * time.Hour)) // and 3 more
	if e.Failures != 1 || e.NodeTime != 7*time.Hour {
		t.Fatalf("record %+v, want 1 failure in 7h", e)
	}
	quiet := e.Job(3)
	for i := 0; i < 6; i++ {
		r.Failed(t0.Add(2*time.Hour), fmt.Sprintf("m%d", i))
	}
	busy := r.At(t0.Add(2 * time.Hour)).Job(3)
	if !(busy < quiet/3) {
		t.Errorf("7 failures: job MTBF %v, want well under the %v of 1", busy, quiet)
	}
	later := r.At(t0.Add(100 * time.Hour)).Job(3)
	if !(later > busy*10) {
		t.Errorf("98 quiet hours later: job MTBF %v, want far above %v", later, busy)
	}
	// One loss reported twice, by a job and then by the failure detector, counts
	// once; the node's next loss counts again.
	n := r.At(t0.Add(100 * time.Hour)).Failures
	r.Failed(t0.Add(100*time.Hour), "n2")
	r.Failed(t0.Add(100*time.Hour+3*time.Second), "n2")
	if got := r.At(t0.Add(100 * time.Hour)).Failures; got != n+1 {
		t.Errorf("n2 lost once, reported twice 3 s apart: %d failures counted, want %d", got-n, 1)
	}
	r.Failed(t0.Add(100*time.Hour+time.Minute), "n2")
	if got := r.At(t0.Add(100 * time.Hour)).Failures; got != n+2 {
		t.Errorf("n2 lost again a minute later: %d failures counted, want 2", got-n)
	}
	// Time going backwards (a clock step) adds nothing.
	before := r.At(t0.Add(100 * time.Hour))
	if after := r.At(t0.Add(99 * time.Hour)); after != before {
		t.Errorf("a step back changed the record: %+v to %+v", before, after)
	}
}
