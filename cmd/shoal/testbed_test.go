package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"shoal/internal/testbed"
)

// cliTestbedInstance is the testbed instance of this package's tests (internal/testbed
// uses another, so both packages' tests may run at once).
const cliTestbedInstance = 202

func runTestbed(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(append([]string{"testbed"}, args...), &o, &e)
	return o.String(), e.String(), code
}

func TestTestbedUsage(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStderr string
	}{
		{nil, exitUsage, ""},
		{[]string{"--help"}, exitOK, ""},
		{[]string{"frobnicate"}, exitUsage, `unknown subcommand "frobnicate"`},
		{[]string{"up", "--nodes"}, exitUsage, "flag needs an argument"},
		{[]string{"up", "--instance", "600"}, exitUsage, "--instance 600"},
		{[]string{"--instance", "600", "up"}, exitUsage, "shoal testbed up: --instance 600: want 0 to 511"},
		{[]string{"--instance=600", "status"}, exitUsage, "shoal testbed status: --instance 600"},
		{[]string{"--instance", "7"}, exitUsage, `no subcommand after the flags ["--instance" "7"]`},
		{[]string{"stauts"}, exitUsage, `unknown subcommand "stauts"; did you mean "status"?`},
		{[]string{"up", "--no-agent", "--agent-arg=--store-lease=5s"}, exitUsage, "shoal testbed up: --agent-arg or --overlay with --no-agent: no host runs an agent"},
		{[]string{"up", "--slurm", "--agent-arg", "-v"}, exitUsage, "shoal testbed up: --agent-arg or --overlay with --slurm: no host runs an agent"},
	}
	for _, tt := range tests {
		_, stderr, code := runTestbed(tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.inStderr) {
			t.Errorf("shoal testbed %q: got code %d, stderr %q; want code %d, stderr containing %q",
				tt.args, code, stderr, tt.code, tt.inStderr)
		}
	}
	if !testbed.IsRoot() {
		return
	}
	for _, tt := range []struct {
		args     []string
		inStderr string
	}{
		{[]string{"up", "--nodes", "3", "--cores", "2,2"}, "Cores has 2 values for 3 nodes"},
		{[]string{"up", "--cores", "two"}, `--cores "two"`},
		{[]string{"up", "--rate", "fast"}, `Rate[0] = "fast"`},
		{[]string{"up", "--nodes", "6", "--sites", "3,2", "--site-rate", "20mbit"}, "Sites = [3 2]: 5 hosts in all, want Nodes = 6"},
		{[]string{"up", "--nodes", "6", "--sites", "3,3"}, `SiteRate = ""`},
		{[]string{"up", "--sites", "3,x"}, `--sites "3,x"`},
		{[]string{"up", "--profile", "lte"}, `Profile[0] = "lte": unknown profile: want none or one of android, wifi`},
		{[]string{"sleep", "n2"}, "shoal testbed sleep: want NODE and SECONDS (shoal testbed sleep n2 15), got 1 arguments"},
		{[]string{"sleep", "n2", "15s"}, `shoal testbed sleep: testbed: invalid config: SECONDS "15s": want a number of seconds`},
		{[]string{"sleep", "n2", "0"}, `SECONDS "0": want more than 0 and at most 86400`},
		{[]string{"up", "--nodes", "3", "--arch", "amd64,x86,arm64"}, `Arch[1] = "x86": want amd64 or arm64`},
		{[]string{"up", "--nodes", "3", "--arch", "amd64,arm64"}, "Arch has 2 values for 3 nodes"},
		{[]string{"add", "--arch", "sparc"}, `Arch = "sparc": want amd64 or arm64`},
		{[]string{"add", "--cpu-quota", "0.001"}, "CPUQuota = 0.001"},
		{[]string{"add", "--site", "-1"}, "Site = -1"},
		{[]string{"kill"}, "want one NODE"},
		{[]string{"exec", "n1"}, "want NODE and a COMMAND"},
	} {
		args := append([]string{tt.args[0], "--instance", strconv.Itoa(cliTestbedInstance)}, tt.args[1:]...)
		_, stderr, code := runTestbed(args...)
		if code != exitUsage || !strings.Contains(stderr, tt.inStderr) {
			t.Errorf("shoal testbed %q: got code %d, stderr %q; want code %d, stderr containing %q",
				tt.args, code, stderr, exitUsage, tt.inStderr)
		}
	}
}

