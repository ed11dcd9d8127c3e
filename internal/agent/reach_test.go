package agent

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/node"
)

func TestReachCheck(t *testing.T) {
	was := time.Now().Add(-time.Hour)
	errs := map[string]error{
		"a:1": syscall.ECONNREFUSED,
		"b:1": fmt.Errorf("dial tcp b:1: %w", syscall.ECONNRESET),
		"c:1": context.DeadlineExceeded, // no answer: membership's to judge
		"d:1": nil,
	}
	dial := func(ctx context.Context, addr string) error { return errs[addr] }
	nodes := []node.Node{
		{Name: "refuses", API: "a:1", State: "alive", Since: was, Ranks: 3},
		{Name: "resets", API: "b:1", State: "suspect", Since: was},
		{Name: "silent", API: "c:1", State: "alive", Since: was},
		{Name: "answers", API: "d:1", State: "alive", Since: was, Ranks: 2},
		{Name: "dead", API: "a:1", State: "dead", Since: was},
		{Name: "self", API: "a:1", State: "alive", Since: was, Local: true},
	}
	var c reachCheck
	c.mark(context.Background(), nodes, dial)
	for _, tt := range []struct {
		name, state string
		ranks       int
	}{
		{"refuses", StateUnreachable, 0}, {"resets", StateUnreachable, 0}, {"silent", "alive", 0},
		{"answers", "alive", 2}, {"dead", "dead", 0}, {"self", "alive", 0},
	} {
		for _, n := range nodes {
			if n.Name == tt.name && (n.State != tt.state || n.Ranks != tt.ranks) {
				t.Errorf("%s: got state %s, %d ranks; want %s, %d", n.Name, n.State, n.Ranks, tt.state, tt.ranks)
			}
		}
	}
	// Within reachMemo the nodes are not dialled again.
	dials := 0
	counting := func(ctx context.Context, addr string) error { dials++; return dial(ctx, addr) }
	c.mark(context.Background(), []node.Node{{Name: "answers", API: "d:1", State: "alive"}, {Name: "new", API: "d:1", State: "alive"}}, counting)
	if dials != 1 {
		t.Errorf("a check within %s of the last dialled %d nodes, want 1 (the node not checked yet)", reachMemo, dials)
	}
	// SINCE counts from the first refusal seen, not from the last check.
	first := nodes[0].Since
	again := []node.Node{{Name: "refuses", API: "a:1", State: "alive", Since: was}}
	c.mark(context.Background(), again, dial)
	if got := again[0].Since; !got.Equal(first) {
		t.Errorf("second check: since %v, want the first refusal's %v", got, first)
	}
}

// A check that began before a node's agent was killed and ends after a newer
// check saw the refusal leaves the newer result standing, for itself and for
// the checks that follow within reachMemo.
func TestReachCheckOlderCheckEndsLast(t *testing.T) {
	var c reachCheck
	dialled := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	older := []node.Node{{Name: "n4", API: "n4:1", State: "alive"}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.mark(context.Background(), older, func(ctx context.Context, addr string) error {
			close(dialled)
			<-release // the agent answered, then was killed while this check waited
			return nil
		})
	}()
	<-dialled
	time.Sleep(time.Millisecond) // the newer check begins strictly later
	newer := []node.Node{{Name: "n4", API: "n4:1", State: "alive"}}
	c.mark(context.Background(), newer, func(ctx context.Context, addr string) error { return syscall.ECONNREFUSED })
	close(release)
	wg.Wait()
	if newer[0].State != StateUnreachable {
		t.Fatalf("newer check: state %s, want %s", newer[0].State, StateUnreachable)
	}
	if older[0].State != StateUnreachable {
		t.Errorf("older check ending after the newer one: state %s, want the newer result %s", older[0].State, StateUnreachable)
	}
	later := []node.Node{{Name: "n4", API: "n4:1", State: "alive"}}
	c.mark(context.Background(), later, func(ctx context.Context, addr string) error {
		t.Error("a check within reachMemo dialled again")
		return nil
	})
	if later[0].State != StateUnreachable {
		t.Errorf("a check within reachMemo after both: state %s, want %s", later[0].State, StateUnreachable)
	}
}

