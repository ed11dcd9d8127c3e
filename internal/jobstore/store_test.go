package jobstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"shoal/internal/job"
	"shoal/internal/pki"
)

// cluster opens n replicas on loopback; the first bootstraps and adds the others
// through Reconcile, as an agent's leader does.
func cluster(t *testing.T, n int) []*Store {
	return clusterOf(t, n, nil)
}

// clusterOf is cluster with the Raft traffic over TLS with the cluster
// certificates of secret (nil: plain TCP).
func clusterOf(t *testing.T, n int, secret []byte) []*Store {
	t.Helper()
	var stores []*Store
	for i := 0; i < n; i++ {
		cfg := Config{Node: fmt.Sprintf("n%d", i+1), Dir: t.TempDir(), Bind: "127.0.0.1:0", Bootstrap: i == 0}
		if secret != nil {
			id, err := pki.NewIdentity(secret, cfg.Node)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ServerTLS, cfg.ClientTLS = id.ServerConfig(), id.ClientConfig()
		}
		s, err := Open(cfg)
		if err != nil {
			t.Fatalf("open n%d: %v", i+1, err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	waitFor(t, "n1 leads", func() bool { return stores[0].IsLeader() })
	members := func() []Member {
		var ms []Member
		for i, s := range stores {
			ms = append(ms, Member{Name: s.cfg.Node, Raft: s.Addr(), Alive: true, Since: time.Unix(int64(i), 0)})
		}
		return ms
	}
	waitFor(t, "every replica a voter", func() bool {
		stores[0].Reconcile(members())
		servers, _ := stores[0].Servers()
		voters := 0
		for _, s := range servers {
			if s.Voter {
				voters++
			}
		}
		return voters == VoterTarget(n)
	})
	return stores
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStoreReplicatesAndFailsOver(t *testing.T) {
	stores := cluster(t, 3)
	id := job.Job{ID: "heat-1", State: job.Running}
	if err := stores[1].Submit(id, nil); !errors.Is(err, ErrNotLeader) {
		t.Errorf("submit on a follower: got %v, want ErrNotLeader", err)
	}
	if err := stores[0].Submit(id, []job.Event{{Type: "output", Message: "[0] a"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores[1:] {
		waitFor(t, s.cfg.Node+" has the job", func() bool {
			evs, _, _, _, err := s.Events("heat-1", 1)
			return err == nil && len(evs) == 1
		})
	}
	// Events waits are woken by the next entry.
	_, _, _, changed, _ := stores[2].Events("heat-1", 2)
	stores[0].Update("heat-1", nil, []job.Event{{Type: "output", Message: "[0] b"}}, nil)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("a follower's change channel was not closed by a new entry")
	}
	// The leader goes: one of the others leads, with everything.
	stores[0].Close()
	var leader *Store
	waitFor(t, "a new leader", func() bool {
		for _, s := range stores[1:] {
			if s.IsLeader() {
				leader = s
				return true
			}
		}
		return false
	})
	if err := leader.Barrier(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	evs, _, _, _, err := leader.Events("heat-1", 1)
	if err != nil || len(evs) != 2 || evs[1].Message != "[0] b" {
		t.Errorf("new leader's events = %v, %v; want both lines", evs, err)
	}
	if err := leader.Update("heat-1", nil, []job.Event{{Type: "state", Message: "coordinator n1 lost"}}, nil); err != nil {
		t.Errorf("update on the new leader: %v", err)
	}
}

// Over TLS, the replicas of a cluster replicate as over TCP, and a replica with
// the certificates of another cluster gets nothing, even once in the
// configuration.
func TestStoreOverTLS(t *testing.T) {
	stores := clusterOf(t, 3, []byte("0123456789abcdef0123456789abcdef"))
	id, err := pki.NewIdentity([]byte("another cluster's secret, 0123456789"), "n4")
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := Open(Config{Node: "n4", Dir: t.TempDir(), Bind: "127.0.0.1:0", ServerTLS: id.ServerConfig(), ClientTLS: id.ClientConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { intruder.Close() })
	var ms []Member
	for i, s := range append(stores, intruder) {
		ms = append(ms, Member{Name: s.cfg.Node, Raft: s.Addr(), Alive: true, Since: time.Unix(int64(i), 0)})
	}
	stores[0].Reconcile(ms)
	if err := stores[0].Submit(job.Job{ID: "heat-1", State: job.Running}, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores[1:] {
		waitFor(t, s.cfg.Node+" has the job", func() bool {
			_, _, err := s.Job("heat-1")
			return err == nil
		})
	}
	time.Sleep(time.Second) // the leader's attempts to reach n4 meanwhile
	if _, _, err := intruder.Job("heat-1"); err == nil {
		t.Error("a replica of another cluster has the job")
	}
}

// A replica closed and opened again on its directory has every job (an agent
// killed and restarted forgets nothing).
func TestStoreReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Node: "n1", Dir: dir, Bind: "127.0.0.1:0", Bootstrap: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", s.IsLeader)
	s.Submit(job.Job{ID: "a"}, nil)
	s.Update("a", &job.Job{ID: "a", State: job.Running}, nil, nil)
	s.Close()
	s, err = Open(Config{Node: "n1", Dir: dir, Bind: "127.0.0.1:0", Bootstrap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitFor(t, "leader again", s.IsLeader)
	s.Barrier(5 * time.Second)
	if got, _, err := s.Job("a"); err != nil || got.State != job.Running {
		t.Errorf("after reopening: %+v, %v; want job a running", got, err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Node: "n", Dir: "d", Bind: "127.0.0.1:0", Timing: DefaultTiming()}
	bad := map[string]func(*Config){
		"Node":  func(c *Config) { c.Node = "" },
		"Dir":   func(c *Config) { c.Dir = "" },
		"Bind":  func(c *Config) { c.Bind = "" },
		"Lease": func(c *Config) { c.Timing.LeaderLeaseTimeout = 2 * c.Timing.HeartbeatTimeout },
		"TLS":   func(c *Config) { c.ServerTLS = &tls.Config{} },
	}
	if err := good.Validate(); err != nil {
		t.Errorf("good config: %v", err)
	}
	// Every lease shoal agent --store-lease accepts makes a valid timing.
	for _, lease := range []time.Duration{100 * time.Millisecond, DefaultLease, 5 * time.Second, time.Minute} {
		c := good
		c.Timing = LeaseTiming(lease)
		if err := c.Validate(); err != nil || c.Timing.HeartbeatTimeout != 2*lease {
			t.Errorf("lease %v: %+v, %v; want valid, heartbeat timeout %v", lease, c.Timing, err, 2*lease)
		}
	}
	for name, f := range bad {
		c := good
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("bad %s: got %v, want ErrConfig", name, err)
		}
	}
}

// slowFollowers gives followers a heartbeat and election timeout of 10 s,
// which it returns: a new leader elected well before that was elected early.
func slowFollowers(t *testing.T, followers []*Store) time.Duration {
	t.Helper()
	slow := 10 * time.Second
	for _, s := range followers {
		s.cfg.Timing.HeartbeatTimeout, s.cfg.Timing.ElectionTimeout = slow, slow
		if err := s.raft().ReloadConfig(s.timing(slow, slow)); err != nil {
			t.Fatal(err)
		}
	}
	return slow
}

// A leader whose process ends on a host that stays up is replaced without
// waiting out the heartbeat timeout: here the followers would wait 10 to 20 s,
// and a new leader is there within 5. A dying process closes its listener and
// its connections in either order; when the connections end first, a dial at
// that moment still finds the listener.
func TestLostLeaderElectedWithoutTimeout(t *testing.T) {
	for _, listenerFirst := range []bool{true, false} {
		name := map[bool]string{true: "listener first", false: "connections first"}[listenerFirst]
		t.Run(name, func(t *testing.T) {
			stores := cluster(t, 3)
			slow := slowFollowers(t, stores[1:])
			leader := stores[0]
			leader.trans.Load().Close()
			if !listenerFirst {
				// The dying leader's port still accepts for a while.
				ln, err := net.Listen("tcp", leader.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer time.AfterFunc(300*time.Millisecond, func() { ln.Close() }).Stop()
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						c.Close()
					}
				}()
			}
			leader.trans.Load().CloseStreams()
			leader.Close()
			deadline := time.Now().Add(5 * time.Second)
			for !stores[1].IsLeader() && !stores[2].IsLeader() {
				if time.Now().After(deadline) {
					t.Fatal("no new leader within 5 s of the leader's end")
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The timing returns to the configured one.
			waitFor(t, "timing restored", func() bool {
				for _, s := range stores[1:] {
					if s.raft().ReloadableConfig().HeartbeatTimeout != slow {
						return false
					}
				}
				return true
			})
		})
	}
}

// When the leader of five voters dies, the four left elect another in one
// round: they do not all stand at once and split the vote (a split shows as a
// term past the next one).
func TestLostLeaderOneElection(t *testing.T) {
	stores := cluster(t, 5)
	slowFollowers(t, stores[1:])
	term := stores[0].raft().CurrentTerm()
	stores[0].trans.Load().Close()
	stores[0].trans.Load().CloseStreams()
	stores[0].Close()
	var leader *Store
	waitFor(t, "a new leader", func() bool {
		for _, s := range stores[1:] {
			if s.IsLeader() {
				leader = s
			}
		}
		return leader != nil
	})
	if got := leader.raft().CurrentTerm(); got != term+1 {
		t.Errorf("%s leads in term %d after the leader of term %d died: want %d, one election", leader.cfg.Node, got, term, term+1)
	}
}

func TestStepOf(t *testing.T) {
	v := func(id string) raft.Server { return raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter} }
	standby := raft.Server{ID: "n0", Suffrage: raft.Nonvoter}
	servers := []raft.Server{v("n5"), v("n2"), standby, v("n9"), v("n3"), v("n1")}
	tests := []struct {
		self string
		want int
	}{
		{"n1", 0}, // n2 leads and is gone: n1 is first of n1, n3, n5, n9
		{"n3", 1},
		{"n5", 2},
		{"n9", 3},
		{"n2", 0}, // the leader itself
		{"n0", 0}, // a standby does not stand
		{"n7", 0}, // not a server
	}
	for _, tt := range tests {
		if got := stepOf(servers, "n2", raft.ServerID(tt.self)); got != tt.want {
			t.Errorf("stepOf(%s) = %d, want %d", tt.self, got, tt.want)
		}
	}
}

func TestRefuses(t *testing.T) {
	s := cluster(t, 1)[0]
	if refuses(s.Addr()) {
		t.Errorf("a listening replica %s taken for a refusing one", s.Addr())
	}
	addr := s.Addr()
	s.Close()
	if !refuses(addr) {
		t.Errorf("the closed replica's address %s not taken for a refusing one", addr)
	}
}

// A cluster that lost a majority of its voters recovers on a survivor, voter
// or follower: it leads alone, keeps every job, and takes new ones; a node
// that knows a leader refuses to recover.
func TestRecover(t *testing.T) {
	tests := []struct {
		name     string
		nodes    int
		survivor int // index of the store that survives; the others are lost
	}{
		{"one voter of three left", 3, 2},
		{"the follower of two left", 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stores := cluster(t, tt.nodes)
			if err := stores[0].Submit(job.Job{ID: "heat-1", State: job.Running}, nil); err != nil {
				t.Fatal(err)
			}
			survivor := stores[tt.survivor]
			name := survivor.cfg.Node
			waitFor(t, name+" has the job", func() bool { _, _, err := survivor.Job("heat-1"); return err == nil })
			if err := survivor.Recover(); !errors.Is(err, ErrHasLeader) {
				t.Errorf("Recover with a leader: got %v, want ErrHasLeader", err)
			}
			for i, s := range stores {
				if i != tt.survivor {
					s.Close()
				}
			}
			waitFor(t, name+" knows no leader", func() bool { return survivor.Leader() == "" })
			if err := survivor.Recover(); err != nil {
				t.Fatalf("Recover: %v", err)
			}
			waitFor(t, name+" leads", survivor.IsLeader)
			servers, err := survivor.Servers()
			if err != nil {
				t.Fatal(err)
			}
			if want := []Server{{Name: name, Addr: survivor.Addr(), Voter: true}}; fmt.Sprint(servers) != fmt.Sprint(want) {
				t.Errorf("servers after Recover = %v, want %v", servers, want)
			}
			if _, _, err := survivor.Job("heat-1"); err != nil {
				t.Errorf("the job before the loss: %v", err)
			}
			if err := survivor.Submit(job.Job{ID: "heat-2", State: job.Running}, nil); err != nil {
				t.Errorf("submit after Recover: %v", err)
			}
		})
	}
}

// A lost voter that comes back after the recovery, with the copy of the old
// configuration, forgets it and joins the recovered cluster as a new node:
// it takes the leader's copy and the leader keeps the lead.
func TestForgetRejoins(t *testing.T) {
	stores := cluster(t, 3)
	survivor, lost := stores[2], stores[0]
	lostCfg := lost.cfg
	waitFor(t, "n3 follows", func() bool { return survivor.Leader() != "" })
	stores[0].Close()
	stores[1].Close()
	waitFor(t, "n3 knows no leader", func() bool { return survivor.Leader() == "" })
	if err := survivor.Recover(); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	waitFor(t, "n3 leads", survivor.IsLeader)
	if err := survivor.Submit(job.Job{ID: "after", State: job.Running}, nil); err != nil {
		t.Fatal(err)
	}
	back, err := Open(lostCfg)
	if err != nil {
		t.Fatalf("reopen n1: %v", err)
	}
	t.Cleanup(func() { back.Close() })
	kept, err := back.Forget()
	if err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := os.Stat(filepath.Join(kept, "raft.db")); err != nil {
		t.Errorf("the old copy is not kept aside: %v", err)
	}
	if servers, _ := back.Servers(); len(servers) != 0 {
		t.Errorf("servers after Forget = %v, want none", servers)
	}
	members := []Member{{Name: "n3", Raft: survivor.Addr(), Alive: true, Since: time.Unix(1, 0)}, {Name: "n1", Raft: back.Addr(), Alive: true, Since: time.Unix(2, 0)}}
	waitFor(t, "n1 holds the recovered cluster's jobs", func() bool {
		survivor.Reconcile(members)
		_, _, err := back.Job("after")
		return err == nil
	})
	if !survivor.IsLeader() {
		t.Errorf("n3 lost the lead to the node that came back")
	}
}