// TestTestbedNotRoot runs `shoal testbed status` as an unprivileged user.
func TestTestbedNotRoot(t *testing.T) {
	if os.Getenv("SHOAL_TESTBED_NOT_ROOT") == "1" {
		os.Exit(run([]string{"testbed", "status"}, os.Stdout, os.Stderr))
	}
	want := "shoal testbed: needs root (network namespaces)\n"
	if !testbed.IsRoot() {
		_, stderr, code := runTestbed("status")
		if code != exitFailure || stderr != want {
			t.Errorf("as uid %d: got code %d, stderr %q; want %d, %q", os.Geteuid(), code, stderr, exitFailure, want)
		}
		return
	}
	// As root: copy this test binary where nobody (uid 65534) may run it, and run it so.
	dir, err := os.MkdirTemp("", "shoal-notroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "shoal.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestTestbedNotRoot$")
	cmd.Env = append(os.Environ(), "SHOAL_TESTBED_NOT_ROOT=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitFailure || stderr.String() != want {
		t.Errorf("as uid 65534: got %v, stderr %q; want exit %d, %q", err, stderr.String(), exitFailure, want)
	}
}

func TestTestbedCommands(t *testing.T) {
	if !testbed.IsRoot() {
		t.Skip("needs root: the testbed makes network namespaces, a bridge and cgroups")
	}
	inst := "--instance=" + strconv.Itoa(cliTestbedInstance)
	t.Cleanup(func() {
		if _, stderr, code := runTestbed("down", inst); code != exitOK {
			t.Errorf("down: code %d: %s", code, stderr)
		}
		// Flags before the subcommand; the hint names the instance.
		_, stderr, code := runTestbed(inst, "status")
		if want := "shoal testbed status: no testbed is up (instance 202; run 'shoal testbed up --instance 202')\n"; code != exitFailure || stderr != want {
			t.Errorf("status after down: code %d, stderr %q; want %d, %q", code, stderr, exitFailure, want)
		}
		out, _ := exec.Command("ip", "-o", "link", "show").Output()
		if strings.Contains(string(out), "shoalbr202") || strings.Contains(string(out), "shoal202-") {
			t.Errorf("links left after down:\n%s", out)
		}
	})
	stdout, stderr, code := runTestbed("up", inst, "--nodes", "2", "--cores", "2,3", "--cpu-quota", "0.5", "--rate", "50mbit", "--no-agent")
	if code != exitOK {
		t.Fatalf("up: code %d: %s", code, stderr)
	}
	for _, want := range []string{"n1", "10.77.202.11", "n2", "10.77.202.12", "50mbit", "hosts run no agent",
		"'shoal testbed exec --instance 202 n1 -- COMMAND'", "'shoal testbed down --instance 202'"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("up printed no %q:\n%s", want, stdout)
		}
	}

	stdout, stderr, code = runTestbed("exec", inst, "n2", "--", "sh", "-c", "hostname; exit 3")
	if code != 3 || stdout != "n2\n" {
		t.Errorf("exec n2 -- hostname; exit 3: got code %d, stdout %q, stderr %q; want 3, \"n2\\n\"", code, stdout, stderr)
	}
	stdout, _, code = runTestbed("rsh", inst, "10.77.202.11", "echo", "$SHOAL_TESTBED_NODE", "'a  b'")
	if code != exitOK || stdout != "n1 a  b\n" {
		t.Errorf("rsh 10.77.202.11 (shell words): got code %d, stdout %q; want 0, \"n1 a  b\\n\"", code, stdout)
	}
	if _, stderr, code = runTestbed("exec", inst, "n7", "--", "true"); code != exitFailure || !strings.Contains(stderr, "unknown node") {
		t.Errorf("exec n7: got code %d, stderr %q; want 1 and unknown node", code, stderr)
	}

	// A process in n1 that kill ends.
	b, err := testbed.Open(cliTestbedInstance, nil)
	if err != nil {
		t.Fatal(err)
	}
	sleeper, err := b.Command(context.Background(), "n1", "sleep", "1000")
	if err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"cut", inst, "n2"}, {"heal", inst, "n2"}, {"kill", inst, "n1"}, {"add", inst, "--cores", "1"}} {
		if _, stderr, code := runTestbed(args...); code != exitOK {
			t.Errorf("%q: code %d: %s", args, code, stderr)
		}
	}
	if err := sleeper.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("process in n1 after kill n1: got %v, want killed", err)
	}

	// A block shows in status until it is lifted.
	if _, err := exec.LookPath("nft"); err == nil {
		if _, stderr, code := runTestbed("block", inst, "n2", "--from", "n3"); code != exitOK {
			t.Errorf("block n2 --from n3: code %d: %s", code, stderr)
		}
		line := "n2 drops new TCP connections from n3 ('shoal testbed unblock --instance 202 n2 --from n3')"
		if stdout, _, _ := runTestbed(inst, "status"); !strings.Contains(stdout, line) {
			t.Errorf("status with n2 blocked from n3 =\n%s\nwant the line %q", stdout, line)
		}
		if _, stderr, code := runTestbed("unblock", inst, "n2", "--from", "n3"); code != exitOK {
			t.Errorf("unblock n2 --from n3: code %d: %s", code, stderr)
		}
		if stdout, _, _ := runTestbed(inst, "status"); strings.Contains(stdout, "drops new TCP") {
			t.Errorf("status once unblocked =\n%s\nwant no block line", stdout)
		}
	}

	stdout, stderr, code = runTestbed(inst, "status", "--json")
	if code != exitOK {
		t.Fatalf("status --json: code %d: %s", code, stderr)
	}
	var hosts []testbed.HostStatus
	if err := json.Unmarshal([]byte(stdout), &hosts); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	var got []string
	for _, h := range hosts {
		got = append(got, h.Name+" "+h.IP+" "+h.State+" "+strconv.Itoa(h.Cores))
	}
	want := []string{"n1 10.77.202.11 up 2", "n2 10.77.202.12 up 3", "n3 10.77.202.13 up 1"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("status: got %q, want %q", got, want)
	}
}

