package launch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDaemonArgv(t *testing.T) {
	for _, tt := range []struct {
		line string
		want []string // nil: refused
		err  error
	}{
		// What Open MPI 4.1 sends with no --prefix (as shoal's mpirun runs it).
		{` orted -mca ess "env" -mca orte_node_regex "vm,fakehost[1:1]@0(2)" -mca orte_hnp_uri "431685632.0;tcp://192.0.2.2:58335;tcp6://[fd00::2]:57839" --mca plm_rsh_agent "/opt/shoal rsh" --tree-spawn`,
			[]string{"orted", "-mca", "ess", "env", "-mca", "orte_node_regex", "vm,fakehost[1:1]@0(2)", "-mca", "orte_hnp_uri", "431685632.0;tcp://192.0.2.2:58335;tcp6://[fd00::2]:57839", "--mca", "plm_rsh_agent", "/opt/shoal rsh", "--tree-spawn"}, nil},
		{`/usr/lib/openmpi/bin/prted --x 'a b' c\ d`, []string{"/usr/lib/openmpi/bin/prted", "--x", "a b", "c d"}, nil},
		// MPICH Hydra.
		{`"/usr/bin/hydra_pmi_proxy" --control-port vm:40123 --proxy-id 0`, []string{"/usr/bin/hydra_pmi_proxy", "--control-port", "vm:40123", "--proxy-id", "0"}, nil},
		// A command that names orted but is more than one command: the case first.
		{`orted ; id > file`, nil, ErrNotSimple},
		{`orted;id`, nil, ErrNotSimple},
		{`orted && id`, nil, ErrNotSimple},
		{`orted | tee x`, nil, ErrNotSimple},
		{"orted\nid", nil, ErrNotSimple},
		{`orted > /etc/x`, nil, ErrNotSimple},
		{`orted $(id)`, nil, ErrNotSimple},
		{"orted `id`", nil, ErrNotSimple},
		{`orted "$(id)"`, nil, ErrNotSimple},
		{`orted "${HOME}"`, nil, ErrNotSimple},
		{`orted *`, nil, ErrNotSimple},
		{`orted ~root`, nil, ErrNotSimple},
		{`orted # comment`, nil, ErrNotSimple},
		{`orted 'unterminated`, nil, ErrNotSimple},
		{`PATH=/x orted`, nil, ErrNotSimple},
		{`PATH=/opt/ompi/bin:$PATH ; export PATH ; /opt/ompi/bin/orted -mca ess "env"`, nil, ErrNotSimple},
		// A farm's task runner; which program a word names is checked by path
		// (TestCheckDaemon), not here.
		{`shoal exec-task --slots 2 -- tile 3`, []string{"shoal", "exec-task", "--slots", "2", "--", "tile", "3"}, nil},
		{`rm -rf /`, []string{"rm", "-rf", "/"}, nil},
		{`'echo orted'`, []string{"echo orted"}, nil},
		{``, nil, ErrNotDaemon},
		{`  `, nil, ErrNotDaemon},
	} {
		got, err := DaemonArgv(tt.line)
		if !slices.Equal(got, tt.want) || (tt.err == nil) != (err == nil) || tt.err != nil && !errors.Is(err, tt.err) {
			t.Errorf("DaemonArgv(%q) = %q, %v; want %q, %v", tt.line, got, err, tt.want, tt.err)
		}
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin := dir + "/bin"
	writeExec(t, bin+"/orted")
	if got, err := lookPath("orted", dir, "/nonexistent:"+bin); err != nil || got != bin+"/orted" {
		t.Errorf("lookPath(orted) = %q, %v; want %s", got, err, bin+"/orted")
	}
	if got, err := lookPath("bin/orted", dir, ""); err != nil || got != bin+"/orted" {
		t.Errorf("lookPath(bin/orted) = %q, %v; want it relative to the data dir", got, err)
	}
	if _, err := lookPath("orted", dir, "/nonexistent"); err == nil {
		t.Error("lookPath found orted where there is none")
	}
}

func writeExec(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestCheckDaemon(t *testing.T) {
	daemons := []Daemon{{Path: "/usr/bin/orted"}, {Path: "/usr/bin/hydra_pmi_proxy"}, {Path: "/opt/shoal/bin/shoal", Arg: "exec-task"}}
	for _, tt := range []struct {
		argv    []string
		program string // the file argv[0] resolved to
		ok      bool
	}{
		{[]string{"orted", "-mca", "ess", "env"}, "/usr/bin/orted", true},
		{[]string{"/usr/bin/hydra_pmi_proxy", "--control-port", "vm:1"}, "/usr/bin/hydra_pmi_proxy", true},
		{[]string{"shoal", "exec-task", "--slots", "2"}, "/opt/shoal/bin/shoal", true},
		// A script named orted is not orted, wherever it is found.
		{[]string{"orted"}, "/home/u/bin/orted", false},
		{[]string{"/tmp/x/orted"}, "/tmp/x/orted", false},
		// The agent's executable is a daemon only as the task runner.
		{[]string{"shoal", "agent", "--data", "/tmp/x"}, "/opt/shoal/bin/shoal", false},
		{[]string{"shoal"}, "/opt/shoal/bin/shoal", false},
		{[]string{"shoal", "--x", "exec-task"}, "/opt/shoal/bin/shoal", false},
		// Another program, whatever its name.
		{[]string{"orted"}, "/usr/bin/dash", false},
		{[]string{"rm", "-rf", "/"}, "/usr/bin/rm", false},
	} {
		err := checkDaemon(tt.argv, tt.program, daemons)
		if tt.ok != (err == nil) || err != nil && (!errors.Is(err, ErrNotDaemon) || !strings.Contains(err.Error(), tt.program)) {
			t.Errorf("checkDaemon(%q, %s) = %v; want ok %v (else ErrNotDaemon naming the file)", tt.argv, tt.program, err, tt.ok)
		}
	}
	if err := checkDaemon([]string{"orted"}, "/tmp/orted", daemons); err == nil || !strings.Contains(err.Error(), "/usr/bin/orted, /usr/bin/hydra_pmi_proxy, /opt/shoal/bin/shoal exec-task") {
		t.Errorf("refusal %v: want it to list the allowed daemons", err)
	}
}

// TestFindDaemons: the daemons of an installation are found on the PATH and
// beside its launcher, by the file they link to; a relative PATH entry counts
// for nothing.
func TestFindDaemons(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ompi := root + "/opt/ompi/bin"   // an installation, on no PATH
	mpich := root + "/opt/mpich/bin" // another, on the PATH
	bin := root + "/bin"             // on the PATH: links to ompi's launcher and daemon
	rel := "rel"                     // on the PATH, relative to the working directory
	writeExec(t, ompi+"/orterun")
	writeExec(t, ompi+"/prted")
	writeExec(t, mpich+"/hydra_pmi_proxy")
	writeExec(t, root+"/"+rel+"/orted")
	t.Chdir(root)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{bin + "/mpirun.openmpi": ompi + "/orterun", bin + "/orted": ompi + "/prted"} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	self := root + "/shoal"
	writeExec(t, self)
	got := FindDaemons(strings.Join([]string{bin, mpich, rel}, ":"), self)
	for _, want := range []Daemon{{Path: ompi + "/prted"}, {Path: mpich + "/hydra_pmi_proxy"}, {Path: self, Arg: "exec-task"}} {
		if !slices.Contains(got, want) {
			t.Errorf("FindDaemons = %v; want it to hold %v", got, want)
		}
	}
	for _, d := range got {
		if strings.HasPrefix(d.Path, bin+"/") || strings.HasPrefix(d.Path, root+"/"+rel+"/") {
			t.Errorf("FindDaemons = %v; holds %v (a link's own path, or a relative PATH entry's)", got, d)
		}
	}
}

// TestRootOnly: a root agent runs a daemon only from a file that root alone can
// change: the file and every directory above it root's and writable by no one
// else (a sticky directory aside).
func TestRootOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the files are chowned")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		fileMode os.FileMode
		dirMode  os.FileMode
		owner    int // of the file
		ok       bool
	}{
		{"root's alone", 0o755, 0o755, 0, true},
		{"in a sticky world-writable directory", 0o755, os.ModeSticky | 0o777, 0, true},
		{"group-writable", 0o775, 0o755, 0, false},
		{"writable by others", 0o757, 0o755, 0, false},
		{"owned by a user", 0o755, 0o755, 1000, false},
		{"in a group-writable directory", 0o755, 0o775, 0, false},
	} {
		d := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
		p := d + "/orted"
		writeExec(t, p)
		if err := errors.Join(os.Chmod(p, tt.fileMode), os.Chown(p, tt.owner, 0), os.Chmod(d, tt.dirMode)); err != nil {
			t.Fatal(err)
		}
		err := rootOnly(p)
		if tt.ok != (err == nil) || err != nil && !errors.Is(err, ErrDaemonUnsafe) {
			t.Errorf("%s: rootOnly(%s) = %v; want ok %v (else ErrDaemonUnsafe)", tt.name, p, err, tt.ok)
		}
	}
}

