package links

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"
)

func dialErr(err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: err}}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err    error
		want   Result
		wantOK bool
	}{
		{nil, Reachable, true},
		{dialErr(syscall.ECONNREFUSED), Refused, true},
		{dialErr(syscall.ECONNRESET), Refused, true},
		{dialErr(syscall.EHOSTUNREACH), NoRoute, true},
		{dialErr(syscall.ENETUNREACH), NoRoute, true},
		{dialErr(syscall.ETIMEDOUT), TimedOut, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, TimedOut, true},
		{fmt.Errorf("check n3: %w", context.DeadlineExceeded), TimedOut, true},
		{context.Canceled, "", false},        // the check was stopped: nothing learnt
		{dialErr(syscall.EMFILE), "", false}, // this node's own trouble
		{errors.New("something else"), "", false},
	} {
		got, ok := Classify(tt.err)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Classify(%v) = %q, %v; want %q, %v", tt.err, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestFresh(t *testing.T) {
	now := time.Unix(5000, 0)
	for _, tt := range []struct {
		r    *Reach
		want bool
	}{
		{nil, false},
		{&Reach{Result: Refused}, false}, // never checked
		{&Reach{Result: Refused, Checked: now.Add(-time.Minute)}, true},
		{&Reach{Result: Refused, Checked: now.Add(-90 * time.Second)}, true}, // exactly maxAge
		{&Reach{Result: Reachable, Checked: now.Add(-91 * time.Second)}, false},
	} {
		if got := tt.r.Fresh(now, 90*time.Second); got != tt.want {
			t.Errorf("%+v.Fresh = %v, want %v", tt.r, got, tt.want)
		}
	}
}

func reachLink(from, to string, r Result, checked time.Time) Link {
	return Link{From: from, To: to, Reach: &Reach{Result: r, Checked: checked}}
}

func TestMatrixAndBlocks(t *testing.T) {
	now := time.Unix(5000, 0)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	rows := []Link{
		reachLink("n2", "n3", Reachable, ago(80)),
		reachLink("n2", "n3", TimedOut, ago(12)), // newer: replaces the one above
		reachLink("n3", "n2", Reachable, ago(5)),
		reachLink("n1", "n3", Refused, ago(3)),
		reachLink("n3", "n1", Refused, ago(4)),
		reachLink("n1", "n2", NoRoute, ago(200)), // stale: dropped
		reachLink("n2", "n1", Reachable, ago(1)),
		reachLink("n4", "n1", TimedOut, ago(2)),
		{From: "n1", To: "n4", RTT: 1, Bandwidth: 1},                                             // no Reach: an old node's row
		reachLink("n1", "n1", Refused, ago(1)),                                                   // to itself: ignored
		{From: "n3", To: "n4", Estimated: true, Reach: &Reach{Result: Refused, Checked: ago(1)}}, // Complete's: its own fact
	}
	m := Matrix(rows, now, 90*time.Second)
	wantM := map[Pair]Reach{
		{"n2", "n3"}: {TimedOut, ago(12)},
		{"n3", "n2"}: {Reachable, ago(5)},
		{"n1", "n3"}: {Refused, ago(3)},
		{"n3", "n1"}: {Refused, ago(4)},
		{"n2", "n1"}: {Reachable, ago(1)},
		{"n4", "n1"}: {TimedOut, ago(2)},
		{"n3", "n4"}: {Refused, ago(1)},
	}
	if !reflect.DeepEqual(m, wantM) {
		t.Fatalf("Matrix = %v\nwant %v", m, wantM)
	}
	var got []string
	for _, b := range Blocks(m) {
		got = append(got, fmt.Sprintf("%v %s", b.OneWay(), b.Describe(now)))
	}
	want := []string{
		"false n1 -> n3 refused 3s ago; n3 -> n1 refused too",
		"true n2 -> n3 timed out 12s ago; n3 -> n2 reachable (one way only)",
		"false n3 -> n1 refused 4s ago; n1 -> n3 refused too",
		"false n3 -> n4 refused 1s ago; n4 -> n3 not checked",
		"false n4 -> n1 timed out 2s ago; n1 -> n4 not checked",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Blocks =\n%q\nwant\n%q", got, want)
	}
}

// A pair that cannot connect and was never measured still comes out of
// Complete, with its Reach alone, and the planner sees no link for it; a
// measured link carries its direction's newest Reach and its estimated
// reverse its own.
func TestCompleteCarriesReach(t *testing.T) {
	t0 := time.Unix(5000, 0)
	ab := link("a", "b", 1, 1000, false)
	ab.Reach = &Reach{Result: Reachable, Checked: t0}
	rows := []Link{
		ab,
		reachLink("a", "b", Reachable, t0.Add(time.Second)),
		reachLink("b", "a", TimedOut, t0),
		reachLink("a", "c", Refused, t0),
	}
	got := map[Pair]Link{}
	for _, l := range Complete([]string{"a", "b", "c"}, rows) {
		got[Pair{l.From, l.To}] = l
	}
	if l := got[Pair{"a", "b"}]; l.Estimated || l.Bandwidth != ab.Bandwidth || l.Reach == nil || !l.Reach.Checked.Equal(t0.Add(time.Second)) {
		t.Errorf("a->b = %+v, want measured with the newer Reach", l)
	}
	if l := got[Pair{"b", "a"}]; !l.Estimated || l.Reach == nil || l.Reach.Result != TimedOut {
		t.Errorf("b->a = %+v, want estimated from a->b with its own timed-out Reach", l)
	}
	if l, ok := got[Pair{"a", "c"}]; !ok || !l.Unmeasured() || l.Reach == nil || l.Reach.Result != Refused {
		t.Errorf("a->c = %+v (%v), want its Reach alone", l, ok)
	}
	if _, ok := got[Pair{"c", "a"}]; ok {
		t.Errorf("c->a = %+v, want none (nothing known)", got[Pair{"c", "a"}])
	}
	pl := ForPlanner(Complete([]string{"a", "b", "c"}, rows))
	if len(pl) != 1 {
		t.Errorf("ForPlanner = %v, want the a-b link alone", pl)
	}
}

func TestFreshReach(t *testing.T) {
	now := time.Unix(5000, 0)
	measured := link("a", "b", 1, 1000, false)
	measured.Reach = &Reach{Result: Reachable, Checked: now.Add(-time.Hour)}
	rows := []Link{
		measured, // its fact stale: kept as a measure alone
		reachLink("a", "c", Refused, now.Add(-time.Hour)),    // stale and nothing else: dropped
		reachLink("a", "d", TimedOut, now.Add(-time.Second)), // fresh: kept
	}
	got := FreshReach(rows, now, time.Minute)
	if len(got) != 2 || got[0].To != "b" || got[0].Reach != nil || got[0].Bandwidth != measured.Bandwidth || got[1].To != "d" || got[1].Reach == nil {
		t.Errorf("FreshReach = %+v, want a->b without its Reach and a->d as it was", got)
	}
	if measured.Reach == nil || rows[0].Reach == nil {
		t.Error("FreshReach changed its input")
	}
}
