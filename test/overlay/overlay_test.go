// Package overlay checks on testbed hosts that a job run with --mpi-overlay
// carries its MPI traffic over the agents' tunnels: across a pair that
// connects one way only (`shoal testbed block n3 --from n2`), where Open MPI on
// the hosts' own addresses hangs, heat ends with the checksum of an
// uninterrupted run, and the testbed's bridge carries no TCP segment but to
// and from the agents' ports (TLS) while it runs; across a pair that
// connects in neither direction, relayed by a third node, heat ends with the
// same checksum though its relay is killed mid-job; and a job run with
// --mpi-encrypt puts none of its MPI bytes on the bridge in clear.
// The tests share one testbed (instance 254): four hosts of two cores, their
// agents started with --overlay auto, n1's link limited to 100 Mbit/s (so that
// n4 is the wider relay for any pair of the others; not narrower, or relaying
// a pair's halos after n4's loss fills it and the job store's leader there
// loses its quorum's heartbeats), the jobs' ranks packed on n1, n2 and n3.
package overlay

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
	"shoal/internal/node"
	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 254

var bridge = fmt.Sprintf("shoalbr%d", instance)

var bed = &testenv.Shared{Config: testbed.Config{Nodes: 4, Cores: []int{2}, Rate: []string{"100mbit", "", "", ""}, Instance: instance, AgentArgs: []string{"--overlay", "auto", "--metrics-listen", metricsListen}}}

