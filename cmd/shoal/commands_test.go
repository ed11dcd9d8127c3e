package main

import (
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// shoal help CMD prints what shoal CMD --help prints.
func TestHelpCommand(t *testing.T) {
	for _, name := range []string{"run", "cancel", "testbed", "version"} {
		wantCode, want, _ := runOut(name, "--help")
		code, stdout, stderr := runOut("help", name)
		if code != wantCode || stdout != want || stderr != "" {
			t.Errorf("shoal help %s: exit %d, stdout %.60q…, stderr %q; want %d and shoal %s --help's %.60q…", name, code, stdout, stderr, wantCode, name, want)
		}
	}
	if code, stdout, _ := runOut("help", "--help"); code != exitOK || !strings.HasPrefix(stdout, "Usage: shoal COMMAND") {
		t.Errorf("shoal help --help: exit %d, stdout %.40q…; want 0 and the top-level help", code, stdout)
	}
	code, _, stderr := runOut("help", "rnu")
	if want := "shoal: unknown command \"rnu\"; did you mean \"run\"? (see 'shoal --help')\n"; code != exitUsage || stderr != want {
		t.Errorf("shoal help rnu: exit %d, stderr %q; want %d, %q", code, stderr, exitUsage, want)
	}
}

// The commands other programs run (MPI's launcher hook, a rank's and a task's
// wrappers, the agent of a Slurm allocation) are neither listed by shoal
// --help nor offered by completion; shoal rsh stays callable, its --help too.
func TestCommandsForPrograms(t *testing.T) {
	_, help, _ := runOut("--help")
	var offered []string
	for _, s := range commandSpecs() {
		offered = append(offered, s.name)
	}
	for _, name := range []string{"rsh", "exec-rank", "exec-task", "slurm-agent"} {
		if strings.Contains(help, "  "+name+" ") {
			t.Errorf("shoal --help lists %s", name)
		}
		if slices.Contains(offered, name) {
			t.Errorf("shoal completion offers %s", name)
		}
	}
	if code, stdout, _ := runOut("rsh", "--help"); code != exitOK || !strings.HasPrefix(stdout, "Usage: shoal rsh ") {
		t.Errorf("shoal rsh --help: exit %d, stdout %.40q…; want 0 and its usage", code, stdout)
	}
	if code, _, stderr := runOut("rsh"); code != exitRsh || !strings.HasPrefix(stderr, "shoal rsh: ") {
		t.Errorf("shoal rsh: exit %d, stderr %q; want %d and why", code, stderr, exitRsh)
	}
}

func TestDidYouMean(t *testing.T) {
	names := commandNames()
	for _, c := range []struct{ typed, want string }{
		{"jbos", `; did you mean "jobs"?`},     // two letters swapped: one edit
		{"nodse", `; did you mean "nodes"?`},   // two letters swapped: one edit
		{"rn", `; did you mean "run"?`},        // one dropped
		{"cancle", `; did you mean "cancel"?`}, // swapped
		{"rebalanse", `; did you mean "rebalance"?`},
		{"testbd", `; did you mean "testbed"?`},
		{"ls", ""},         // two edits from gc, as many as it has letters
		{"frobnicate", ""}, // far from everything
		{"exec-rnak", ""},  // hidden commands are not suggested
	} {
		if got := didYouMean(c.typed, names); got != c.want {
			t.Errorf("didYouMean(%q) = %q, want %q", c.typed, got, c.want)
		}
	}
	code, _, stderr := runOut("jbos")
	if want := "shoal: unknown command \"jbos\"; did you mean \"jobs\"? (see 'shoal --help')\n"; code != exitUsage || stderr != want {
		t.Errorf("shoal jbos: exit %d, stderr %q; want %d, %q", code, stderr, exitUsage, want)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"run", "run", 0}, {"", "run", 3}, {"rn", "run", 1}, {"jbos", "jobs", 1},
		{"gc", "ls", 2}, {"jobs", "logs", 2}, {"kitten", "sitting", 3},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// shoal --version and shoal version print one line: the release, the commit
// (set at build time, else from go's build information) and Go's version.
func TestVersionLine(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	stamped := &debug.BuildInfo{GoVersion: "go1.25.0", Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "5d67515d0c5c0b9f7d8e9a1b2c3d4e5f60718293"},
		{Key: "vcs.modified", Value: "true"},
	}}
	clean := &debug.BuildInfo{GoVersion: "go1.25.0", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "5d67515d0c5c0b9f7d8e9a1b2c3d4e5f60718293"},
		{Key: "vcs.modified", Value: "false"},
	}}
	for _, c := range []struct {
		version, commit string
		info            *debug.BuildInfo
		want            string
	}{
		{"0.1.0", "5d67515", stamped, "shoal 0.1.0 (commit 5d67515, go1.25.0, " + platform + ")"},
		{"0.1.0-dev", "", stamped, "shoal 0.1.0-dev (commit 5d67515d0c5c-dirty, go1.25.0, " + platform + ")"},
		{"0.1.0-dev", "", clean, "shoal 0.1.0-dev (commit 5d67515d0c5c, go1.25.0, " + platform + ")"},
		{"0.1.0-dev", "", &debug.BuildInfo{GoVersion: "go1.25.0"}, "shoal 0.1.0-dev (commit unknown, go1.25.0, " + platform + ")"},
		{"", "", nil, "shoal devel (commit unknown, " + runtime.Version() + ", " + platform + ")"},
	} {
		if got := versionLine(c.version, c.commit, c.info); got != c.want {
			t.Errorf("versionLine(%q, %q) = %q, want %q", c.version, c.commit, got, c.want)
		}
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, stdout, stderr := runOut(args...)
		if code != exitOK || !strings.HasPrefix(stdout, "shoal "+version+" (commit ") || strings.Count(stdout, "\n") != 1 || stderr != "" {
			t.Errorf("shoal %s: exit %d, stdout %q, stderr %q; want 0 and one line", args[0], code, stdout, stderr)
		}
	}
	if code, _, stderr := runOut("version", "x"); code != exitUsage || !strings.Contains(stderr, "takes no arguments") {
		t.Errorf("shoal version x: exit %d, stderr %q; want %d, takes no arguments", code, stderr, exitUsage)
	}
}
