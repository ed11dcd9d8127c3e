package jobstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"shoal/internal/job"
)

// client opens a node outside the cluster of servers, which follows the job
// store from them, the leader first, as an agent does, with long polls of a
// second.
func client(t *testing.T, name string, servers []*Store) *Store {
	return clientWaiting(t, name, servers, time.Second)
}

// clientWaiting is client with long polls of wait.
func clientWaiting(t *testing.T, name string, servers []*Store, wait time.Duration) *Store {
	t.Helper()
	fast := Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 300 * time.Millisecond}
	follow := func(ctx context.Context, after uint64) (FollowReply, error) {
		var err error
		for _, s := range servers {
			if !s.IsLeader() {
				continue
			}
			var r FollowReply
			if r, err = s.Follow(ctx, after, wait); err == nil {
				return r, nil
			}
		}
		for _, s := range servers {
			var r FollowReply
			if r, err = s.Follow(ctx, after, wait); err == nil {
				return r, nil
			}
		}
		return FollowReply{}, fmt.Errorf("no server answers: %v", err)
	}
	c, err := Open(Config{Node: name, Dir: t.TempDir(), Bind: "127.0.0.1:0", Timing: fast, Follow: follow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// follower reads job id's events from s as `shoal run` does, from seq 1 until
// the job ends, and sends them all.
func follower(t *testing.T, s *Store, id string) <-chan []job.Event {
	out := make(chan []job.Event, 1)
	go func() {
		var got []job.Event
		next := uint64(1)
		for {
			evs, ended, _, changed, err := s.Events(id, next)
			if err == nil {
				got = append(got, evs...)
				if len(evs) > 0 {
					next = evs[len(evs)-1].Seq + 1
				}
				if ended {
					out <- got
					return
				}
			}
			if changed == nil { // the job is not known here yet
				time.Sleep(20 * time.Millisecond)
				continue
			}
			<-changed
		}
	}()
	return out
}

func lines(n0, n int) []job.Event {
	var evs []job.Event
	for i := n0; i < n0+n; i++ {
		evs = append(evs, job.Event{Type: job.EventOutput, Message: fmt.Sprintf("[0] line %d", i)})
	}
	return evs
}

// wholeOutput checks that evs are seq 1..n with the lines 0..n-1, each once.
func wholeOutput(t *testing.T, evs []job.Event, n int) {
	t.Helper()
	if len(evs) != n {
		t.Errorf("got %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.Message != fmt.Sprintf("[0] line %d", i) {
			t.Fatalf("event %d = seq %d %q, want seq %d %q", i, e.Seq, e.Message, i+1, fmt.Sprintf("[0] line %d", i))
		}
	}
}

func TestMirrorFollowsEveryCommand(t *testing.T) {
	stores := cluster(t, 3)
	c := client(t, "n4", stores)
	if err := stores[0].Submit(job.Job{ID: "heat-1", State: job.Running}, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	got := follower(t, c, "heat-1")
	for i := 1; i < 40; i += 3 {
		if err := stores[0].Update("heat-1", nil, lines(i, 3), nil); err != nil {
			t.Fatal(err)
		}
	}
	ended := job.Job{ID: "heat-1", State: job.Succeeded, Ended: time.Now()}
	if err := stores[0].Update("heat-1", &ended, nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-got:
		wholeOutput(t, evs, 40)
	case <-time.After(20 * time.Second):
		t.Fatal("the client's follower never saw the job end")
	}
	if l, _, ok := c.mirrored(); !ok || l != "n1" {
		t.Errorf("client reads from the mirror %v, leader %q; want the mirror, n1", ok, l)
	}
	if c.Leader() != "n1" || c.IsLeader() {
		t.Errorf("client: Leader() = %q, IsLeader() = %v; want n1, false", c.Leader(), c.IsLeader())
	}
	if err := c.Update("heat-1", nil, lines(99, 1), nil); err == nil || !strings.Contains(err.Error(), "does not lead") {
		t.Errorf("a write on a client: got %v, want ErrNotLeader", err)
	}
	if _, err := c.Follow(context.Background(), 0, 0); err == nil {
		t.Error("a client answered Follow: want ErrNotServer")
	}
	servers, _ := c.Servers()
	if len(servers) != 3 {
		t.Errorf("client's servers = %v, want the three", servers)
	}
}

// A client learns of a new leader from the server it waits on as soon as that
// server does, not at the end of its long poll, though no command follows.
func TestMirrorLearnsNewLeader(t *testing.T) {
	stores := cluster(t, 3)
	c := clientWaiting(t, "n4", stores, time.Minute)
	waitFor(t, "the client knows n1 leads", func() bool { return c.Leader() == "n1" })
	stores[0].Close()
	waitFor(t, "the client knows the new leader", func() bool { l := c.Leader(); return l == "n2" || l == "n3" })
}

// A mirror far behind, or new, is sent the whole state; one within the kept
// commands is sent those after its index.
func TestFollowSendsStateWhenBehind(t *testing.T) {
	f := newFSM()
	cmd := func(i int) []byte {
		c := Command{Op: OpUpdate, ID: "j", Events: lines(i, 1)}
		if i == 0 {
			c = Command{Op: OpSubmit, ID: "j", Job: &job.Job{ID: "j"}}
		}
		b, _ := json.Marshal(c)
		return b
	}
	const n = recentEntries + 100
	for i := 0; i < n; i++ {
		f.applyAt(uint64(i+1)*2, cmd(i)) // Raft indices with gaps, as configuration entries leave
	}
	for _, tt := range []struct {
		after       uint64
		snap        bool
		entries     int
		firstLatest uint64
	}{
		{0, true, 0, 0},
		{10, true, 0, 0},
		{2 * 101, false, n - 101, 2 * 102},
		{2 * (n - 1), false, 1, 2 * n},
		{2 * n, false, 0, 0},
	} {
		r, err := f.since(tt.after)
		if err != nil {
			t.Fatal(err)
		}
		if (r.Snapshot != nil) != tt.snap || len(r.Entries) != tt.entries || r.Index != 2*n {
			t.Errorf("since(%d): snapshot %v, %d entries, index %d; want %v, %d, %d", tt.after, r.Snapshot != nil, len(r.Entries), r.Index, tt.snap, tt.entries, 2*n)
		}
		if tt.entries > 0 && r.Entries[0].Index != tt.firstLatest {
			t.Errorf("since(%d): first entry at %d, want %d", tt.after, r.Entries[0].Index, tt.firstLatest)
		}
	}
	// A mirror at 10 takes the state, then the next command.
	m := newMirror()
	r, _ := f.since(10)
	if err := m.take(r); err != nil {
		t.Fatal(err)
	}
	f.applyAt(2*n+2, cmd(n))
	r, _ = f.since(m.at())
	if err := m.take(r); err != nil {
		t.Fatal(err)
	}
	if m.at() != 2*n+2 || m.jobs["j"].NextSeq != f.jobs["j"].NextSeq || m.jobs["j"].outputs != f.jobs["j"].outputs {
		t.Errorf("mirror at %d, next seq %d; want %d, %d", m.at(), m.jobs["j"].NextSeq, 2*n+2, f.jobs["j"].NextSeq)
	}
}

// A Raft snapshot keeps the index; one written before it was kept still
// restores, its index unknown until the next command.
func TestSnapshotIndex(t *testing.T) {
	f := newFSM()
	b, _ := json.Marshal(Command{Op: OpSubmit, ID: "j", Job: &job.Job{ID: "j"}})
	f.applyAt(7, b)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g := newFSM()
	if err := g.Restore(io.NopCloser(strings.NewReader(string(snap.(snapshot))))); err != nil {
		t.Fatal(err)
	}
	if g.at() != 7 || g.jobs["j"] == nil {
		t.Errorf("restored at %d with %v; want 7 with job j", g.at(), g.jobs)
	}
	old := `{"j":{"job":{"id":"j"},"events":[],"next_seq":1}}`
	h := newFSM()
	if err := h.Restore(io.NopCloser(strings.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if h.at() != 0 || h.jobs["j"] == nil {
		t.Errorf("old snapshot restored at %d with %v; want 0 with job j", h.at(), h.jobs)
	}
	h.Apply(&raft.Log{Index: 9, Data: b})
	if r, _ := h.since(8); r.Snapshot != nil || len(r.Entries) != 1 {
		t.Errorf("after an old snapshot and entry 9, since(8) = %+v; want entry 9", r)
	}
	if r, _ := h.since(5); r.Snapshot == nil {
		t.Errorf("since(5) before what was kept: want the state, got %+v", r)
	}
}

// A node's reads move from the mirror to its Raft replica when it becomes a
// standby, and back when it is removed; a follower of a job's events reading
// across both switches sees every event once, in order.
func TestReadsSwitchKeepEvents(t *testing.T) {
	stores := cluster(t, 3)
	c := client(t, "n4", stores)
	if err := stores[0].Submit(job.Job{ID: "heat-1", State: job.Running}, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	got := follower(t, c, "heat-1")
	n := 1
	write := func(k int) {
		for ; k > 0; k-- {
			if err := stores[0].Update("heat-1", nil, lines(n, 2), nil); err != nil {
				t.Fatal(err)
			}
			n += 2
		}
	}
	write(5)
	waitFor(t, "the client reads the mirror", func() bool { _, _, ok := c.mirrored(); return ok })
	members := func(with bool) []Member {
		var ms []Member
		for i, s := range stores {
			ms = append(ms, Member{Name: s.cfg.Node, Raft: s.Addr(), Alive: true, Since: time.Unix(int64(i), 0)})
		}
		if with {
			ms = append(ms, Member{Name: "n4", Raft: c.Addr(), Alive: true, Since: time.Unix(9, 0)})
		}
		return ms
	}
	// Four live members: three voters and n4 a standby.
	if _, err := stores[0].Reconcile(members(true)); err != nil {
		t.Fatal(err)
	}
	write(5)
	waitFor(t, "the standby reads its Raft replica", func() bool { _, _, ok := c.mirrored(); return !ok && c.isServer() })
	write(5)
	// n4 is gone as membership sees it: removed, it follows the store again.
	if _, err := stores[0].Reconcile(members(false)); err != nil {
		t.Fatal(err)
	}
	write(5)
	waitFor(t, "the removed node reads the mirror again", func() bool { _, _, ok := c.mirrored(); return ok })
	write(5)
	ended := job.Job{ID: "heat-1", State: job.Succeeded, Ended: time.Now()}
	if err := stores[0].Update("heat-1", &ended, nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-got:
		wholeOutput(t, evs, n)
	case <-time.After(20 * time.Second):
		t.Fatal("the follower never saw the job end")
	}
}