// The words Open MPI 4.1.4's mpirun and MPICH 4.0.2's mpiexec hand their rsh
// agent after the host name, captured with a stand-in agent that logged its
// arguments (users made with each login shell, mpirun run as them). Open MPI
// wraps the daemon in a subshell that sources ./.profile when the launching
// user's login shell is sh-like; Hydra sends the same words for every shell.
var (
	ompiOrted = []string{` orted`, `-mca`, `ess`, `"env"`, `-mca`, `ess_base_jobid`, `"938213376"`, `-mca`, `ess_base_vpid`, `1`,
		`-mca`, `ess_base_num_procs`, `"2"`, `-mca`, `orte_node_regex`, `"vm,fakehost@0(2)"`,
		`-mca`, `orte_hnp_uri`, `"938213376.0;tcp://192.0.2.2,10.77.237.1:57149;tcp6://[fd00::2]:46845"`,
		`--mca`, `plm_rsh_agent`, `"/opt/shoal/bin/shoal rsh"`, `-mca`, `plm`, `"rsh"`, `--tree-spawn`, `-mca`, `routed`, `"radix"`,
		`-mca`, `orte_parent_uri`, `"938213376.0;tcp://192.0.2.2,10.77.237.1:57149;tcp6://[fd00::2]:46845"`, `-mca`, `pmix`, `"^s1,s2,cray,isolated"`}
	ompiProfile = []string{`(`, `test`, `!`, `-r`, `./.profile`, `||`, `.`, `./.profile;`}
	hydraProxy  = []string{`"/usr/bin/hydra_pmi_proxy"`, `--control-port`, `localhost:34167`, `--rmk`, `user`, `--launcher`, `ssh`,
		`--launcher-exec`, `/tmp/shoal-launcher`, `--demux`, `poll`, `--pgid`, `0`, `--retries`, `10`, `--usize`, `-2`,
		`--pmi-port`, `0`, `--gpus-per-proc`, `-2`, `--proxy-id`, `1`}
)