// A node seen refusing stays unreachable through a check it does not answer
// in time (no news), and is alive again once a connection to it is made.
func TestReachCheckSilenceKeepsRefusal(t *testing.T) {
	var c reachCheck
	check := func(err error) string {
		c.mu.Lock()
		c.checked = nil // past reachMemo: dial again
		c.mu.Unlock()
		nodes := []node.Node{{Name: "n4", API: "n4:1", State: "alive"}}
		c.mark(context.Background(), nodes, func(ctx context.Context, addr string) error { return err })
		return nodes[0].State
	}
	if got := check(context.DeadlineExceeded); got != "alive" {
		t.Errorf("a node never seen refusing, silent: %s, want alive (membership's to judge)", got)
	}
	if got := check(syscall.ECONNREFUSED); got != StateUnreachable {
		t.Fatalf("refusing: %s, want %s", got, StateUnreachable)
	}
	if got := check(context.DeadlineExceeded); got != StateUnreachable {
		t.Errorf("refused, then silent: %s, want %s", got, StateUnreachable)
	}
	if got := check(nil); got != "alive" {
		t.Errorf("refused, then answering: %s, want alive", got)
	}
}

// A node whose agent answered a request within reachMemo is not dialled and
// stays alive; a refusal seen after that answer still stands.
func TestReachCheckHeard(t *testing.T) {
	now := time.Now()
	heard := map[string]time.Time{"a:1": now, "b:1": now.Add(-time.Hour)}
	c := reachCheck{heard: func(api string) time.Time { return heard[api] }}
	var dialled []string
	dial := func(ctx context.Context, addr string) error {
		dialled = append(dialled, addr)
		return syscall.ECONNREFUSED
	}
	nodes := []node.Node{
		{Name: "answered", API: "a:1", State: "alive"},
		{Name: "long-ago", API: "b:1", State: "alive"},
	}
	c.mark(context.Background(), nodes, dial)
	if len(dialled) != 1 || dialled[0] != "b:1" {
		t.Errorf("dialled %v, want only b:1 (a:1 answered just now)", dialled)
	}
	if nodes[0].State != "alive" || nodes[1].State != StateUnreachable {
		t.Errorf("states %s, %s; want alive, %s", nodes[0].State, nodes[1].State, StateUnreachable)
	}
	// An answer older than the refusal the check saw does not hide it.
	heard["b:1"] = now.Add(-time.Millisecond)
	again := []node.Node{{Name: "long-ago", API: "b:1", State: "alive"}}
	c.mark(context.Background(), again, dial)
	if again[0].State != StateUnreachable {
		t.Errorf("an answer older than the refusal seen made the node %s, want %s", again[0].State, StateUnreachable)
	}
	// A newer answer does: the agent is back.
	heard["b:1"] = time.Now()
	again[0].State = "alive"
	c.mark(context.Background(), again, dial)
	if again[0].State != "alive" {
		t.Errorf("an answer newer than the refusal left the node %s, want alive", again[0].State)
	}
}

// A check over more nodes than reachLimit dials reachLimit of them, those
// checked longest ago first, so that the next checks dial the others; a node
// not dialled that was seen refusing stays unreachable.
func TestReachCheckBounded(t *testing.T) {
	n := 2*reachLimit + 10
	nodes := func() []node.Node {
		out := make([]node.Node, n)
		for i := range out {
			out[i] = node.Node{Name: fmt.Sprintf("n%d", i), API: fmt.Sprintf("h%d:1", i), State: "alive"}
		}
		return out
	}
	var c reachCheck
	refusing := "n0"
	c.since = map[string]time.Time{refusing: time.Now().Add(-time.Minute)} // seen refusing, never checked here
	var mu sync.Mutex
	dialled := map[string]int{}
	dial := func(ctx context.Context, addr string) error {
		mu.Lock()
		defer mu.Unlock()
		dialled[addr]++
		if addr == "h0:1" {
			return syscall.ECONNREFUSED
		}
		return nil
	}
	for round := 1; round <= 3; round++ {
		ns := nodes()
		before := len(dialled)
		c.mark(context.Background(), ns, dial)
		if got, want := len(dialled)-before, min(reachLimit, n-before); got != want {
			t.Errorf("check %d dialled %d nodes not dialled before, want %d", round, got, want)
		}
		if ns[0].State != StateUnreachable {
			t.Errorf("check %d: %s is %s, want %s", round, refusing, ns[0].State, StateUnreachable)
		}
	}
	for addr, k := range dialled {
		if k != 1 {
			t.Errorf("%s dialled %d times in three checks within %v, want once", addr, k, reachMemo)
		}
	}
	if len(dialled) != n {
		t.Errorf("three checks dialled %d of %d nodes, want all", len(dialled), n)
	}
}
