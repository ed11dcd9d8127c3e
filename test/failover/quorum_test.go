package failover

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
)

// voterRoles returns the leader, the other voters and the followers as host sees
// them.
func voterRoles(t *testing.T, host string) (lead string, voters, followers []string) {
	t.Helper()
	for _, n := range nodes(t, host) {
		switch n.Role {
		case "leader":
			lead = n.Name
		case "voter":
			voters = append(voters, n.Name)
		case "follower":
			followers = append(followers, n.Name)
		}
	}
	return lead, voters, followers
}

// The leader and another voter are killed at once: two of the three voters
// are gone and the cluster has no quorum. The survivors say so within seconds
// (shoal run refuses naming the lost voters, shoal jobs warns, shoal wait says
// the job waits); shoal recover-quorum on the surviving voter asks for --yes,
// then makes it the only voter: the frozen job goes on to its end, a new one
// runs, and a second recovery is refused. The lost nodes, started again with
// their old copies, set them aside and join the recovered cluster. The
// lost nodes come back without their old copy of the job store, as the docs
// say they must.
func TestNoQuorumAndRecovery(t *testing.T) {
	b := cluster(t)
	var lead string
	var voters, followers []string
	waitFor(t, "a leader, 2 other voters and a follower", 30*time.Second, func() bool {
		lead, voters, followers = voterRoles(t, "n1")
		return lead != "" && len(voters) == 2 && len(followers) == 1
	})
	survivor, lost := voters[0], []string{lead, voters[1]}
	id := detach(t, survivor)
	waitEpoch(t, survivor, id)
	wait := start(t, survivor, "wait", id)
	ctx := context.Background()
	recovered := false
	t.Cleanup(func() {
		if recovered && t.Failed() {
			comeBackWithoutStore(t, b, lost)
		}
	})
	killed := time.Now()
	for _, h := range lost {
		if _, err := b.Kill(ctx, h); err != nil {
			t.Fatal(err)
		}
	}

	out, code := shoal(t, survivor, "run", "--detach", "-n", "2", "--", "/bin/true")
	took := time.Since(killed)
	t.Logf("shoal run refused %.1f s after the kill: %s", took.Seconds(), strings.TrimSpace(out))
	if code == 0 || !strings.Contains(out, "the cluster has no quorum") || !strings.Contains(out, lost[0]) || !strings.Contains(out, lost[1]) {
		t.Errorf("shoal run without a quorum: exit %d, output %q; want a refusal naming %v", code, out, lost)
	}
	if took > 12*time.Second {
		t.Errorf("shoal run took %.1f s to refuse; want a few seconds", took.Seconds())
	}
	if out, _ := shoal(t, survivor, "jobs"); !strings.Contains(out, "warning: the cluster has no quorum") {
		t.Errorf("shoal jobs without a quorum does not warn:\n%s", out)
	}
	wait.WaitLine(regexp.QuoteMeta("job "+id+" waits: the cluster has no quorum"), 30*time.Second)

	if out, code := shoal(t, survivor, "recover-quorum"); code != 2 || !strings.Contains(out, "--yes") {
		t.Errorf("shoal recover-quorum without --yes: exit %d, want 2 and a plan asking for --yes:\n%s", code, out)
	}
	recovered = true
	if out, code := shoal(t, survivor, "recover-quorum", "--yes"); code != 0 {
		t.Fatalf("shoal recover-quorum --yes on %s exited %d:\n%s", survivor, code, out)
	}
	// At once on the follower, whose copy may not show the recovery yet: it
	// is refused all the same, the survivor leading.
	if out, code := shoal(t, followers[0], "recover-quorum", "--yes"); code != 1 || !strings.Contains(out, "has a quorum") {
		t.Errorf("shoal recover-quorum --yes on %s right after the recovery: exit %d, want 1 and a refusal:\n%s", followers[0], code, out)
	} else {
		t.Logf("a second recovery: %s", strings.TrimSpace(out))
	}
	// The job goes on: it ends, from an epoch that survived or failing to find
	// one (two of four nodes lost may take both copies of a shard); either way
	// shoal wait says the quorum is back first.
	code = wait.Wait(2 * time.Minute)
	if back := "the cluster has a quorum again (" + survivor + " leads); job " + id + " goes on"; !strings.Contains(wait.Output(), back) {
		t.Errorf("shoal wait %s (exit %d) does not say %q:\n%s", id, code, back, wait.Output())
	}
	if out, code := shoal(t, survivor, "run", "-n", "2", "--", "/bin/true"); code != 0 {
		t.Errorf("a job submitted after the recovery: exit %d:\n%s", code, out)
	}

	// The lost voters come back with their copies of the old configuration:
	// each sets its copy aside and joins as a new node; the survivor keeps the lead.
	for _, h := range lost {
		if err := b.StartAgent(ctx, h); err != nil {
			t.Fatalf("start the agent of %s again: %v", h, err)
		}
	}
	waitFor(t, "the lost nodes in the recovered cluster's job store", 30*time.Second, func() bool {
		roles := map[string]string{}
		for _, n := range nodes(t, survivor) {
			roles[n.Name] = n.Role
		}
		return roles[survivor] == "leader" && roles[lost[0]] != "" && roles[lost[1]] != ""
	})
	for _, h := range lost {
		host, err := b.Host(h)
		if err != nil {
			t.Fatal(err)
		}
		if kept, _ := filepath.Glob(filepath.Join(host.DataDir, "raft.stale-*")); len(kept) == 0 {
			t.Errorf("%s did not set its old job store aside", h)
		}
	}
}

// On a healthy cluster the recovery refuses, --yes or not.
func TestRecoverQuorumRefusedWithQuorum(t *testing.T) {
	cluster(t)
	for _, args := range [][]string{{"recover-quorum"}, {"recover-quorum", "--yes"}} {
		out, code := shoal(t, "n2", args...)
		if code != 1 || !strings.Contains(out, "the cluster has a quorum") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("shoal %s on a healthy cluster: exit %d, output %q; want 1 and one line saying it has a quorum", strings.Join(args, " "), code, out)
		}
	}
}

// comeBackWithoutStore starts the agents of the lost nodes again, their old
// copy of the job store removed first (docs/recovery.md), after a test that
// failed past the recovery: they join the recovered cluster as new nodes do.
func comeBackWithoutStore(t *testing.T, b *testbed.Bed, lost []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range lost {
		b.Kill(ctx, name)
		h, err := b.Host(name)
		if err != nil {
			t.Errorf("host %s: %v", name, err)
			continue
		}
		if err := os.RemoveAll(filepath.Join(h.DataDir, "raft")); err != nil {
			t.Errorf("remove the job store of %s: %v", name, err)
		}
		if err := b.StartAgent(ctx, name); err != nil {
			t.Errorf("start the agent of %s again: %v", name, err)
		}
	}
}
