package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Without an agent, a farm runs on this machine as it would on a cluster:
// results in task order, a task that keeps failing given up and named (exit
// 1), the same farm again running only the task without a result and giving
// every result, a changed command refused naming the change, and --rerun
// running it with the new one.
func TestFarmLocal(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SHOAL_DATA_DIR", filepath.Join(dir, "data"))
	t.Setenv("SHOAL_AGENT", "")
	fixed := filepath.Join(dir, "fixed")
	prog := filepath.Join(dir, "square")
	script := "#!/bin/sh\nif [ \"$1\" = 3 ] && [ ! -e " + fixed + " ]; then echo \"cannot do $1\" >&2; exit 3; fi\necho \"$2$(( $1 * $1 ))\"\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tasks := filepath.Join(dir, "tasks")
	if err := os.WriteFile(tasks, []byte("0\n1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	farm := []string{"farm", "--tasks", tasks, "--retries", "1", "--job-id", "sq", "--quiet"}
	for _, step := range []struct {
		name   string
		before func()
		args   []string
		code   int
		stdout string
		stderr []string // lines stderr must hold
	}{
		{"task 3 fails", nil, []string{prog, "{}"}, exitFailure, "0\n1\n4\n16\n",
			[]string{"[task 3] cannot do 3", "task 3 ended with exit code 3", "job sq failed: 1 of 5 tasks failed: 3 (exit 3)", "'shoal farm --job-id sq'"}},
		{"fixed, run again", func() { os.WriteFile(fixed, nil, 0o644) }, []string{prog, "{}"}, exitOK, "0\n1\n4\n9\n16\n", nil},
		{"another command line", nil, []string{prog, "{}", "="}, exitFailure, "",
			[]string{`job id "sq" is your ended farm, and this one changes its command line: --rerun`}},
		{"--rerun", nil, []string{"--rerun", "--out", out, prog, "{}", "="}, exitOK, "", nil},
	} {
		if step.before != nil {
			step.before()
		}
		var stdout, stderr bytes.Buffer
		code := run(append(farm, step.args...), &stdout, &stderr)
		if code != step.code || stdout.String() != step.stdout {
			t.Fatalf("%s: exit %d, stdout %q; want exit %d, stdout %q\nstderr: %s", step.name, code, &stdout, step.code, step.stdout, &stderr)
		}
		for _, want := range step.stderr {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%s: stderr does not hold %q:\n%s", step.name, want, &stderr)
			}
		}
	}
	// The rerun kept the results stored before, as the cluster's does.
	for task, want := range []string{"0\n", "1\n", "4\n", "9\n", "16\n"} {
		got, err := os.ReadFile(filepath.Join(out, strconv.Itoa(task)))
		if err != nil || string(got) != want {
			t.Errorf("--out %s/%d = %q, %v; want %q", out, task, got, err, want)
		}
	}
}
