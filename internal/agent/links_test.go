package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/links"
	"shoal/test/poll"
)

// TestStaleLinkRowAnsweredAtOnce: a node's row of links read longer ago than
// rowTTL is answered as it is, and read again in the background, so that a
// placement does not wait on the nodes it has heard from before.
func TestStaleLinkRowAnsweredAtOnce(t *testing.T) {
	agents := startCluster(t, 2)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive"))
	p := agents[0].links
	ctx := context.Background()
	if _, err := p.Links(ctx, true); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	_, read := p.peerRows["n2"]
	stale := links.Link{From: "n2", To: "n1", Bandwidth: 12345, Measured: time.Now().Add(-time.Hour)}
	p.peerRows["n2"] = peerRow{links: []links.Link{stale}, read: time.Now().Add(-time.Hour)}
	p.mu.Unlock()
	if !read {
		t.Fatal("n2's row was not kept after it was read")
	}
	has := func(l links.List) bool {
		for _, x := range l.Links {
			if x.From == "n2" && x.To == "n1" && x.Bandwidth == 12345 && !x.Estimated {
				return true
			}
		}
		return false
	}
	l, err := p.Links(ctx, true)
	if err != nil || !has(l) {
		t.Fatalf("links with n2's row an hour old: %v, %+v; want that row, as it was", err, l.Links)
	}
	poll.Until(t, 5*time.Second, func() string {
		p.mu.Lock()
		r := p.peerRows["n2"]
		p.mu.Unlock()
		if time.Since(r.read) > rowTTL || r.reading {
			return fmt.Sprintf("n2's row read %v ago (reading %v): not read again in the background", time.Since(r.read).Round(time.Millisecond), r.reading)
		}
		return ""
	})
	if l, err := p.Links(ctx, true); err != nil || has(l) {
		t.Errorf("links after the row was read again: %v, %+v; want n2's own row", err, l.Links)
	}
}

// TestWarmReadsRows: Warm reads every live node's row in the background, and
// a read of every row made while a warm-up is under way waits for it.
func TestWarmReadsRows(t *testing.T) {
	agents := startCluster(t, 3)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive n3=alive"))
	p := agents[0].links
	p.Warm()
	poll.Until(t, 5*time.Second, func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.warming != nil {
			return "the warm-up has not ended"
		}
		for _, n := range []string{"n2", "n3"} {
			if _, ok := p.peerRows[n]; !ok {
				return n + "'s row not read by the warm-up"
			}
		}
		return ""
	})

	// A warm-up under way, as far as Links can tell.
	under := make(chan struct{})
	p.mu.Lock()
	p.warming = under
	p.mu.Unlock()
	answered := make(chan error, 1)
	go func() {
		_, err := p.Links(context.Background(), true)
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("Links(all) answered (%v) while a warm-up was under way", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.mu.Lock()
	p.warming = nil
	p.mu.Unlock()
	close(under)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}

// TestReachRecorded: a peer whose new connections time out is recorded so in
// this node's row, beside the link measured over the connection the client
// keeps, and as reachable once connections are made again.
func TestReachRecorded(t *testing.T) {
	agents := startCluster(t, 2)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive"))
	p := agents[0].links
	var blocked atomic.Bool
	blocked.Store(true)
	p.mu.Lock()
	p.dial = func(ctx context.Context, addr string) error {
		if blocked.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return dialTCP(ctx, addr)
	}
	p.mu.Unlock()
	row := func() links.Link {
		l, err := p.Links(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range l.Links {
			if x.To == "n2" {
				return x
			}
		}
		return links.Link{}
	}
	p.round()
	got := row()
	if got.Reach == nil || got.Reach.Result != links.TimedOut || got.Unmeasured() {
		t.Errorf("n1's link to n2 after a round with connects timing out = %+v (reach %+v), want measured and timed out", got, got.Reach)
	}
	blocked.Store(false)
	p.checkReach(p.livePeers())
	if got := row(); got.Reach == nil || got.Reach.Result != links.Reachable {
		t.Errorf("n1's link to n2 once connects are made = %+v (reach %+v), want reachable", got, got.Reach)
	}
}

// TestReachBounded: a check dials at most reachPerCheck peers, those checked
// longest ago first, so a node's cost does not grow with the cluster and every
// peer comes round in ceil(n/reachPerCheck) checks.
func TestReachBounded(t *testing.T) {
	p := &linkProber{a: &Agent{cfg: Config{Name: "n0"}, log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		row: map[string]links.Link{}}
	var mu sync.Mutex
	dialled := map[string]int{}
	p.dial = func(ctx context.Context, addr string) error {
		mu.Lock()
		dialled[addr]++
		mu.Unlock()
		return nil
	}
	addrs := map[string]string{}
	for i := 1; i <= 40; i++ {
		addrs[fmt.Sprintf("n%d", i)] = fmt.Sprintf("10.0.0.%d:7946", i)
	}
	for check := 1; check <= 3; check++ {
		before := 0
		for _, n := range dialled {
			before += n
		}
		p.checkReach(addrs)
		after := 0
		for _, n := range dialled {
			after += n
		}
		if after-before != reachPerCheck {
			t.Errorf("check %d dialled %d peers, want %d", check, after-before, reachPerCheck)
		}
	}
	if len(dialled) != 40 {
		t.Errorf("after 3 checks %d of 40 peers were dialled, want all", len(dialled))
	}
	for addr, n := range dialled {
		if n > 2 {
			t.Errorf("%s dialled %d times in 3 checks of 16 among 40", addr, n)
		}
	}
}

// TestWarmRowReadsOne: a takeover's fence reads one node's row after its
// revoke there: that node's row only, and none it already holds again.
func TestWarmRowReadsOne(t *testing.T) {
	agents := startCluster(t, 3)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive n3=alive"))
	p := agents[0].links
	n2 := agents[1]
	p.warmRow(context.Background(), "n2", n2.APIAddr())
	p.mu.Lock()
	r, ok := p.peerRows["n2"]
	_, other := p.peerRows["n3"]
	p.mu.Unlock()
	if !ok || other {
		t.Fatalf("after warmRow(n2): n2's row held %v, n3's %v; want n2's alone", ok, other)
	}
	p.warmRow(context.Background(), "n2", n2.APIAddr())
	p.mu.Lock()
	again := p.peerRows["n2"].read
	p.mu.Unlock()
	if !again.Equal(r.read) {
		t.Error("warmRow read again a row this node held")
	}
}
