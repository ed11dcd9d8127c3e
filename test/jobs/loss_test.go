package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/jobdir"
	"shoal/internal/testbed"
	"shoal/test/testenv"
)

var heatArgs = []string{"--size", "1000", "--steps", "8000"}

// runWithLoss starts heat on 6 ranks from n1, lets lose take nodes away once epoch
// `after` is complete, and checks the job ends with the uninterrupted checksum after
// restarting `restarts` times. It returns the job's output.
func runWithLoss(t *testing.T, nodes, after, restarts int, interval string, lose func(b *testbed.Bed, j *job)) string {
	return runHeatWithLoss(t, heatArgs, nil, nodes, after, restarts, interval, lose)
}

// runHeatWithLoss is runWithLoss with heat's arguments and shoal run's flags given
// (nil flags: --max-oversubscribe 3, so 2 hosts of 2 cores can run the 6 ranks).
func runHeatWithLoss(t *testing.T, heatArgs, runFlags []string, nodes, after, restarts int, interval string, lose func(b *testbed.Bed, j *job)) string {
	t.Helper()
	return runHeatOn(t, up(t, nodes), heatArgs, runFlags, after, restarts, interval, lose)
}

// runHeatOn is runHeatWithLoss on a testbed that is up; restarts -1 leaves
// the count of restarts to the caller.
func runHeatOn(t *testing.T, b *testbed.Bed, heatArgs, runFlags []string, after, restarts int, interval string, lose func(b *testbed.Bed, j *job)) string {
	t.Helper()
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	want := reference(t, "checksum", 6, append([]string{heat + "-plain"}, unpaced(heatArgs)...)...)
	if runFlags == nil {
		runFlags = []string{"--max-oversubscribe", "3"}
	}
	args := append(append([]string{"-n", "6", "--ckpt-interval", interval}, runFlags...), "--", heat)
	j := submit(t, b, "n1", append(args, heatArgs...)...)
	j.id = j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.epoch = j.waitEpoch(after)
	lose(b, j)
	if code := j.Wait(4 * time.Minute); code != 0 {
		t.Fatalf("job exited %d", code)
	}
	out := j.Output()
	if got := field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	// A coordinator that loses the job store's lead for a moment (its heartbeats
	// held up on a loaded machine) relaunches the job once more under the new
	// leader, perhaps itself again, saying so and not counting it as a restart:
	// correct, but not the loss under test. Unless the lead was lost while the
	// node was being lost: then that relaunch is the one that moves the lost
	// node's ranks ("2 of n3's ranks → n2"), and it is the loss's restart.
	flaps := 0
	for _, line := range leadRelaunches.FindAllString(out, -1) {
		if !movesLostRanks.MatchString(line) {
			flaps++
		}
	}
	if flaps > 0 {
		t.Logf("%d more relaunches: the coordinator lost the lead for a moment", flaps)
	}
	if n := strings.Count(out, "; restarting 6 ranks from epoch") - flaps; restarts >= 0 && n != restarts {
		t.Errorf("%d restarts from an epoch, want %d", n, restarts)
	}
	checkManifest(t, b, j.id, out)
	return out
}

// unpaced drops heat's --pace, which changes how long a run takes, not its result.
func unpaced(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--pace" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// checkManifest checks the coordinator's record of complete epochs: the two newest,
// in order, the last being the newest epoch the job reported complete; or, when
// those two are both odd or both even (an epoch completed before the one below
// it), three, the first of the other kind.
func checkManifest(t *testing.T, b *testbed.Bed, id, out string) {
	t.Helper()
	// The node that coordinated the job last: the job store's leader, which may
	// have changed while the nodes were lost.
	coordinator := coordinatorOf(b, id)
	if coordinator == "" {
		coordinator = "n1"
	}
	h, err := b.Host(coordinator)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := jobdir.Dir{Root: filepath.Join(h.DataDir, "coord"), Job: id}.ReadManifest()
	if err != nil || len(entries) == 0 || len(entries) > 3 {
		t.Fatalf("manifest of the coordinator %s: %v %v, want the 1 to 3 complete epochs a restart may use", coordinator, entries, err)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i-1].Epoch >= entries[i].Epoch {
			t.Errorf("manifest out of order: %v", entries)
		}
	}
	if e := entries; len(e) == 3 && (e[1].Epoch%2 != e[2].Epoch%2 || e[0].Epoch%2 == e[1].Epoch%2) {
		t.Errorf("manifest %v: three epochs, want the two newest of one kind and one of the other", e)
	}
	// Copies of two epochs go on side by side, so an epoch may complete after
	// a newer one did: the newest reported is the greatest, not the last.
	var newest uint64
	for _, m := range regexp.MustCompile(`epoch (\d+) complete`).FindAllStringSubmatch(out, -1) {
		e, _ := strconv.ParseUint(m[1], 10, 64)
		newest = max(newest, e)
	}
	if got := entries[len(entries)-1].Epoch; got != newest {
		t.Errorf("manifest's newest epoch %d, want %d (the newest reported complete)", got, newest)
	}
}

