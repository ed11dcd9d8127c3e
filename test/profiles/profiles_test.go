// Package profiles checks the device conditions of testbed hosts: a host put to sleep
// (`shoal testbed sleep`) stops every process and resumes them at its wake time, and a
// job whose host sleeps on a Wi-Fi link (`--profile wifi`) ends with the result of an
// uninterrupted run, having said what it did; an android host (`--profile android`)
// kills SysV IPC callers and its processes beyond 32. The tests share one testbed
// (instance 259) of three hosts of 2 cores: n1 on the bridge, n2 and n3 on Wi-Fi
// (TestAndroid adds n4).
package profiles

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
	"shoal/test/watch"
)

const instance = 259

var bed = &testenv.Shared{Config: testbed.Config{
	Nodes: 3, Cores: []int{2}, Instance: instance,
	Profile: []string{"none", testbed.WiFi.Name, testbed.WiFi.Name},
}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// state is what Status says of node now.
func state(t *testing.T, b *testbed.Bed, node string) string {
	t.Helper()
	hosts, _, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.Name == node {
			return h.State
		}
	}
	t.Fatalf("status lists no %s", node)
	return ""
}

// ticker starts, in node, a shell that writes an ever larger number to a file every
// 50 ms, and returns a function reading the last number written.
func ticker(t *testing.T, b *testbed.Bed, node string) func() string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tick")
	cmd, err := b.Command(context.Background(), node, "/bin/sh", "-c",
		`i=0; while :; do i=$((i+1)); echo $i > "$1.tmp"; mv "$1.tmp" "$1"; sleep 0.05; done`, "ticker", file)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	read := func() string { b, _ := os.ReadFile(file); return strings.TrimSpace(string(b)) }
	poll.Until(t, 10*time.Second, func() string {
		if read() == "" {
			return "the ticker in " + node + " has written nothing"
		}
		return ""
	})
	return read
}

// advances says "" once the ticker has moved on from what it read at first.
func advances(read func() string) func() string {
	first := read()
	return func() string {
		if read() == first {
			return "the ticker is still at " + first
		}
		return ""
	}
}

