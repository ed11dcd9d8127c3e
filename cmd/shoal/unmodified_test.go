package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUsesLibshoal(t *testing.T) {
	root := filepath.Join("..", "..")
	tests := []struct {
		rel         string
		uses, known bool
	}{
		{"build/examples/heat", true, true},
		{"build/examples/fortran/heat", true, true},
		{"build/examples/heat-plain", false, true},
		{"build/venv/bin/python", false, false}, // the script decides
		{"examples/python/heat.py", false, false},
	}
	for _, tt := range tests {
		p := filepath.Join(root, tt.rel)
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
				t.Fatalf("%s missing: make build did not produce it", tt.rel)
			}
			t.Logf("skipping %s: not built", tt.rel)
			continue
		}
		uses, known := usesLibshoal(p)
		if uses != tt.uses || known != tt.known {
			t.Errorf("usesLibshoal(%s) = %v, %v; want %v, %v", tt.rel, uses, known, tt.uses, tt.known)
		}
	}
}

// A Python script's imports say whether it checkpoints; an ELF program's
// symbols do; a job is named after a Python script, not its interpreter.
func TestCheckpointsNoteAndJobName(t *testing.T) {
	dir := t.TempDir()
	script := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const none = ""
	noImport := "hello.py does not import shoal: it writes no checkpoints, so a lost rank restarts it from the beginning"
	for _, tt := range []struct {
		name, program string
		args          []string
		note, job     string
	}{
		{"import shoal", "/usr/bin/python3", []string{script("a.py", "import numpy as np\nimport shoal\n")}, none, "a"},
		{"from shoal import", "/usr/bin/python3", []string{"-u", script("b.py", "from shoal import snapshot\n")}, none, "b"},
		{"in a list of imports", "/usr/bin/python3", []string{script("c.py", "import os, numpy as np, shoal\n")}, none, "c"},
		{"indented, in a function", "/usr/bin/python3.11", []string{script("d.py", "def main():\n    import shoal\n")}, none, "d"},
		{"no import", "/usr/bin/python3", []string{script("hello.py", "print('hello')\n")}, noImport, "hello"},
		{"shoalx is not shoal", "/usr/bin/python3", []string{script("hello.py", "import shoalx\n# import shoal in a comment\n")}, noImport, "hello"},
		{"python -c: no script to read", "/usr/bin/python3", []string{"-c", "import shoal"}, none, "python3"},
		{"an ELF program without libshoal", "/bin/true", nil, noCheckpointsNote("/bin/true"), "true"},
	} {
		if got := checkpointsNote(tt.program, tt.args); got != tt.note {
			t.Errorf("%s: checkpointsNote = %q, want %q", tt.name, got, tt.note)
		}
		if got := jobName(tt.program, tt.args); got != tt.job {
			t.Errorf("%s: jobName = %q, want %q", tt.name, got, tt.job)
		}
	}
}