// TestKillHost: n3 is killed once epoch 2 is complete; its ranks restart on the
// others from their copies there. heat's table (--table) never changes, so from
// epoch 2 on the copies cross the network as their changes since the copy of
// the epoch before, and the restarted ranks' tables come from copies assembled
// from those changes: heat checks them.
func TestKillHost(t *testing.T) {
	args := append(slices.Clone(heatArgs), "--table", "2")
	out := runHeatWithLoss(t, args, nil, 3, 2, 1, "500ms", func(b *testbed.Bed, j *job) {
		if _, err := b.Kill(context.Background(), "n3"); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.Contains(out, "copies sent as changes: ") || !strings.Contains(out, "table: 2 MB per rank intact") {
		t.Errorf("no epoch whose copies were sent as changes, or heat's table not intact:\n%s", grepShoal(out))
	}
	// A killed host refuses connections: the coordinator knows from that, not
	// from membership or mpirun. n3 may have come to coordinate the job when it
	// died (the lead moves under load): then it is lost as the coordinator.
	if !regexp.MustCompile(`shoal: (node n3 lost \(its agent is gone: connection refused\)|coordinator n3 lost)`).MatchString(out) ||
		!strings.Contains(out, "of n3's ranks →") {
		t.Errorf("no line saying n3 was lost, its agent gone, and where its ranks went:\n%s", grepShoal(out))
	}
}

func TestCutHost(t *testing.T) {
	out := runWithLoss(t, 3, 2, 1, "500ms", func(b *testbed.Bed, j *job) {
		if err := b.Cut(context.Background(), "n3"); err != nil {
			t.Fatal(err)
		}
	})
	// n3 stops answering; if the coordinator lost the lead meanwhile (the cut
	// and a loaded machine delay its heartbeats), the new term's relaunch leaves
	// n3 out and says where its ranks went.
	moved := slices.ContainsFunc(leadRelaunches.FindAllString(out, -1), func(l string) bool {
		return strings.Contains(l, "of n3's ranks →")
	})
	if !strings.Contains(out, "node n3 lost (no answer for") && !moved {
		t.Error("no line saying n3 stopped answering")
	}
	t.Logf("output:\n%s", grepShoal(out))
}

// leadRelaunches matches the line of each relaunch made because the
// coordinator lost the job store's lead, and movesLostRanks one that moves
// the ranks of a lost node.
var (
	leadRelaunches = regexp.MustCompile(`lost the lead( and won it back)?; restarting 6 ranks from epoch[^\n]*`)
	movesLostRanks = regexp.MustCompile(`of n\d+'s ranks →`)
)

// TestSilentNodeWaitedFor: a node cut off for longer than membership takes to
// declare it dead, but for less than giving up would cost (the run's work since
// its start, no epoch being due), is waited for: when its link comes back the
// job goes on without a restart, its ranks on that node never fenced, and ends
// with the uninterrupted result.
func TestSilentNodeWaitedFor(t *testing.T) {
	b := up(t, 3)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	args := []string{"--size", "1000", "--steps", "8000", "--pace", "4000"} // 32 s or more
	want := reference(t, "checksum", 6, append([]string{heat + "-plain"}, unpaced(args)...)...)
	j := submit(t, b, "n1", append([]string{"-n", "6", "--ckpt-interval", "120s", "--", heat}, args...)...)
	j.id = j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`^shoal: launching 6 ranks on 3 nodes`, time.Minute)
	// About 14 s of work at stake when the silence starts: the run waits that
	// long, and the cut node keeps its ranks nearly as long.
	time.Sleep(13 * time.Second)
	cut := "n3"
	if coordinatorOf(b, j.id) == cut {
		cut = "n2"
	}
	ctx := context.Background()
	if err := b.Cut(ctx, cut); err != nil {
		t.Fatal(err)
	}
	j.WaitLine(`^shoal: node `+cut+` declared dead after .* waiting for it up to`, 30*time.Second)
	if err := b.Heal(ctx, cut); err != nil {
		t.Fatal(err)
	}
	j.WaitLine(`^shoal: node `+cut+` is back after`, time.Minute)
	if code := j.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("job exited %d", code)
	}
	out := j.Output()
	if got := field(out, "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	if strings.Contains(out, "; restarting ") || !strings.Contains(out, "(0 restarts)") {
		t.Errorf("the job restarted:\n%s", grepShoal(out))
	}
}

