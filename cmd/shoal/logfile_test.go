package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/test/poll"
)

// SIGHUP reopens the agent's --log-file, as logrotate has it: the file
// renamed, the agent writes on to a new file of the name, and the renamed one
// ends with the line saying so.
func TestAgentReopensLogOnSIGHUP(t *testing.T) {
	// The test binary must outlive a SIGHUP the agent does not catch.
	held := make(chan os.Signal, 1)
	signal.Notify(held, syscall.SIGHUP)
	defer signal.Stop(held)

	path := filepath.Join(t.TempDir(), "agent.log")
	startCLIAgent(t, "hup", "--init", "--log-file", path)
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return string(b)
	}
	poll.Until(t, 10*time.Second, func() string {
		if !strings.Contains(read(path), "agent started") {
			return "no 'agent started' line in " + path + ":\n" + read(path)
		}
		return ""
	})
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() string {
		if got := read(path); !strings.Contains(got, "log file reopened on SIGHUP") {
			return "after SIGHUP, " + path + " holds " + strconv.Quote(got) + "; want a new file with the line 'log file reopened on SIGHUP'"
		}
		return ""
	})
	if old := read(rotated); !strings.Contains(old, "agent started") || !strings.Contains(old, "reopening the log file on SIGHUP") {
		t.Errorf("the renamed log %s:\n%s\nwant its earlier lines, and last the one saying it is reopened", rotated, old)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the new log file: %v, %v; want mode 0600", fi, err)
	}
}