// Testbed flags may come before the subcommand: they are moved after it.
func TestSubcommandFirst(t *testing.T) {
	for _, c := range []struct {
		args []string
		sub  string
		rest []string
	}{
		{[]string{"status"}, "status", []string{}},
		{[]string{"status", "--json"}, "status", []string{"--json"}},
		{[]string{"--instance", "7", "status"}, "status", []string{"--instance", "7"}},
		{[]string{"--instance=7", "down"}, "down", []string{"--instance=7"}},
		{[]string{"--json", "--instance", "7", "status"}, "status", []string{"--json", "--instance", "7"}},
		{[]string{"-instance", "7", "exec", "n1", "--", "ls", "-l"}, "exec", []string{"-instance", "7", "n1", "--", "ls", "-l"}},
		{[]string{"--nodes", "3", "--no-agent", "up", "--cores", "2"}, "up", []string{"--nodes", "3", "--no-agent", "--cores", "2"}},
		{[]string{"--instance", "7"}, "", nil},
		{[]string{"--", "status"}, "", nil},
	} {
		sub, rest := subcommandFirst(c.args)
		if sub != c.sub || strings.Join(rest, " ") != strings.Join(c.rest, " ") || (c.rest == nil) != (rest == nil) {
			t.Errorf("subcommandFirst(%q) = %q, %q; want %q, %q", c.args, sub, rest, c.sub, c.rest)
		}
	}
}

// The commands the testbed suggests act on the testbed that suggests them.
func TestTestbedHint(t *testing.T) {
	for _, c := range []struct {
		instance int
		sub      string
		args     []string
		want     string
	}{
		{0, "down", nil, "shoal testbed down"},
		{7, "down", nil, "shoal testbed down --instance 7"},
		{202, "exec", []string{"n1", "--", "COMMAND"}, "shoal testbed exec --instance 202 n1 -- COMMAND"},
	} {
		if got := tbHint(c.instance, c.sub, c.args...); got != c.want {
			t.Errorf("tbHint(%d, %s, %q) = %q, want %q", c.instance, c.sub, c.args, got, c.want)
		}
	}
}
