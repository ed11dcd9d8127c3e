// Package placement checks on testbed hosts that the agents measure the links
// between them, and that a job's ranks are placed with those measurements: a
// host behind a slow link measures slow in `shoal nodes --links`, and a job
// that fits elsewhere is kept off it, `shoal jobs JOB --placement` saying why;
// a host blocked from a peer (`shoal testbed block`) shows that direction timed
// out and the other reachable.
// The tests share one testbed (instance 247): three hosts of two cores, n3
// limited to 20 Mbit/s.
package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/testbed"
	"shoal/test/testenv"
)

const instance = 247

// slowRate is n3's bandwidth, in tc syntax and in bytes per second.
const (
	slowRate  = "20mbit"
	slowBytes = 20e6 / 8
)

// The agents check reachability every 5 s (30 s by default), so that a
// block shows within seconds.
var bed = &testenv.Shared{Config: testbed.Config{Nodes: 3, Cores: []int{2}, Rate: []string{"", "", slowRate}, Instance: instance, AgentArgs: []string{"--reach-interval", "5s"}}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

func up(t *testing.T) *testbed.Bed { return bed.Up(t) }

// shoal runs `shoal ARGS` in host n1 and returns its stdout.
func shoal(t *testing.T, b *testbed.Bed, args ...string) string {
	t.Helper()
	out, err := b.Exec(context.Background(), "n1", append([]string{filepath.Join(testenv.Root, "bin/shoal")}, args...)...)
	if err != nil {
		t.Fatalf("shoal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// measuredLinks waits until every ordered pair of the three hosts has a measured link
// and returns them by "from-to".
func measuredLinks(t *testing.T, b *testbed.Bed) map[string]links.Link {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var l links.List
		if err := json.Unmarshal([]byte(shoal(t, b, "nodes", "--links", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		got := map[string]links.Link{}
		for _, x := range l.Links {
			if !x.Estimated {
				got[x.From+"-"+x.To] = x
			}
		}
		if len(got) == 6 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, measured links: %v; want all 6 pairs", got)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Every host measures its links soon after the others joined; the links to
// and from the rate-limited host carry about its rate, the others far more.
func TestLinksMeasured(t *testing.T) {
	b := up(t)
	got := measuredLinks(t, b)
	for pair, l := range got {
		slow := strings.Contains(pair, "n3")
		switch {
		case slow && !(l.Bandwidth < 2*slowBytes && l.Bandwidth > slowBytes/4):
			t.Errorf("%s: %.1f Mbit/s, want about %s", pair, l.Bandwidth*8/1e6, slowRate)
		case !slow && !(l.Bandwidth > 10*slowBytes):
			t.Errorf("%s: %.1f Mbit/s, want far more than %s", pair, l.Bandwidth*8/1e6, slowRate)
		}
		if l.RTT <= 0 || time.Duration(l.RTT) > time.Second {
			t.Errorf("%s: round trip %v, want a measured one", pair, time.Duration(l.RTT))
		}
	}
	table := shoal(t, b, "nodes", "--links")
	if !strings.HasPrefix(table, "FROM") || strings.Count(table, "Mbit/s") != 6 {
		t.Errorf("shoal nodes --links =\n%s\nwant a header and 6 links", table)
	}
	t.Run("BlockedOneWay", func(t *testing.T) { blockedOneWay(t, b) })
}

// blockedOneWay: with n2's new connections to n3 dropped (as a firewall in
// front of n3 would), the next check shows n2 -> n3 timed out and n3 -> n2
// reachable; unblocked, the next shows n2 -> n3 reachable again. Checks come
// every 5 s (the suite's --reach-interval): nothing asks for one sooner.
func blockedOneWay(t *testing.T, b *testbed.Bed) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft (Debian's nftables, scripts/deps.sh): shoal testbed block needs it")
	}
	ctx := context.Background()
	since := time.Now()
	if err := b.Block(ctx, "n3", "n2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Unblock(context.Background(), "n3", "n2") })
	waitReach(t, b, since, map[links.Pair]links.Result{{From: "n2", To: "n3"}: links.TimedOut, {From: "n3", To: "n2"}: links.Reachable})
	table := shoal(t, b, "nodes", "--links")
	if !strings.Contains(table, "n2 -> n3 timed out") || !strings.Contains(table, "n3 -> n2 reachable (one way only)") {
		t.Errorf("shoal nodes --links with n3 blocked from n2 =\n%s\nwant a line n2 -> n3 timed out …; n3 -> n2 reachable (one way only)", table)
	}
	since = time.Now()
	if err := b.Unblock(ctx, "n3", "n2"); err != nil {
		t.Fatal(err)
	}
	waitReach(t, b, since, map[links.Pair]links.Result{{From: "n2", To: "n3"}: links.Reachable})
	if table := shoal(t, b, "nodes", "--links"); strings.Contains(table, "n2 -> n3") {
		t.Errorf("shoal nodes --links once unblocked =\n%s\nwant no line for n2 -> n3", table)
	}
}

// waitReach waits until each pair of want has a reach checked after since
// with its result, as `shoal nodes --links --json` shows it.
func waitReach(t *testing.T, b *testbed.Bed, since time.Time, want map[links.Pair]links.Result) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var l links.List
		if err := json.Unmarshal([]byte(shoal(t, b, "nodes", "--links", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		m := links.Matrix(l.Links, time.Now(), time.Hour)
		var wrong []string
		for p, r := range want {
			if got, ok := m[p]; !ok || got.Checked.Before(since) || got.Result != r {
				wrong = append(wrong, fmt.Sprintf("%s -> %s: %+v (checked since: %v), want %s", p.From, p.To, got, ok && !got.Checked.Before(since), r))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes: %s", strings.Join(wrong, "; "))
		}
		time.Sleep(time.Second)
	}
}

// Four ranks fit on n1 and n2: placed with the measured links, they keep off
// n3's slow link, where contiguous blocks over three hosts would put one.
func TestPlacementAvoidsSlowLink(t *testing.T) {
	b := up(t)
	measuredLinks(t, b)
	heat := testenv.Built(t, "build/examples/heat")
	id := strings.TrimSpace(lastLine(shoal(t, b, "run", "--detach", "-n", "4", "--", heat, "--size", "200", "--steps", "200")))
	j := until(t, b, id, "a placement", func(j job.Job) bool { return len(j.Placement) > 0 })
	if len(j.Placement["n3"]) != 0 || len(j.Placement["n1"])+len(j.Placement["n2"]) != 4 {
		t.Errorf("placement %v: want the 4 ranks on n1 and n2", j.Placement)
	}
	out := shoal(t, b, "jobs", id, "--placement")
	for _, want := range []string{"links: measured", "why: packed 4 ranks on n1, n2", "n3"} {
		if !strings.Contains(out, want) {
			t.Errorf("shoal jobs %s --placement lacks %q:\n%s", id, want, out)
		}
	}
	shoal(t, b, "wait", id)

	// --no-replan keeps the blocks, n3 included.
	id = strings.TrimSpace(lastLine(shoal(t, b, "run", "--detach", "-n", "4", "--no-replan", "--", heat, "--size", "200", "--steps", "200")))
	j = until(t, b, id, "a placement", func(j job.Job) bool { return len(j.Placement) > 0 })
	if len(j.Placement["n3"]) == 0 || !j.Spec.NoReplan {
		t.Errorf("--no-replan: placement %v, spec no_replan %v: want blocks over n1, n2 and n3", j.Placement, j.Spec.NoReplan)
	}
	shoal(t, b, "wait", id)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// jobRecord reads job id's record through n1.
func jobRecord(t *testing.T, b *testbed.Bed, id string) job.Job {
	t.Helper()
	var j job.Job
	if err := json.Unmarshal([]byte(shoal(t, b, "jobs", id, "--json")), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// until polls job id until ok says yes, or fails the test after a minute.
func until(t *testing.T, b *testbed.Bed, id, what string, ok func(job.Job) bool) job.Job {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		j := jobRecord(t, b, id)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) || !j.Ended.IsZero() {
			t.Fatalf("job %s: %s did not happen (job %+v)", id, what, j)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Six ranks fill the three hosts, so two go to n3, behind its slow link. Over a
// shuffled ring, contiguous blocks put ranks that talk on either side of it.
// Once the ranks have reported their traffic, the job runs with two ranks that
// talk to each other on n3 (only two ring pairs then cross its link): moved
// there, with the move's reason in its events, unless its first layout was
// that already, which the planner then says it keeps.
func TestMoveByTraffic(t *testing.T) {
	b := up(t)
	measuredLinks(t, b)
	ring := testenv.Built(t, "build/bench/ring")
	id := strings.TrimSpace(lastLine(shoal(t, b, "run", "--detach", "-n", "6", "--ckpt-interval", "1s", "--", ring,
		"--kb", "256", "--work", "1", "--shuffle", "3", "--iters", "400")))
	first := until(t, b, id, "a placement", func(j job.Job) bool { return len(j.Placement) > 0 })
	j := until(t, b, id, "a profile of the traffic", func(j job.Job) bool { return j.Traffic != nil })
	if len(j.Traffic.Flows) != 6 {
		t.Errorf("traffic flows %+v: want the 6 pairs of the ring", j.Traffic.Flows)
	}
	final := until(t, b, id, "a layout by the traffic", func(j job.Job) bool { return j.Plan != nil && j.Plan.Traffic })
	onN3 := final.Placement["n3"]
	talk := false
	for _, f := range j.Traffic.Flows {
		if len(onN3) == 2 && (f.From == onN3[0] && f.To == onN3[1] || f.From == onN3[1] && f.To == onN3[0]) {
			talk = true
		}
	}
	if !talk {
		t.Errorf("ranks %v on n3 do not talk to each other (flows %+v)", onN3, j.Traffic.Flows)
	}
	out := shoal(t, b, "events", id)
	switch {
	case fmt.Sprint(final.Placement) != fmt.Sprint(first.Placement):
		if !strings.Contains(out, "the traffic learned so far predicts") || !strings.Contains(out, "; moving") {
			t.Errorf("events of %s lack the move's reason:\n%s", id, out)
		}
	case !strings.Contains(out, "the traffic learned so far keeps the ranks where they are"):
		t.Errorf("events of %s do not say the layout is kept:\n%s", id, out)
	}
	t.Logf("placed %v, then by the traffic %v: %s", first.Placement, final.Placement, final.Plan.Reason)
	exec := shoal(t, b, "jobs", id, "--traffic")
	if !strings.Contains(exec, "RANKS") {
		t.Errorf("shoal jobs %s --traffic =\n%s\nwant the busiest pairs", id, exec)
	}

	// n2 dies: the relaunch on n1 and n3 is placed with the profile learned
	// before, not the default guess.
	ctx := context.Background()
	t.Cleanup(func() {
		if err := b.StartAgent(ctx, "n2"); err != nil {
			t.Errorf("restart n2's agent: %v", err)
		}
	})
	if _, err := b.Kill(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	after := until(t, b, id, "a relaunch without n2", func(j job.Job) bool {
		return j.Restarts > final.Restarts && len(j.Placement) > 0 && len(j.Placement["n2"]) == 0 && j.State == job.Running
	})
	if after.Plan == nil || !after.Plan.Traffic {
		t.Errorf("relaunch placed without the learned traffic: plan %+v", after.Plan)
	} else {
		t.Logf("after n2's loss %v: %s", after.Placement, after.Plan.Reason)
	}
	shoal(t, b, "cancel", id)
}

// TestSilentJobWeighed: a job whose ranks send each other nothing (ring --kb 0, as
// ep) is weighed like any other once its profile arrives: its layout is kept or
// moved for a reason given with the traffic measured, not with the neighbours'
// traffic the planner assumes before anything is known.
func TestSilentJobWeighed(t *testing.T) {
	b := up(t)
	ring := testenv.Built(t, "build/bench/ring")
	id := strings.TrimSpace(lastLine(shoal(t, b, "run", "--detach", "-n", "4", "--ckpt-interval", "1s", "--", ring,
		"--kb", "0", "--work", "10", "--iters", "3000")))
	j := until(t, b, id, "a profile of the traffic", func(j job.Job) bool { return j.Traffic != nil })
	if len(j.Traffic.Flows) != 0 {
		t.Errorf("traffic flows %+v: want none", j.Traffic.Flows)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out := shoal(t, b, "events", id)
		if i := strings.Index(out, "the traffic learned so far"); i >= 0 {
			line, _, _ := strings.Cut(out[i:], "\n")
			t.Logf("weighed: %s", line)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, the events of %s do not weigh the measured traffic:\n%s", id, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	shoal(t, b, "cancel", id)
}

// TestCopiesCompressedOverSlowLink keeps two ranks on n3 (--no-replan: blocks
// over the three hosts): the copies of shards that cross n3's 20 Mbit/s link
// are sent zstd-compressed (heat's smooth grid compresses about tenfold), and
// each epoch's line says how much smaller they crossed.
//
// A machine that stalls for a second or two under load (seen in CI) can make
// the coordinator lose the lead mid-run; the new one may then relaunch without
// n3, and no copy crosses its link. Such a run says nothing about compression,
// so it is run once more; two in a row fail the test.
func TestCopiesCompressedOverSlowLink(t *testing.T) {
	b := up(t)
	measuredLinks(t, b) // the senders decide with the measured links
	heat := testenv.Built(t, "build/examples/heat")
	for attempt := 1; ; attempt++ {
		id := strings.TrimSpace(lastLine(shoal(t, b, "run", "--detach", "-n", "6", "--no-replan", "--ckpt-interval", "1s",
			"--", heat, "--size", "1200", "--steps", "400")))
		until(t, b, id, "a placement on n3", func(j job.Job) bool { return len(j.Placement["n3"]) > 0 })
		shoal(t, b, "wait", id)
		events := shoal(t, b, "events", id)
		switch {
		case strings.Contains(events, "copies sent compressed: "):
			return
		case attempt == 1 && strings.Contains(events, " lost the lead"):
			t.Logf("the coordinator lost the lead during %s: running it again\n%s", id, events)
		default:
			t.Fatalf("no epoch's copies were sent compressed over n3's %s link:\n%s", slowRate, events)
		}
	}
}
