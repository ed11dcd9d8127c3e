// Package profiles checks the device conditions of testbed hosts: a host put to sleep
// (`shoal testbed sleep`) stops every process and resumes them at its wake time. The
// tests share one testbed (instance 259) of three hosts of 2 cores: n1 on the bridge,
// n2 and n3 on Wi-Fi (`--profile wifi`).
package profiles

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/poll"
	"shoal/test/testenv"
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
