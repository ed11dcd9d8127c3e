package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"shoal/test/poll"
	"shoal/test/watch"
)

var testSecret = []byte("test secret: 0123456789abcdef")

// start runs one node on loopback with fast timings.
func start(t *testing.T, name string, secret []byte, logs *watch.Buffer) *Membership {
	t.Helper()
	c := DefaultLocalConfig()
	c.Name, c.BindPort, c.Secret = name, 0, secret
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	} else if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", name)
	}
	m, err := New(c, Meta{API: "127.0.0.1:1", Cores: 2, Arch: "amd64", OS: "linux"}, log)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return m
}

// states returns "name=state ..." for m's view of the cluster.
func states(m *Membership) string {
	var s []string
	for _, n := range m.Nodes() {
		s = append(s, n.Name+"="+n.State.String())
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func wantStates(ms []*Membership, want string) func() string {
	return func() string {
		for _, m := range ms {
			if got := states(m); got != want {
				return fmt.Sprintf("%s sees %q, want %q", m.Name(), got, want)
			}
		}
		return ""
	}
}

func cluster(t *testing.T, names ...string) []*Membership {
	t.Helper()
	var ms []*Membership
	for i, name := range names {
		m := start(t, name, testSecret, nil)
		if i > 0 {
			if err := m.Join([]string{ms[0].Addr()}); err != nil {
				t.Fatalf("%s joins %s: %v", name, ms[0].Addr(), err)
			}
		}
		ms = append(ms, m)
	}
	return ms
}

func TestThreeNodesSeeEachOther(t *testing.T) {
	ms := cluster(t, "n1", "n2", "n3")
	poll.Until(t, 5*time.Second, wantStates(ms, "n1=alive n2=alive n3=alive"))
	n, ok := ms[2].Node("n1")
	if !ok || n.Meta.Cores != 2 || n.Meta.API != "127.0.0.1:1" || n.Local {
		t.Errorf("n3's view of n1 = %+v, want cores 2, API 127.0.0.1:1, not local", n)
	}
	if self, _ := ms[0].Node("n1"); !self.Local {
		t.Errorf("n1's view of itself is not marked local")
	}
	// Metadata changes reach the others.
	meta := ms[0].Meta()
	meta.Labels = map[string]string{"room": "b"}
	if err := ms[0].SetMeta(meta, time.Second); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() string {
		if n, _ := ms[1].Node("n1"); n.Meta.Labels["room"] != "b" {
			return fmt.Sprintf("n2 sees n1's labels %v", n.Meta.Labels)
		}
		return ""
	})
}

func TestLeaveShowsLeft(t *testing.T) {
	ms := cluster(t, "n1", "n2", "n3")
	poll.Until(t, 5*time.Second, wantStates(ms, "n1=alive n2=alive n3=alive"))
	sub := ms[0].Subscribe()
	defer sub.Close()
	// Announced first, the node still a member: the others see it leaving.
	if err := ms[2].AnnounceLeaving(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() string {
		if n, _ := ms[0].Node("n3"); !n.Meta.Leaving || n.State != StateAlive {
			return fmt.Sprintf("n1 sees n3 %v, leaving %v: want alive and leaving", n.State, n.Meta.Leaving)
		}
		return ""
	})
	if err := ms[2].Leave(); err != nil {
		t.Fatal(err)
	}
	// Besides the gossiped flag, each node was told directly.
	poll.Until(t, 5*time.Second, func() string {
		for _, m := range ms[:2] {
			if !m.saidLeaving("n3") {
				return m.Name() + " has no notice from n3"
			}
		}
		return ""
	})
	ms[2].Shutdown()
	poll.Until(t, 5*time.Second, wantStates(ms[:2], "n1=alive n2=alive n3=left"))
	for ev := range sub.C {
		if ev.Node.Name == "n3" && ev.Type != EventUpdate {
			if ev.Type != EventLeave {
				t.Errorf("first event about n3 = %v, want leave", ev.Type)
			}
			break
		}
	}
	// Left nodes stay visible for a while, and stay left: no failure later.
	poll.Holds(t, time.Second, wantStates(ms[:2], "n1=alive n2=alive n3=left"))
}

func TestKilledNodeShowsSuspectThenDead(t *testing.T) {
	ms := cluster(t, "n1", "n2", "n3")
	poll.Until(t, 5*time.Second, wantStates(ms, "n1=alive n2=alive n3=alive"))
	sub := ms[0].Subscribe()
	defer sub.Close()
	killed := time.Now()
	ms[2].Shutdown() // no leave: as if killed
	poll.Until(t, 10*time.Second, wantStates(ms[:2], "n1=alive n2=alive n3=dead"))
	t.Logf("n3 declared dead on n1 and n2 %v after shutdown", time.Since(killed).Round(10*time.Millisecond))
	var seen []string
	for ev := range sub.C {
		if ev.Node.Name == "n3" {
			seen = append(seen, ev.Type.String())
			if ev.Type == EventFailed {
				break
			}
		}
	}
	// n1 sees n3 suspect only if n1's own probe failed first; n2 may have
	// declared n3 dead before n1 probed it.
	if last := seen[len(seen)-1]; last != "failed" {
		t.Errorf("events about n3 on n1 = %v, want ending in failed", seen)
	}
	n, _ := ms[0].Node("n3")
	if n.Since.Before(killed) {
		t.Errorf("n3's state change time %v is before the kill %v", n.Since, killed)
	}
}

func TestSuspectEventFromOwnProbe(t *testing.T) {
	ms := cluster(t, "n1", "n2")
	poll.Until(t, 5*time.Second, wantStates(ms, "n1=alive n2=alive"))
	sub := ms[0].Subscribe()
	defer sub.Close()
	ms[1].Shutdown()
	var seen []string
	for ev := range sub.C {
		seen = append(seen, ev.Type.String())
		if ev.Type == EventFailed {
			break
		}
	}
	// With two nodes, only n1 probes n2, so n1 must see the suspicion first.
	if strings.Join(seen, ",") != "suspect,failed" {
		t.Errorf("events on n1 = %v, want [suspect failed]", seen)
	}
}

func TestWrongSecretCannotJoin(t *testing.T) {
	var logs watch.Buffer
	good := start(t, "n1", testSecret, &logs)
	bad := start(t, "intruder", []byte("another secret, 0123456789"), nil)
	err := bad.Join([]string{good.Addr()})
	if !errors.Is(err, ErrJoinRefused) {
		t.Fatalf("join with wrong secret: error = %v, want ErrJoinRefused", err)
	}
	if want := "join refused by " + good.Addr() + ": wrong cluster secret?"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if got := states(good); got != "n1=alive" {
		t.Errorf("after the refused join, n1 sees %q", got)
	}
	poll.Until(t, 2*time.Second, func() string {
		if !strings.Contains(logs.String(), "wrong cluster secret?") {
			return "n1 did not log the refused gossip; log:\n" + logs.String()
		}
		return ""
	})
}

func TestJoinUnreachable(t *testing.T) {
	m := start(t, "n1", testSecret, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	err = m.Join([]string{addr})
	if !errors.Is(err, ErrJoinUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("join %s: error = %v, want ErrJoinUnreachable naming the address", addr, err)
	}
}

// A node that accepts the connection but answers nothing in time (a host too
// loaded to run its agent) is not a refusal: the join is tried again, then fails
// as unreachable, never with "wrong cluster secret?".
func TestJoinSilentIsNotRefused(t *testing.T) {
	m := start(t, "n1", testSecret, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	err = m.Join([]string{l.Addr().String()})
	if !errors.Is(err, ErrJoinUnreachable) || strings.Contains(err.Error(), "secret") {
		t.Errorf("join of a silent node: error = %v, want ErrJoinUnreachable without a word of the secret", err)
	}
	if n := accepted.Load(); n < joinTries {
		t.Errorf("join of a silent node: %d connections, want the %d tries and the probe", n, joinTries)
	}
}

// Health probes that connect and close (the testbed does) must not look like
// intruders in the log.
func TestBareConnectIsQuiet(t *testing.T) {
	var logs watch.Buffer
	m := start(t, "n1", testSecret, &logs)
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", m.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	poll.Holds(t, 300*time.Millisecond, func() string {
		if strings.Contains(logs.String(), "level=WARN") {
			return "bare TCP connects were logged as warnings:\n" + logs.String()
		}
		return ""
	})
}

// TestDuplicateNameRefused: a second node joining under the name of a live one is
// refused with an error naming the name and where the live one is, and the live
// one keeps its place.
func TestDuplicateNameRefused(t *testing.T) {
	ms := cluster(t, "n1", "n2")
	poll.Until(t, 5*time.Second, wantStates(ms, "n1=alive n2=alive"))
	dup := start(t, "n2", testSecret, nil)
	err := dup.Join([]string{ms[0].Addr()})
	var nt *NameTakenError
	if !errors.Is(err, ErrNameTaken) || !errors.As(err, &nt) {
		t.Fatalf("join under a taken name: error %v, want ErrNameTaken", err)
	}
	if want := "node name n2 is already in the cluster (at " + ms[1].Addr() + ")"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	dup.Shutdown()
	poll.Holds(t, time.Second, wantStates(ms, "n1=alive n2=alive"))
}

// TestDeathReportedByAnotherNodeHeld: the death of a node this one has not
// doubted, reported by another node (as one healing from a cut does), is not
// recorded while the node may refute it: refuted within DeadConfirm, it never
// shows; not refuted, it is recorded then. A death this node's own probes led
// to is recorded at once.
func TestDeathReportedByAnotherNodeHeld(t *testing.T) {
	m := start(t, "n1", testSecret, nil)
	sub := m.Subscribe()
	defer sub.Close()
	d := &delegate{m: m}
	x := reported(t)
	d.NotifyJoin(x)
	state := func() State { n, _ := m.Node("x"); return n.State }

	d.NotifyLeave(x) // reported dead by another node
	if got := state(); got != StateAlive {
		t.Fatalf("x right after a reported death: %v, want alive", got)
	}
	d.NotifyJoin(x) // it refuted
	time.Sleep(m.cfg.DeadConfirm + 200*time.Millisecond)
	if got := state(); got != StateAlive {
		t.Errorf("x after refuting: %v, want alive", got)
	}

	d.NotifyLeave(x) // reported again, not refuted
	poll.Until(t, m.cfg.DeadConfirm+2*time.Second, func() string {
		if got := state(); got != StateDead {
			return fmt.Sprintf("x %v, want dead once not refuted", got)
		}
		return ""
	})

	d.NotifyJoin(x)
	m.suspect("x") // this node's own probe failed
	d.NotifyLeave(x)
	if got := state(); got != StateDead {
		t.Errorf("x suspected here, then reported dead: %v, want dead at once", got)
	}

	// Nothing of the refuted report: a join, the death not refuted, the join
	// after it, this node's suspicion and its death.
	if got, want := eventsAbout(t, sub, "x", 5), "join,failed,join,suspect,failed"; got != want {
		t.Errorf("events about x: %s, want %s", got, want)
	}
}

// TestSuspicionClearedWhenAlive: a node this node suspected is alive again
// here once an alive message about it comes and it answers a ping, not only at
// this node's next direct probe of it, which on a large cluster comes minutes
// later. Here no probe ever comes (a probe interval of an hour), and the alive
// message carries the same metadata (a state exchange, as at a refutation), so
// memberlist tells no update.
func TestSuspicionClearedWhenAlive(t *testing.T) {
	var ms []*Membership
	for _, name := range []string{"n1", "n2"} {
		c := DefaultLocalConfig()
		c.Name, c.BindPort, c.Secret = name, 0, testSecret
		c.ProbeInterval = time.Hour
		m, err := New(c, Meta{API: "127.0.0.1:1", Cores: 2, Arch: "amd64", OS: "linux"}, nil)
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { m.Shutdown() })
		ms = append(ms, m)
	}
	if err := ms[1].Join([]string{ms[0].Addr()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, wantStates(ms, "n1=alive n2=alive"))
	sub := ms[0].Subscribe()
	defer sub.Close()
	ms[0].suspect("n2") // as if n1's probe had failed
	if err := ms[1].Join([]string{ms[0].Addr()}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	deadline := time.After(10 * time.Second)
	for len(seen) < 2 {
		select {
		case ev := <-sub.C:
			if ev.Node.Name == "n2" {
				seen = append(seen, ev.Type.String())
			}
		case <-deadline:
			t.Fatalf("n2 on n1 after 10 s: events %v, want [suspect alive]", seen)
		}
	}
	if got := strings.Join(seen, ","); got != "suspect,alive" {
		t.Errorf("events about n2 on n1: %s, want suspect,alive", got)
	}
	if got := states(ms[0]); got != "n1=alive n2=alive" {
		t.Errorf("n1 sees %q after the refutation, want both alive", got)
	}
}

// eventsAbout returns the types of the next n events about name on sub,
// joined by commas, failing the test if they do not come within a second
// each.
func eventsAbout(t *testing.T, sub *Subscription, name string, n int) string {
	t.Helper()
	var seen []string
	for len(seen) < n {
		select {
		case ev := <-sub.C:
			if ev.Node.Name == name {
				seen = append(seen, ev.Type.String())
			}
		case <-time.After(time.Second):
			t.Fatalf("events about %s: %v, want %d", name, seen, n)
		}
	}
	return strings.Join(seen, ",")
}

// reported is node x as memberlist reports it to the delegate: nothing
// listens at its address.
func reported(t *testing.T) *memberlist.Node {
	t.Helper()
	meta, err := Meta{API: "127.0.0.1:2", Cores: 2, Arch: "amd64", OS: "linux"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return &memberlist.Node{Name: "x", Addr: net.IPv4(127, 0, 0, 2), Port: 7946, Meta: meta}
}

// TestLeaveNoticeOutlivesLostFlag: a node that said it was leaving is recorded
// as left when its leave arrives without its leaving flag (gossip can lose
// the flag); the notice holds for that life only, and malformed notices are
// ignored.
func TestLeaveNoticeOutlivesLostFlag(t *testing.T) {
	m := start(t, "n1", testSecret, nil)
	sub := m.Subscribe()
	defer sub.Close()
	d := &delegate{m: m}
	x := reported(t)
	state := func() State { n, _ := m.Node("x"); return n.State }

	d.NotifyJoin(x)
	for _, bad := range []string{"L", "Lnot a name", "Qx", ""} {
		d.NotifyMsg([]byte(bad))
	}
	if m.saidLeaving("x") {
		t.Fatalf("a malformed notice was taken as x's")
	}
	d.NotifyMsg([]byte("Lx"))
	d.NotifyLeave(x) // the leave, without the flag
	if got := state(); got != StateLeft {
		t.Errorf("x after its notice and its leave: %v, want left at once", got)
	}

	d.NotifyJoin(x) // back: the notice was for its last life
	d.NotifyLeave(x)
	poll.Until(t, 2*m.cfg.DeadConfirm+2*time.Second, func() string {
		if got := state(); got != StateDead {
			return fmt.Sprintf("x %v, want dead: no notice in this life", got)
		}
		return ""
	})
	if got, want := eventsAbout(t, sub, "x", 4), "join,leave,join,failed"; got != want {
		t.Errorf("events about x: %s, want %s", got, want)
	}
}

// TestHeldDeathOfNodeThatAnswers: a death reported by another node and not
// refuted within DeadConfirm is not recorded while the node answers: this node
// exchanges state with it and learns that it is alive. A node that answers
// but stays dead in that exchange (it left, without a notice that reached this
// node) is recorded one DeadConfirm later.
func TestHeldDeathOfNodeThatAnswers(t *testing.T) {
	var logs watch.Buffer
	m := start(t, "n1", testSecret, &logs)
	sub := m.Subscribe()
	defer sub.Close()
	d := &delegate{m: m}
	// Nodes of this cluster's secret that n1's memberlist does not know: its
	// view of them is what the test reports to it.
	alive := start(t, "x", testSecret, nil)
	leaving := start(t, "y", testSecret, nil)
	node := func(o *Membership) *memberlist.Node {
		n, err := memberlistNode(Node{Name: o.Name(), Addr: o.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		n.Meta = *o.encoded.Load()
		return n
	}
	x, y := node(alive), node(leaving) // as n1 knew them: y not yet leaving
	if err := leaving.Leave(); err != nil {
		t.Fatal(err)
	}
	d.NotifyJoin(x)
	d.NotifyJoin(y)
	d.NotifyLeave(x) // reported dead, not refuted: a stale report
	d.NotifyLeave(y)

	state := func(name string) State { n, _ := m.Node(name); return n.State }
	poll.Until(t, 2*m.cfg.DeadConfirm+2*time.Second, func() string {
		if got := state("y"); got != StateDead {
			return fmt.Sprintf("y %v, want dead once the exchange showed it gone", got)
		}
		return ""
	})
	if got := state("x"); got != StateAlive {
		t.Errorf("x, which answers: %v, want alive", got)
	}
	if !strings.Contains(logs.String(), "a node reported dead answers") {
		t.Errorf("n1 did not log asking x; log:\n%s", logs.String())
	}
	for drained := false; !drained; {
		select {
		case ev := <-sub.C:
			if ev.Node.Name == "x" && ev.Type == EventFailed {
				t.Errorf("x was recorded failed")
			}
		default:
			drained = true
		}
	}
}

// A node this one holds dead while memberlist holds it alive (its return told
// to memberlist and not to this node's table) is recorded alive again at the
// next reconnect round, with a join event; reconnecting alone never repaired
// it, since a state exchange that says alive is no news to memberlist.
func TestStaleDeathRevived(t *testing.T) {
	ms := cluster(t, "n1", "n2")
	poll.Until(t, 5*time.Second, wantStates(ms, "n1=alive n2=alive"))
	sub := ms[0].Subscribe()
	defer sub.Close()
	n2, _ := ms[0].Node("n2")
	ms[0].gone(n2, false) // the death recorded, the return missed
	if got := states(ms[0]); got != "n1=alive n2=dead" {
		t.Fatalf("n1 sees %q after the stale death, want n2 dead", got)
	}
	poll.Until(t, 3*ms[0].cfg.ReconnectInterval+time.Second, wantStates(ms[:1], "n1=alive n2=alive"))
	for {
		select {
		case ev := <-sub.C:
			if ev.Node.Name == "n2" && ev.Type == EventJoin {
				return
			}
		case <-time.After(time.Second):
			t.Fatal("n2 alive again without a join event")
		}
	}
}