// A host put to sleep stops every process (status: asleep) and resumes them at its wake
// time by itself; wake ends a sleep sooner; a host whose waker died wakes at the next
// status past its wake time.
func TestSleep(t *testing.T) {
	b := bed.Up(t)
	ctx := context.Background()
	read := ticker(t, b, "n2")

	at, err := b.Sleep(ctx, "n2", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := state(t, b, "n2"); got != "asleep" {
		t.Errorf("state of n2 asleep: %q, want asleep", got)
	}
	stopped := read()
	poll.Holds(t, time.Until(at)-300*time.Millisecond, func() string {
		if now := read(); now != stopped {
			return fmt.Sprintf("the ticker in n2 went on from %s to %s while n2 slept", stopped, now)
		}
		return ""
	})
	poll.Until(t, 5*time.Second, advances(read))
	if got := state(t, b, "n2"); got != "up" {
		t.Errorf("state of n2 after its wake time: %q, want up", got)
	}

	if _, err := b.Sleep(ctx, "n2", time.Hour); err != nil {
		t.Fatal(err)
	}
	poll.Holds(t, 300*time.Millisecond, func() string {
		if s := state(t, b, "n2"); s != "asleep" {
			return "n2 is " + s
		}
		return ""
	})
	if err := b.Wake(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, advances(read))

	at, err = b.Sleep(ctx, "n2", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.Host("n2")
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(-h.WakerPID, syscall.SIGKILL)
	stopped = read()
	poll.Holds(t, time.Until(at)+time.Second, func() string {
		if now := read(); now != stopped {
			return fmt.Sprintf("the ticker in n2 went on from %s to %s with its waker dead", stopped, now)
		}
		return ""
	})
	poll.Until(t, 5*time.Second, func() string {
		if s := state(t, b, "n2"); s != "up" {
			return "status says n2 is " + s
		}
		return ""
	})
	poll.Until(t, 5*time.Second, advances(read))
}

// heatArgs is a run of about 20 s with one rank on each host, two of them on Wi-Fi.
var heatArgs = []string{"--size", "200", "--steps", "200"}

// A host on Wi-Fi sleeps 15 s in the middle of a heat job with a rank on every host. The
// job either waits for it (the ski-rental rule) or gives it up and restarts from its
// newest epoch; whichever it says it did is what it did, and it ends with the checksum
// of an uninterrupted run.
func TestHeatHostSleeps(t *testing.T) {
	b := bed.Up(t)
	heat := testenv.Built(t, "build/examples/heat")
	ref := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, testenv.Built(t, "bin/shoal"),
		append([]string{"run", "-n", "3", "--ckpt-interval", "0", "--", heat}, heatArgs...)...)
	if code := ref.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("the reference run exited %d", code)
	}
	want := watch.Field(ref.Output(), "checksum")

	cmd, err := b.Command(context.Background(), "n1", append([]string{testenv.Built(t, "bin/shoal"),
		"run", "-n", "3", "--ranks-per-node", "1", "--ckpt-interval", "2s", "--", heat}, heatArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	j := watch.Start(t, cmd)
	id := j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	j.WaitLine(`^shoal: epoch 1 complete`, time.Minute)
	node := "n3"
	if testenv.CoordinatorOf(t, b, id) == node {
		node = "n2"
	}
	at, err := b.Sleep(context.Background(), node, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s asleep until %s", node, at.Format("15:04:05.000"))
	if code := j.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("shoal run exited %d", code)
	}
	out := j.Output()
	if got := watch.Field(out, "checksum"); got != want {
		t.Errorf("checksum %q, want the uninterrupted run's %q", got, want)
	}
	said := regexp.MustCompile(`shoal: node ` + node + ` (is back after [^:]*|lost \(no answer for [^)]*\))`).FindString(out)
	restarts := regexp.MustCompile(`\((\d+) restarts?\)`).FindStringSubmatch(out)
	resumed := strings.Count(out, "heat: resumed at step")
	t.Logf("the job said %q; %v; heat resumed %d times", said, restarts, resumed)
	switch {
	case said == "":
		t.Errorf("no line saying that %s was waited for or lost", node)
	case strings.Contains(said, "is back after"):
		if restarts == nil || restarts[1] != "0" || resumed != 0 {
			t.Errorf("the job said %q but restarted (%v, heat resumed %d times)", said, restarts, resumed)
		}
		if time.Now().Before(at) {
			t.Errorf("the job said %q but ended while %s slept", said, node)
		}
	default:
		if restarts == nil || restarts[1] == "0" || resumed == 0 {
			t.Errorf("the job said %q but did not restart (%v, heat resumed %d times)", said, restarts, resumed)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// An android host (added without an agent) kills a process that calls SysV IPC with
// SIGSYS, as Android's seccomp filter does, which stops Open MPI's mpirun unless its
// shmem framework keeps to mmap; and it kills its newest processes beyond 32, as
// Android's phantom-process killer does, keeping the oldest.
func TestAndroid(t *testing.T) {
	b := bed.Up(t)
	ctx := context.Background()
	h, err := b.Add(ctx, testbed.HostConfig{Cores: 2, Profile: testbed.Android.Name, NoAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Kill(ctx, h.Name) })

	signalOf := func(err error) syscall.Signal {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return ws.Signal()
			}
		}
		return 0
	}
	tests := []struct {
		argv []string
		want syscall.Signal // 0: exits 0
	}{
		{[]string{"ipcmk", "-M", "4096"}, syscall.SIGSYS},
		{[]string{"ipcmk", "-S", "1"}, syscall.SIGSYS},
		{[]string{"ipcmk", "-Q"}, syscall.SIGSYS},
		{[]string{"mpirun", "-np", "2", "true"}, syscall.SIGSYS},
		{[]string{"env", "OMPI_MCA_shmem=mmap", "mpirun", "-np", "2", "true"}, 0},
		{[]string{"true"}, 0},
	}
	for _, tt := range tests {
		_, err := b.Exec(ctx, h.Name, tt.argv...)
		if got := signalOf(err); got != tt.want || (tt.want == 0 && err != nil) {
			t.Errorf("%s on %s: %v (signal %d), want signal %d (0: success)", strings.Join(tt.argv, " "), h.Name, err, got, tt.want)
		}
	}

	cmd, err := b.Command(ctx, h.Name, "/bin/sh", "-c", `for i in $(seq 40); do sleep 60 & done; wait`)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	killerLog := filepath.Join(b.Dir(), h.Name, "killer.log")
	poll.Until(t, 10*time.Second, func() string {
		procs, err := b.Procs(h.Name)
		if err != nil {
			return err.Error()
		}
		log, _ := os.ReadFile(killerLog)
		kills := strings.Count(string(log), "beyond its limit of 32")
		if len(procs) != testbed.PhantomLimit || kills < 41-testbed.PhantomLimit {
			return fmt.Sprintf("%s has %d processes, and %s names %d kills; want %d and at least %d",
				h.Name, len(procs), killerLog, kills, testbed.PhantomLimit, 41-testbed.PhantomLimit)
		}
		return ""
	})
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Errorf("the oldest process of %s, the shell that started the others, was killed: %v", h.Name, err)
	}
}