// metricsListen is where each host's agent serves its metrics, inside the host.
const metricsListen = "127.0.0.1:9108"

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// shoal runs `shoal ARGS` in host n1 and returns its stdout.
func shoal(t *testing.T, b *testbed.Bed, args ...string) string {
	t.Helper()
	out, err := b.Exec(context.Background(), "n1", append([]string{filepath.Join(testenv.Root, "bin/shoal")}, args...)...)
	if err != nil {
		t.Fatalf("shoal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// overlayNodes waits until the four hosts announce their overlay addresses,
// each different, and returns them by node.
func overlayNodes(t *testing.T, b *testbed.Bed) map[string]string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var l node.List
		if err := json.Unmarshal([]byte(shoal(t, b, "nodes", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		got, seen := map[string]string{}, map[string]bool{}
		for _, n := range l.Nodes {
			if n.State == "alive" && n.Overlay != "" && !seen[n.Overlay] {
				got[n.Name], seen[n.Overlay] = n.Overlay, true
			}
		}
		if len(got) == 4 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, overlay addresses %v: want 4 different ones", got)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// With n2 and n3 unable to open a connection to each other either way, heat
// on 6 ranks packed on n1, n2 and n3 with --mpi-overlay has the pair's
// packets relayed by n4 (its links wider than n1's): the relay n2 shows in
// `shoal nodes --links --json` is killed mid-job, the route moves to the
// next-best relay (n1), TCP inside the overlay retransmits what was lost, and
// the job ends with the checksum of an uninterrupted run without a restart.
// It runs before TestOneWayPair: a block drops new connections only, so a
// tunnel n2-n3 that a job left up would carry the pair directly.
func TestRelayedPair(t *testing.T) {
	b := bed.Up(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft (Debian's nftables, scripts/deps.sh): shoal testbed block needs it")
	}
	overlayNodes(t, b)
	heat := testenv.Built(t, "build/examples/heat")
	args := []string{"--size", "200", "--steps", relaySteps}
	want := testenv.Reference(t, 6, args...)

	waitMeasured(t, b)

	ctx := context.Background()
	for _, p := range [][2]string{{"n3", "n2"}, {"n2", "n3"}} {
		if err := b.Block(ctx, p[0], p[1]); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Unblock(context.Background(), p[0], p[1]) })
	}
	const id = "overlay-relayed"
	runCtx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	cmd, err := b.Command(runCtx, "n1", append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run", "--job-id", id,
		"-n", "6", "--no-replan", "--layout", "packed", "--mpi-overlay", "--", heat}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var out watch.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	relay := relayOf(t, b, "n2", "n3", "", done, &out)
	// The pair's ranks talk through the relay alone: the job steps on.
	steps := strings.Count(out.String(), "] step ")
	for strings.Count(out.String(), "] step ") == steps {
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before it made a step relayed by %s:\n%s", err, relay, out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// n2's overlay holds a tunnel to each node it sends to directly, n1 (its
	// ranks' other neighbour) and the relay, none to n3, and says n3 is relayed.
	text := scrapeMetrics(t, b, "n2")
	for _, want := range []string{"shoal_overlay_relayed_peers 1", "shoal_overlay_tunnels 2"} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("n2's metrics lack %q while n3 is relayed by %s:\n%s", want, relay, grepLines(text, "shoal_overlay_"))
		}
	}
	var j job.Job
	if err := json.Unmarshal([]byte(shoal(t, b, "jobs", id, "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if _, carries := j.Placement[relay]; carries || relay == j.Coordinator {
		t.Fatalf("n2 -> n3 relayed by %s, which runs ranks or the coordinator (placement %v, coordinator %s): want n4, wider than n1's 100 Mbit/s", relay, j.Placement, j.Coordinator)
	}
	if n, err := b.Kill(ctx, relay); err != nil {
		t.Fatalf("kill the relay %s: %v", relay, err)
	} else {
		t.Logf("killed the relay %s (%d processes)", relay, n)
	}
	t.Cleanup(func() {
		if err := b.StartAgent(context.Background(), relay); err != nil {
			t.Errorf("start %s's agent again: %v", relay, err)
		}
	})
	next := relayOf(t, b, "n2", "n3", relay, done, &out)
	t.Logf("n2 -> n3 relayed by %s, then by %s once %s was killed", relay, next, relay)

	if err := <-done; err != nil {
		t.Fatalf("shoal run --mpi-overlay across n2 and n3 cut both ways: %v\n%s", err, out.String())
	}
	if got := watch.Field(out.String(), "checksum"); got != want {
		t.Errorf("checksum %q, want %q (uninterrupted run)\n%s", got, want, out.String())
	}
	for _, e := range events(t, b, id) {
		if e.Type == job.EventRestart || e.Type == job.EventNodeLost {
			t.Errorf("the job did not go on over the next relay: %s event %q", e.Type, e.Message)
		}
	}
	for _, n := range []string{"n2", "n3"} {
		log, _ := os.ReadFile(filepath.Join(b.Dir(), n, "agent.log"))
		var routes []string
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "overlay: route") || strings.Contains(line, "overlay: tunnel") {
				routes = append(routes, line)
			}
		}
		t.Logf("%s's tunnels and routes:\n%s", n, strings.Join(routes, "\n"))
	}
}

// scrapeMetrics returns what node's agent serves on metricsListen.
func scrapeMetrics(t *testing.T, b *testbed.Bed, node string) string {
	t.Helper()
	out, err := b.Exec(context.Background(), node, "python3", "-c",
		"import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://"+metricsListen+"/metrics').read().decode())")
	if err != nil {
		t.Fatalf("scrape of %s's %s: %v\n%s", node, metricsListen, err, out)
	}
	return string(out)
}

// grepLines returns text's lines that start with prefix.
func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// relaySteps makes heat last long enough over a relay for the relay to be
// killed while it runs.
const relaySteps = "6000"

// relayOf waits until node from's agent routes its packets for node to
// through a relay other than not (from `shoal nodes --links --json` there),
// and returns it; it fails the test when the job ends first or after 90 s.
func relayOf(t *testing.T, b *testbed.Bed, from, to, not string, done <-chan error, out *watch.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		raw, err := b.Exec(context.Background(), from, filepath.Join(testenv.Root, "bin/shoal"), "nodes", "--links", "--json")
		var l links.List
		if err == nil && json.Unmarshal(raw, &l) == nil {
			for _, x := range l.Links {
				if x.From == from && x.To == to && x.Via != "" && x.Via != not {
					return x.Via
				}
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended (%v) before %s routed to %s through a relay other than %q:\n%s", err, from, to, not, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s, %s does not route to %s through a relay other than %q:\n%s", from, to, not, raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitMeasured waits until every pair of the four hosts has a measured link
// (either way), as n1 lists them: the relay is chosen by the measures.
func waitMeasured(t *testing.T, b *testbed.Bed) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var l links.List
		if err := json.Unmarshal([]byte(shoal(t, b, "nodes", "--links", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		measured := map[[2]string]bool{}
		for _, x := range l.Links {
			if !x.Estimated && !x.Unmeasured() {
				measured[[2]string{min(x.From, x.To), max(x.From, x.To)}] = true
			}
		}
		if len(measured) == 6 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s, measured pairs %v: want the 6 of the four hosts", measured)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// events are job id's events as n1's agent lists them.
func events(t *testing.T, b *testbed.Bed, id string) []job.Event {
	t.Helper()
	var evs []job.Event
	for _, line := range strings.Split(strings.TrimSpace(shoal(t, b, "events", "--json", id)), "\n") {
		var e job.Event
		if err := json.Unmarshal([]byte(line), &e); err == nil {
			evs = append(evs, e)
		}
	}
	return evs
}

// With n2's new connections to n3 dropped, heat on 6 ranks packed on the
// first three hosts (n1:0-1 n2:2-3 n3:4-5) with --mpi-overlay ends with the
// checksum of an uninterrupted run: n3 dials the tunnel n2 cannot, and it
// carries both directions. Meanwhile the bridge carries TCP between the hosts
// on the agents' ports only: no MPI byte outside the TLS tunnels.
func TestOneWayPair(t *testing.T) {
	b := bed.Up(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft (Debian's nftables, scripts/deps.sh): shoal testbed block needs it")
	}
	overlayNodes(t, b)
	heat := testenv.Built(t, "build/examples/heat")
	args := []string{"--size", "200", "--steps", "200"}
	want := testenv.Reference(t, 6, args...)

	ctx := context.Background()
	if err := b.Block(ctx, "n3", "n2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Unblock(context.Background(), "n3", "n2") })
	capture, err := startCapture(bridge, agentPorts)
	if err != nil {
		t.Fatalf("capture on the bridge: %v", err)
	}
	defer capture.stop()

	runCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	out, err := b.Exec(runCtx, "n1", append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run", "--job-id", "overlay-oneway",
		"-n", "6", "--no-replan", "--layout", "packed", "--mpi-overlay", "--", heat}, args...)...)
	if err != nil {
		t.Fatalf("shoal run --mpi-overlay across n3 blocked from n2: %v\n%s", err, out)
	}
	if got := watch.Field(string(out), "checksum"); got != want {
		t.Errorf("checksum %q, want %q (uninterrupted run)\n%s", got, want, out)
	}
	var j job.Job
	if err := json.Unmarshal([]byte(shoal(t, b, "jobs", "overlay-oneway", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	for name, ranks := range map[string][]int{"n1": {0, 1}, "n2": {2, 3}, "n3": {4, 5}} {
		if got := j.Placement[name]; len(got) != 2 || got[0] != ranks[0] || got[1] != ranks[1] {
			t.Errorf("placement %v: want n1:0-1 n2:2-3 n3:4-5", j.Placement)
			break
		}
	}
	other, total := capture.stop()
	if total == 0 {
		t.Errorf("the capture on the bridge saw no TCP segment at all: it cannot tell where MPI went")
	}
	if len(other) > 0 {
		t.Errorf("TCP between the hosts outside the agents' ports while the job ran (MPI in clear?): %v", other)
	}
	t.Logf("checksum %s as uninterrupted, placement %v; %d TCP segments on the bridge, all on the agents' ports", want, j.Placement, total)
}

// heatRun runs heat on 6 ranks in blocks over the three hosts (n1:0-1 n2:2-3
// n3:4-5) as job id with the run options opts, while a capture watches the
// bridge, and returns its output and the capture, stopped.
func heatRun(t *testing.T, b *testbed.Bed, id string, opts ...string) (string, *capture) {
	t.Helper()
	heat := testenv.Built(t, "build/examples/heat")
	capture, err := startCapture(bridge, agentPorts)
	if err != nil {
		t.Fatalf("capture on the bridge: %v", err)
	}
	defer capture.end()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{filepath.Join(testenv.Root, "bin/shoal"), "run", "--job-id", id, "-n", "6", "--no-replan"}, opts...)
	out, err := b.Exec(ctx, "n1", append(argv, "--", heat, "--size", "200", "--steps", "200")...)
	if err != nil {
		t.Fatalf("shoal run %s heat: %v\n%s", strings.Join(opts, " "), err, out)
	}
	capture.end()
	return string(out), capture
}

// heat with --mpi-encrypt (and not --mpi-overlay) puts no MPI byte on the
// bridge in clear: TCP between the hosts only on the agents' ports, and no
// frame holding a piece of heat's halo rows, which the same job without it
// shows (so the check can fail). The job's record says it is encrypted.
func TestEncrypt(t *testing.T) {
	b := bed.Up(t)
	overlayNodes(t, b)
	want := testenv.Reference(t, 6, "--size", "200", "--steps", "200")

	out, clear := heatRun(t, b, "overlay-clear")
	if got := watch.Field(out, "checksum"); got != want {
		t.Fatalf("without --mpi-encrypt: checksum %q, want %q\n%s", got, want, out)
	}
	if clear.zeroFrames() == 0 {
		t.Fatalf("without --mpi-encrypt, no frame on the bridge held %d zero bytes in a row: the capture cannot see heat's halo rows, so it cannot tell whether they are encrypted", zeroRun)
	}

	out, enc := heatRun(t, b, "overlay-encrypt", "--mpi-encrypt")
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("with --mpi-encrypt: checksum %q, want %q\n%s", got, want, out)
	}
	other, total := enc.stop()
	if total == 0 {
		t.Errorf("the capture on the bridge saw no TCP segment at all: it cannot tell where MPI went")
	}
	if len(other) > 0 {
		t.Errorf("with --mpi-encrypt, TCP between the hosts outside the agents' ports: %v", other)
	}
	if n := enc.zeroFrames(); n > 0 {
		t.Errorf("with --mpi-encrypt, %d frames on the bridge held %d zero bytes in a row (heat's halo rows in clear: %d frames without it)", n, zeroRun, clear.zeroFrames())
	}
	var j job.Job
	if err := json.Unmarshal([]byte(shoal(t, b, "jobs", "overlay-encrypt", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if !j.Spec.MPIEncrypt {
		t.Errorf("the job's spec says mpi_encrypt %v, want true", j.Spec.MPIEncrypt)
	}
	t.Logf("%d TCP segments on the bridge, all on the agents' ports; frames with %d zero bytes in a row: %d without --mpi-encrypt, none with it", total, zeroRun, clear.zeroFrames())
}

// A peer whose host vanishes without a reset (its link cut) leaves no tunnel
// behind: n1 pings n4 over the overlay, n4's link goes down while the pings go
// on, and n1's agent closes its tunnel to n4 once membership declares n4 dead,
// instead of TCP retransmitting into it for minutes. It runs last: n4 comes
// back when its link is healed.
func TestVanishedPeer(t *testing.T) {
	b := bed.Up(t)
	addrs := overlayNodes(t, b)
	ctx := context.Background()
	for i := 0; ; i++ { // the first packets wait for the tunnel's dial
		out, err := b.Exec(ctx, "n1", "ping", "-c", "1", "-W", "1", addrs["n4"])
		if err == nil {
			break
		}
		if i == 15 {
			t.Fatalf("ping n4 over the overlay: %v\n%s", err, out)
		}
	}
	logPath := filepath.Join(b.Dir(), "n1", "agent.log")
	before, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	pingCtx, stopPing := context.WithCancel(ctx)
	defer stopPing()
	go b.Exec(pingCtx, "n1", "ping", "-i", "0.2", "-W", "1", addrs["n4"]) // packets in flight as the link goes
	time.Sleep(time.Second)
	if err := b.Cut(ctx, "n4"); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	t.Cleanup(func() {
		if err := b.Heal(context.Background(), "n4"); err != nil {
			t.Errorf("heal n4: %v", err)
		}
	})
	deadline := cut.Add(45 * time.Second)
	for {
		log, _ := os.ReadFile(logPath)
		var seen []string
		for _, line := range strings.Split(string(log[min(len(before), len(log)):]), "\n") {
			if strings.Contains(line, "peer=n4") {
				seen = append(seen, line)
			}
			if strings.Contains(line, `msg="overlay: tunnel down"`) && strings.Contains(line, "peer=n4") {
				t.Logf("n1's tunnel to n4 closed %.1f s after n4's link was cut:\n%s", time.Since(cut).Seconds(), strings.Join(seen, "\n"))
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("n1's tunnel to n4 still open 45 s after n4's link was cut; n1's lines about n4 since:\n%s", strings.Join(seen, "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}