func wrapped(words []string) []string {
	return append(append(slices.Clone(ompiProfile), words...), ")")
}

// TestDaemonArgvLoginShells: what each launcher sends for a user of each login
// shell is read as the daemon's own words, the wrapper dropped; a line that is
// anything but that exact wrapper around literal words is refused.
func TestDaemonArgvLoginShells(t *testing.T) {
	orted := []string{"orted", "-mca", "ess", "env", "-mca", "ess_base_jobid", "938213376", "-mca", "ess_base_vpid", "1",
		"-mca", "ess_base_num_procs", "2", "-mca", "orte_node_regex", "vm,fakehost@0(2)",
		"-mca", "orte_hnp_uri", "938213376.0;tcp://192.0.2.2,10.77.237.1:57149;tcp6://[fd00::2]:46845",
		"--mca", "plm_rsh_agent", "/opt/shoal/bin/shoal rsh", "-mca", "plm", "rsh", "--tree-spawn", "-mca", "routed", "radix",
		"-mca", "orte_parent_uri", "938213376.0;tcp://192.0.2.2,10.77.237.1:57149;tcp6://[fd00::2]:46845", "-mca", "pmix", "^s1,s2,cray,isolated"}
	proxy := []string{"/usr/bin/hydra_pmi_proxy", "--control-port", "localhost:34167", "--rmk", "user", "--launcher", "ssh",
		"--launcher-exec", "/tmp/shoal-launcher", "--demux", "poll", "--pgid", "0", "--retries", "10", "--usize", "-2",
		"--pmi-port", "0", "--gpus-per-proc", "-2", "--proxy-id", "1"}
	for _, tt := range []struct {
		name string
		sent []string // the words after the host name
		want []string
	}{
		{"openmpi /bin/sh", wrapped(ompiOrted), orted},
		{"openmpi /bin/dash", wrapped(ompiOrted), orted},
		{"openmpi /bin/ksh", wrapped(ompiOrted), orted},
		{"openmpi /bin/bash", ompiOrted, orted},
		{"openmpi /usr/bin/zsh", ompiOrted, orted},
		{"mpich any shell", hydraProxy, proxy},
	} {
		got, err := DaemonArgv(strings.Join(tt.sent, " "))
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: DaemonArgv = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}

	open, inside := strings.Join(ompiProfile, " "), strings.TrimSpace(strings.Join(ompiOrted, " "))
	for _, line := range []string{
		// More than the daemon inside the exact wrapper.
		open + " orted ; id > /tmp/x )",
		open + " orted ) ; id ; ( true )",
		open + " orted $(id) )",
		open + " PATH=/tmp orted )",
		open + " PATH=/opt/ompi/bin:$PATH ; export PATH ; /opt/ompi/bin/orted -mca ess env )",
		open + " ( test ! -r ./.profile || . ./.profile; orted ) )", // wrapped twice
		// A quote or escape reaching into the closing parenthesis.
		open + " orted ' )",
		open + ` orted \ )`,
		open + ` orted " )`,
		// Near misses of the wrapper itself.
		"( test ! -r ./.evil || . ./.evil; " + inside + " )",
		"( test ! -r ./.profile && . ./.profile; " + inside + " )",
		"( . ./.profile; " + inside + " )",
		"(test ! -r ./.profile || . ./.profile; " + inside + " )",
		"( test ! -r ./.profile || . ./.profile;" + inside + " )", // Open MPI always leaves a blank
		"( test ! -r ./.profile || . ./.profile; " + inside + ")",
		"( test ! -r ./.profile || . ./.profile; " + inside + " ) ; id",
		"( test ! -r ./.profile || . ./.profile; " + inside + " ) )",
		" ( test ! -r ./.profile || . ./.profile; " + inside + " )",
		"( " + inside + " )",
		"{ test ! -r ./.profile || . ./.profile; " + inside + " ; }",
		open + " )", // nothing inside
	} {
		if got, err := DaemonArgv(line); err == nil || !errors.Is(err, ErrNotSimple) && !errors.Is(err, ErrNotDaemon) || strings.Contains(err.Error(), "\n") {
			t.Errorf("DaemonArgv(%q) = %q, %v; want a one-line refusal", line, got, err)
		}
	}
}
