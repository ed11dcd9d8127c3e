package launch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
		// One word named orted is not enough: the case first.
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
		// A farm's task runner: shoal with exec-task as its first argument only.
		{`shoal exec-task --slots 2 -- tile 3`, []string{"shoal", "exec-task", "--slots", "2", "--", "tile", "3"}, nil},
		{`/opt/bin/shoal exec-task`, []string{"/opt/bin/shoal", "exec-task"}, nil},
		{`shoal agent --data /tmp/x`, nil, ErrNotDaemon},
		{`shoal`, nil, ErrNotDaemon},
		{`shoal --x exec-task`, nil, ErrNotDaemon},
		{`exec orted`, nil, ErrNotDaemon},
		{`env orted`, nil, ErrNotDaemon},
		{`rm -rf /`, nil, ErrNotDaemon},
		{`echo orted`, nil, ErrNotDaemon},
		{`orted2 -mca`, nil, ErrNotDaemon},
		{`'echo orted'`, nil, ErrNotDaemon},
		{`sh -c orted`, nil, ErrNotDaemon},
		{`orted/`, nil, ErrNotDaemon},
		{``, nil, ErrNotDaemon},
	} {
		got, err := DaemonArgv(tt.line, DefaultDaemons)
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
