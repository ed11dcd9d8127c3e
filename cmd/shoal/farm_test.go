package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestFarmHelp(t *testing.T) {
	out := runCLI(t, exitOK, "farm", "--help")
	for _, w := range []string{"{}", "{#}", "as the last", "-tasks", "-out", "-prefetch", "-retries", "-job-id", "-detach", "Exit codes", "DIR/<task number>"} {
		if !strings.Contains(out, w) {
			t.Errorf("shoal farm --help does not mention %q", w)
		}
	}
}

// Bad input is one line naming the problem, before anything runs; an empty
// task list runs nothing and succeeds.
func TestFarmBadInput(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SHOAL_DATA_DIR", filepath.Join(dir, "no-agent"))
	t.Setenv("SHOAL_AGENT", "")
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tasks := write("tasks", "a\nb\n", 0o644)
	empty := write("empty", "", 0o644)
	long := write("long", "ok\n"+strings.Repeat("x", 5000)+"\n", 0o644)
	notExec := write("not-exec", "#!/bin/sh\n", 0o644)
	aFile := write("a-file", "", 0o644)
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tasks", empty, "true"}, exitOK, "the task list is empty; nothing to run"},
		{[]string{"--tasks", tasks, notExec}, exitUsage, "is not executable"},
		{[]string{"--tasks", tasks, filepath.Join(dir, "missing")}, exitUsage, "does not exist"},
		{[]string{"--tasks", tasks, "--out", filepath.Join(aFile, "sub"), "true"}, exitUsage, "--out " + filepath.Join(aFile, "sub")},
		{[]string{"--tasks", long, "true"}, exitUsage, "task 1 (line 2 of " + long + "): want at most 4096 bytes"},
		{[]string{"--tasks", filepath.Join(dir, "nope"), "true"}, exitUsage, "--tasks: open"},
		{[]string{"--prefetch", "-1", "true"}, exitUsage, "--prefetch -1"},
		{[]string{"--retries", "101", "true"}, exitUsage, "--retries 101"},
		{[]string{"--job-id", "../x", "true"}, exitUsage, "--job-id"},
		{[]string{"--env", "NOEQUALS", "true"}, exitUsage, "--env"},
		{[]string{"--tasks", tasks}, exitUsage, "no program given"},
		{[]string{"--tasks", tasks, "--detach", "true"}, exitUsage, "--detach needs an agent, and none runs on this machine"},
		{[]string{"--tasks", tasks, "--local", "--dispatch", "cyclic", "true"}, exitUsage, "--dispatch needs an agent"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"farm"}, tt.args...), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != tt.code || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") || stdout.Len() != 0 {
			t.Errorf("shoal farm %s: exit %d, stderr %q, stdout %q; want exit %d and one line with %q",
				strings.Join(tt.args, " "), code, msg, &stdout, tt.code, tt.want)
		}
	}
}

func TestReadTasks(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a\n", []string{"a"}},
		{"a\nb", []string{"a", "b"}},
		{"a\r\n\nc d\n", []string{"a", "", "c d"}},
	} {
		got, err := readTasks("", strings.NewReader(tt.in))
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("readTasks(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestCancelUsage(t *testing.T) {
	if out := runCLI(t, exitOK, "cancel", "--help"); !strings.Contains(out, "Exit codes") {
		t.Errorf("shoal cancel --help = %q, want its exit codes", out)
	}
	for _, args := range [][]string{{"cancel"}, {"cancel", "a", "b"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("shoal %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
}
