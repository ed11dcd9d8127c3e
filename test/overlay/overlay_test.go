// Package overlay checks on testbed hosts that a job run with --mpi-overlay
// carries its MPI traffic over the agents' tunnels: across a pair that
// connects one way only (`shoal testbed block n3 --from n2`), where Open MPI on
// the hosts' own addresses hangs, heat ends with the checksum of an
// uninterrupted run, and the testbed's bridge carries no TCP segment but to
// and from the agents' ports (TLS) while it runs; and that a job run with
// --mpi-encrypt puts none of its MPI bytes on the bridge in clear.
// The tests share one testbed (instance 254): three hosts of two cores, their
// agents started with --overlay auto.
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
	"shoal/internal/node"
	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 254

var bridge = fmt.Sprintf("shoalbr%d", instance)

var bed = &testenv.Shared{Config: testbed.Config{Nodes: 3, Cores: []int{2}, Instance: instance, AgentArgs: []string{"--overlay", "auto"}}}

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

// overlayNodes waits until the three hosts announce their overlay addresses,
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
		if len(got) == 3 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, overlay addresses %v: want 3 different ones", got)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// With n2's new connections to n3 dropped, heat on 6 ranks in blocks over the
// three hosts (n1:0-1 n2:2-3 n3:4-5) with --mpi-overlay ends with the
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
		"-n", "6", "--no-replan", "--mpi-overlay", "--", heat}, args...)...)
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
