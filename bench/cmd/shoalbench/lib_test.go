package main

// The tests of bench/lib.sh, the harness every bench script sources: beside
// the benches' Go parts, where `go test ./bench/...` runs them.

import (
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// sh runs script in bash after sourcing bench/lib.sh as the bench "demo" with the
// arguments args, and returns its stdout, stderr and exit code.
func sh(t *testing.T, script string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine: lib.sh is a bash library")
	}
	cmd := exec.Command(bash, append([]string{"-c", "set -euo pipefail; BENCH_NAME=demo; source ../../lib.sh; " + script, "demo"}, args...)...)
	cmd.Env = append(cmd.Environ(), "BENCH_JSON=")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("bash: %v", err)
	}
	return out.String(), errb.String(), code
}

func TestLibMedianAndSpread(t *testing.T) {
	tests := []struct {
		in, median, spread string
	}{
		{"", "nan", "nan nan"},
		{"3", "3", "3 3"},
		{"3 1 2", "2", "1 3"},
		{"4 1 3 2", "2.5", "1 4"},
		{"1e3 20 0.5", "20", "0.5 1e3"},
		{"-1 -3 -2", "-2", "-3 -1"},
	}
	for _, tt := range tests {
		in := strings.Join(strings.Fields(tt.in), `\n`)
		got, _, _ := sh(t, `printf '%b' '`+in+`' | median; printf '%b' '`+in+`' | spread`)
		want := tt.median + "\n" + tt.spread + "\n"
		if got != want {
			t.Errorf("median, spread of %q: got %q, want %q", tt.in, got, want)
		}
	}
}

// TestLibResult checks that the JSON line and the RESULT line carry the same
// pairs, the RESULT line last.
func TestLibResult(t *testing.T) {
	tests := []struct {
		pairs  string
		result string
		json   map[string]any
	}{
		{"ratio=1.02", "RESULT ratio=1.02", map[string]any{"ratio": 1.02}},
		{"a=1 b=-0.5 c=2e-3 d=3/4 e=all f=nan g=NaN h=+Inf i= j=007 k=-",
			"RESULT a=1 b=-0.5 c=2e-3 d=3/4 e=all f=nan g=NaN h=+Inf i= j=007 k=-",
			map[string]any{"a": 1.0, "b": -0.5, "c": 0.002, "d": "3/4", "e": "all", "f": nil, "g": nil, "h": nil,
				"i": nil, "j": "007", "k": "-"}},
		{"rs_3+2=1.4 auto_vs_best_15s=0.9", "RESULT rs_3+2=1.4 auto_vs_best_15s=0.9",
			map[string]any{"rs_3+2": 1.4, "auto_vs_best_15s": 0.9}},
	}
	for _, tt := range tests {
		out, errs, code := sh(t, "bench_result "+tt.pairs, "16", `a "quoted" arg`)
		if code != 0 {
			t.Errorf("bench_result %s: exit %d: %s", tt.pairs, code, errs)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 2 || lines[1] != tt.result {
			t.Errorf("bench_result %s: printed %q, want a JSON line, then %q", tt.pairs, out, tt.result)
			continue
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
			t.Errorf("bench_result %s: JSON line %q: %v", tt.pairs, lines[0], err)
			continue
		}
		if got["bench"] != "demo" || got["time"] == "" || got["commit"] == "" ||
			!reflect.DeepEqual(got["args"], []any{"16", `a "quoted" arg`}) {
			t.Errorf("bench_result %s: JSON line %q: want bench demo, a time, a commit and args [16 %q]", tt.pairs, lines[0], `a "quoted" arg`)
		}
		for _, k := range []string{"bench", "time", "commit", "args"} {
			delete(got, k)
		}
		if !reflect.DeepEqual(got, tt.json) {
			t.Errorf("bench_result %s: JSON pairs %v, want %v", tt.pairs, got, tt.json)
		}
	}
}

func TestLibResultRefused(t *testing.T) {
	tests := []struct {
		pairs, stderr string
	}{
		{"", "bench/demo: bench_result: no KEY=VALUE pair"},
		{"state_moved_per_epoch copy=2", "bench/demo: result 'state_moved_per_epoch': want KEY=VALUE"},
		{"'a b=1'", "bench/demo: result 'a b=1': want KEY=VALUE"},
		{"'a=1 2'", "bench/demo: result 'a=1 2': want KEY=VALUE"},
		{"=1", "bench/demo: result '=1': want KEY=VALUE"},
		{"time=3", "bench/demo: result key 'time' is the JSON line's own"},
		{"a=1 a=2", "bench/demo: result key 'a' given twice"},
	}
	for _, tt := range tests {
		out, errs, code := sh(t, "bench_result "+tt.pairs)
		if code != 1 || out != "" || !strings.HasPrefix(errs, tt.stderr) {
			t.Errorf("bench_result %s: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, %q", tt.pairs, code, out, errs, tt.stderr)
		}
	}
}

func TestLibRelay(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no result line", `a\nb\n`, "a\nb\n"},
		{"one, in the middle", `a\nRESULT x=1\nb\n`, "a\nb\n{JSON}\nRESULT x=1\n"},
		{"two, merged", `RESULT x=1\na\nRESULT y=2 z=3\n`, "a\n{JSON}\nRESULT x=1 y=2 z=3\n"},
		{"indented and partial ones pass", `  RESULT x=1\nWRONG RESULT 3\n`, "  RESULT x=1\nWRONG RESULT 3\n"},
		{"no final newline", `a\nRESULT x=1`, "a\n{JSON}\nRESULT x=1\n"},
	}
	for _, tt := range tests {
		out, errs, code := sh(t, `printf '%b' '`+tt.in+`' | bench_relay`)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", tt.name, code, errs)
			continue
		}
		var lines []string
		for _, l := range strings.SplitAfter(out, "\n") {
			if strings.HasPrefix(l, `{"bench":"demo",`) {
				l = "{JSON}\n"
			}
			lines = append(lines, l)
		}
		if got := strings.Join(lines, ""); got != tt.want {
			t.Errorf("%s: bench_relay printed %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestLibOnExit(t *testing.T) {
	out, _, code := sh(t, `bench_on_exit 'echo first'; bench_on_exit 'false'; bench_on_exit 'echo last'; bench_tmpdir d; echo "$d" >&2; exit 3`)
	if code != 3 || out != "last\nfirst\n" {
		t.Errorf("exit actions: exit %d, printed %q; want exit 3, %q", code, out, "last\nfirst\n")
	}
	out, _, _ = sh(t, `bench_tmpdir d; echo "$d"`)
	if dir := strings.TrimSpace(out); dir == "" || sh0(t, "test -e '"+dir+"'") {
		t.Errorf("bench_tmpdir made %q, which is still there after the exit", dir)
	}
}

// sh0 reports whether script exits 0.
func sh0(t *testing.T, script string) bool {
	_, _, code := sh(t, script)
	return code == 0
}

func TestLibNeed(t *testing.T) {
	_, errs, code := sh(t, `bench_need ../../lib.sh no/such/file`)
	if want := "bench/demo: no/such/file is missing: run 'make build' first\n"; code != 1 || errs != want {
		t.Errorf("bench_need: exit %d, %q; want exit 1, %q", code, errs, want)
	}
	_, errs, code = sh(t, `bench_testbed 2x`)
	if want := "bench/demo: testbed instance '2x': want a number\n"; code != 2 || errs != want {
		t.Errorf("bench_testbed 2x: exit %d, %q; want exit 2, %q", code, errs, want)
	}
}