// coordinatorOf names the node that coordinates job id, as n1 sees it ("" if
// it cannot say).
func coordinatorOf(b *testbed.Bed, id string) string {
	var list struct {
		Jobs []struct {
			ID          string `json:"id"`
			Coordinator string `json:"coordinator"`
		} `json:"jobs"`
	}
	if shoalJSON(context.Background(), b, &list, "jobs", "--json") != nil {
		return ""
	}
	for _, j := range list.Jobs {
		if j.ID == id {
			return j.Coordinator
		}
	}
	return ""
}

func TestTwoSuccessiveLosses(t *testing.T) {
	// Paced to 20 s or more: the second loss waits for membership to replace n4
	// as a voter, seconds under load, and must land while the job runs (unpaced,
	// heat's 4 s ended first once the agents' copies left it more of the CPUs).
	args := []string{"--size", "1000", "--steps", "8000", "--pace", "2500"}
	runHeatWithLoss(t, args, nil, 4, 2, 2, "500ms", func(b *testbed.Bed, j *job) {
		if _, err := b.Kill(context.Background(), "n4"); err != nil {
			t.Fatal(err)
		}
		j.WaitLine(`launching 6 ranks on n1, n2, n3 `, time.Minute)
		j.WaitLine(`epoch \d+ complete`, time.Minute)
		// Three voters coordinate four nodes; n4 may have been one. The second loss
		// comes once the leader has replaced it, as a cluster that loses nodes one
		// at a time must be able to. The job sees n4 lost within a second, through
		// its launch; membership, under load, only seconds later: until it does,
		// n4 is a live voter, and losing n3 then would leave 2 voters of 3 gone.
		waitVoters(t, b, 3, time.Minute, "n4")
		if _, err := b.Kill(context.Background(), "n3"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestNQueensKillHost(t *testing.T) {
	b := up(t, 3)
	nq := filepath.Join(testenv.Root, "build/examples/nqueens")
	// 373 rounds of at least 20 ms: 7.5 s or more, so the kill lands mid-run.
	j := submit(t, b, "n1", "-n", "6", "--ckpt-interval", "300ms", "--max-oversubscribe", "3", "--", nq, "--pace", "20000", "16")
	j.waitEpoch(2)
	if _, err := b.Kill(context.Background(), "n2"); err != nil {
		t.Fatal(err)
	}
	if code := j.Wait(4 * time.Minute); code != 0 {
		t.Fatalf("job exited %d", code)
	}
	if got := field(j.Output(), "solutions"); got != "14772512" {
		t.Errorf("solutions = %q, want 14772512", got)
	}
	if !strings.Contains(j.Output(), "restarting 6 ranks from epoch") {
		t.Error("the job did not restart from an epoch after n2 was killed")
	}
}

// TestCorruptShardTakenFromReplica damages shards on the nodes that hold them, then
// kills another node. Rank 1's shard of the newest complete epoch is damaged on
// both nodes that hold it: that epoch is passed over, its shards said to be
// corrupt, not on no node. Rank 0's shard of the epoch before is damaged on the
// node that wrote it only: the relaunch restarts from that epoch, staging rank
// 0's shard from its copy on another node over the damaged one, not falling
// back further. Each corrupt copy is a shard-corrupt event naming the node,
// epoch and rank, and the repair names the copy it came from.
func TestCorruptShardTakenFromReplica(t *testing.T) {
	// Checkpoints every 3 s: no newer epoch can appear between the damage and the kill.
	var newest, before int
	var id string
	bed := up(t, 3)
	out := runHeatOn(t, bed, longHeat, nil, 2, -1, "3s", func(b *testbed.Bed, j *job) {
		id = j.id
		h, err := b.Host("n1")
		if err != nil {
			t.Fatal(err)
		}
		entries, err := jobdir.Dir{Root: filepath.Join(h.DataDir, "coord"), Job: j.id}.ReadManifest()
		if err != nil || len(entries) < 2 {
			t.Fatalf("manifest of the coordinator n1: %v %v, want two complete epochs", entries, err)
		}
		newest, before = int(entries[len(entries)-1].Epoch), int(entries[len(entries)-2].Epoch)
		// Ranks 0 and 1 run on n1 and their copies go to n2.
		damage := func(node string, epoch, rank int) {
			shard := filepath.Join(b.Dir(), node, "data", "ckpt", j.id, fmt.Sprintf("e%08d", epoch), fmt.Sprintf("r%06d.shard", rank))
			data, err := os.ReadFile(shard)
			if err != nil {
				t.Fatalf("rank %d's shard of epoch %d on %s: %v", rank, epoch, node, err)
			}
			data[len(data)/2] ^= 0xff
			if err := os.WriteFile(shard, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		damage("n1", newest, 1)
		damage("n2", newest, 1)
		damage("n1", before, 0)
		if _, err := b.Kill(context.Background(), "n3"); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.Contains(out, fmt.Sprintf("restarting 6 ranks from epoch %d ", before)) {
		t.Errorf("the job did not restart from epoch %d with rank 0's shard from its copy:\n%s", before, grepShoal(out))
	}
	// One restart, from epoch before; or, when n2's index had not yet said its
	// copy was damaged, a first from the newest, whose staging finds that copy
	// corrupt and relaunches from before.
	restarts := strings.Count(out, "; restarting 6 ranks from epoch")
	for _, line := range leadRelaunches.FindAllString(out, -1) {
		if !movesLostRanks.MatchString(line) {
			restarts-- // the coordinator lost the lead for a moment: not the loss under test
		}
	}
	staged := strings.Count(out, fmt.Sprintf("rank 1's shard of epoch %d on n2 corrupt when staged; restarting 6 ranks from epoch %d ", newest, before))
	if restarts-staged != 1 {
		t.Errorf("%d restarts from an epoch, %d of them for a copy found corrupt when staged; want one more:\n%s", restarts, staged, grepShoal(out))
	}
	skipped := fmt.Sprintf("epoch %d unusable (shards of rank 1 are corrupt on n1, n2)", newest)
	if !strings.Contains(out, skipped) {
		t.Errorf("no line saying %q:\n%s", skipped, grepShoal(out))
	}
	var corrupt []string
	for _, e := range events(t, bed, "n1", id) {
		if e.Type == "shard-corrupt" {
			corrupt = append(corrupt, e.Message)
		}
	}
	// Rank 1's two copies are found corrupt in the order the nodes' indexes
	// arrive: the first found says the other is good still, the second that
	// no good copy is left.
	lastCopy := fmt.Sprintf("rank 1's shard of epoch %d is corrupt (checksum mismatch); no good copy", newest)
	if !slices.ContainsFunc(corrupt, func(m string) bool { return strings.Contains(m, lastCopy) }) {
		t.Errorf("no shard-corrupt event saying %q; they were:\n%s", lastCopy, strings.Join(corrupt, "\n"))
	}
	for _, want := range []string{
		fmt.Sprintf("node n1: rank 1's shard of epoch %d is corrupt (checksum mismatch); ", newest),
		fmt.Sprintf("node n2: rank 1's shard of epoch %d is corrupt (checksum mismatch); ", newest),
		fmt.Sprintf("node n1: rank 0's shard of epoch %d is corrupt (checksum mismatch); not used: a good copy is on n2", before),
		fmt.Sprintf("node n1: rank 0's shard of epoch %d, corrupt there, repaired from n2's copy", before),
	} {
		if !slices.ContainsFunc(corrupt, func(m string) bool { return strings.HasPrefix(m, want) }) {
			t.Errorf("no shard-corrupt event %q; they were:\n%s", want, strings.Join(corrupt, "\n"))
		}
	}
}

// TestFullDisk: a node whose checkpoint disk fills up mid-run (a small tmpfs
// over its store, then filled) is a node fault, not the program's failure: its
// ranks fail to write a shard and abort, the coordinator finds the node's store
// refusing a probe, says so, and relaunches the job without it from the newest
// complete epoch; the job finishes exactly.
func TestFullDisk(t *testing.T) {
	b := up(t, 3)
	store := filepath.Join(b.Dir(), "n3", "data", "ckpt")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", store).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs over n3's store: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", store).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", store, err, out)
		}
	})
	out := runHeatOn(t, b, heatArgs, nil, 2, 1, "500ms", func(b *testbed.Bed, j *job) {
		// Fill it and keep it full, as another program filling the disk would:
		// dd stops at "No space left on device", and the space the store frees
		// by pruning an old epoch is taken again before the next checkpoint
		// could use it. Filled once, the store had room for every later epoch
		// whenever the fill came while it held three.
		stop := make(chan struct{})
		done := make(chan struct{})
		t.Cleanup(func() { close(stop); <-done })
		go func() {
			defer close(done)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(store, fmt.Sprintf("filler-%d", i)), "bs=64k").Run()
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	})
	want := regexp.MustCompile(`node n3 cannot store checkpoints: no space left on device; its ranks move`)
	if !want.MatchString(out) {
		t.Errorf("no line saying n3 cannot store checkpoints:\n%s", grepShoal(out))
	}
	if !strings.Contains(out, "launching 6 ranks on n1, n2 ") {
		t.Errorf("the job was not relaunched without n3:\n%s", grepShoal(out))
	}
	t.Logf("output:\n%s", grepShoal(out))
}

func grepShoal(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "shoal") || strings.Contains(l, "time:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// waitVoters waits until n1's agent shows want nodes that vote in the job store
// (the leader included), every one alive, and every node of gone dead or left.
func waitVoters(t *testing.T, b *testbed.Bed, want int, timeout time.Duration, gone ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := b.Exec(context.Background(), "n1", filepath.Join(testenv.Root, "bin/shoal"), "nodes", "--json")
		var list struct {
			Nodes []struct {
				Name  string `json:"name"`
				State string `json:"state"`
				Role  string `json:"role"`
			} `json:"nodes"`
		}
		json.Unmarshal(out, &list)
		// A voter that is suspect or dead still counts towards the quorum until
		// the leader removes it: want voters, every one alive.
		n, live, stale := 0, 0, ""
		for _, node := range list.Nodes {
			if node.Role == "leader" || node.Role == "voter" {
				n++
				if node.State == "alive" {
					live++
				}
			}
			if slices.Contains(gone, node.Name) && node.State != "dead" && node.State != "left" {
				stale = node.Name
			}
		}
		if err == nil && n == want && live == want && stale == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v n1 shows %d voters, %d of them alive, want %d alive (and %q gone):\n%s", timeout, n, live, want, stale, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestTwoHostsLostAtOnce kills two of five hosts at the same moment, n4 and
// n5, neighbours by name, under two jobs laid out one rank a host,
// round-robin, so both hosts ran ranks of each. The first keeps its shards
// with --redundancy rs:3+2: each of the two hosts held the only copy of its
// shards, which the relaunch rebuilds from their parity groups on the three
// hosts left. The second keeps two copies (the default): the copies of one of
// the two epochs it keeps went one host on, and those of n4's ranks are lost
// with n5, but the other's went two hosts on (coord's stride), so it restarts
// from that one. Both end with the uninterrupted checksum.
func TestTwoHostsLostAtOnce(t *testing.T) {
	b := up(t, 5)
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	want := reference(t, "checksum", 6, append([]string{heat + "-plain"}, unpaced(heatArgs)...)...)
	start := func(redundancy string) *job {
		return submit(t, b, "n1", append([]string{"-n", "6", "--ckpt-interval", "500ms", "--max-oversubscribe", "3",
			"--layout", "cyclic", "--redundancy", redundancy, "--", heat}, heatArgs...)...)
	}
	parity, copies := start("rs:3+2"), start("copy")
	for _, j := range []*job{parity, copies} {
		j.id = j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
		j.WaitLine(`^shoal: launching 6 ranks on 5 nodes \(n1:0 n2:1 n3:2 n4:3 n5:4 n1:5\)`, time.Minute)
	}
	parity.WaitLine(`epoch \d+ complete \(6 shards, one copy each, rs:3\+2 parity\)`, 2*time.Minute)
	parity.waitEpoch(2)
	copies.waitEpoch(3)
	errs := make(chan error, 2)
	for _, n := range []string{"n4", "n5"} {
		go func() { _, err := b.Kill(context.Background(), n); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range []*job{parity, copies} {
		if code := j.Wait(4 * time.Minute); code != 0 {
			t.Fatalf("job %s exited %d:\n%s", j.id, code, grepShoal(j.Output()))
		}
		out := j.Output()
		if got := field(out, "checksum"); got != want {
			t.Errorf("job %s: checksum = %q, want %q (uninterrupted run)", j.id, got, want)
		}
		if strings.Contains(out, "internal error") {
			t.Errorf("job %s: the job's lifecycle refused a transition:\n%s", j.id, grepShoal(out))
		}
		if strings.Contains(out, "epoch lost") || !strings.Contains(out, "restarting 6 ranks from epoch") {
			t.Errorf("job %s did not restart from a kept epoch:\n%s", j.id, grepShoal(out))
		}
	}
	if !regexp.MustCompile(`rebuilt from parity the shards of epoch \d+ no live node held: rank \d+ on n\d, rank \d+ on n\d`).MatchString(parity.Output()) {
		t.Errorf("no line saying the lost hosts' two shards were rebuilt from parity:\n%s", grepShoal(parity.Output()))
	}
}
