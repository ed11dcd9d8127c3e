package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseHelp: what a command's --help prints of its flag set gives back
// every flag of the set, and which take a value, whatever the usage text
// before it says.
func TestParseHelp(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("x", false, "a one-letter bool")
	fs.Bool("json", false, "a bool")
	fs.Int("n", 0, "a one-letter int")
	fs.String("job-id", "", "a string")
	fs.String("data-dir", "", "a directory")
	fs.String("out", "", "results in `DIR`")
	fs.Duration("wait-for-nodes", time.Second, "a duration\non two lines")
	fs.Func("state", "a `LIST` of states", func(string) error { return nil })
	fs.Var(&intervalFlag{}, "ckpt-interval", "a Value")
	fs.String("job", "", "an existing job")
	var help strings.Builder
	help.WriteString("Usage: shoal x [flags] JOB\n\nExamples:\n  -n 4 looks like a flag\n    but is not one\n\nFlags:\n")
	fs.SetOutput(&help)
	fs.PrintDefaults()
	flags, operand := parseHelp(help.String())
	want := []compFlag{{"ckpt-interval", "other"}, {"data-dir", "file"}, {"job", "job"}, {"job-id", "other"}, {"json", ""},
		{"n", "other"}, {"out", "file"}, {"state", "state"}, {"wait-for-nodes", "other"}, {"x", ""}}
	if !slices.Equal(flags, want) || operand != "job" {
		t.Errorf("parseHelp:\n got %v, operand %q\nwant %v, operand job\nof:\n%s", flags, operand, want, help.String())
	}
}

// completeIn drives the bash completion script, sourced in a bash without
// startup files, as bash would on TAB: COMP_WORDS and COMP_CWORD set, then the
// function `complete -p shoal` names. Each line of cases is the words of one
// command line, tab-separated, the last the word being completed; the result
// is COMPREPLY of each, space-separated.
func completeIn(t *testing.T, script string, cases [][]string) []string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "shoal.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	var driver strings.Builder
	driver.WriteString(`source "$1" || exit 1
spec=$(complete -p shoal) || exit 1
fn=${spec#*-F }
fn=${fn%% *}
`)
	for _, words := range cases {
		driver.WriteString("COMP_WORDS=(")
		for _, w := range words {
			driver.WriteString(shellWord(w) + " ")
		}
		driver.WriteString(`); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); "$fn" shoal "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"; echo "${COMPREPLY[*]}"` + "\n")
	}
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", driver.String(), "bash", path).Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(cases) {
		t.Fatalf("bash printed %d lines for %d cases:\n%s", len(got), len(cases), out)
	}
	return got
}

func TestBashCompletion(t *testing.T) {
	// A shoal that knows two jobs, for the job ids.
	fake := filepath.Join(t.TempDir(), "shoal")
	os.WriteFile(fake, []byte("#!/bin/sh\n[ \"$1 $2\" = 'completion job-ids' ] && printf 'sim-2\\nsim-1\\nheat\\n'\n"), 0o755)
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"shoal", "ru"}, "run"},
		{[]string{"shoal", "run", "--ckpt"}, "--ckpt-interval"},
		{[]string{"shoal", "run", "-n", "4", "--max-r"}, "--max-ranks --max-restarts"},
		{[]string{"shoal", "help", "ca"}, "cancel"},
		{[]string{"shoal", "jobs", "--st"}, "--state"},
		{[]string{"shoal", "jobs", "--state", "ru"}, "running"},
		{[]string{"shoal", "jobs", "--state", "running,f"}, "running,failed"},
		{[]string{"shoal", "jobs", "--state", "=", "fa"}, "failed"},
		{[]string{"shoal", "testbed", "st"}, "status"},
		{[]string{"shoal", "testbed", "--instance", "7", "up", "--no-"}, "--no-agent"},
		{[]string{"shoal", "completion", "z"}, "zsh"},
		{[]string{fake, "cancel", "sim"}, "sim-2 sim-1"},
		{[]string{fake, "logs", "--follow", ""}, "sim-2 sim-1 heat"},
		{[]string{fake, "gc", "--job", "h"}, "heat"},
		{[]string{"/nonexistent/shoal", "wait", ""}, ""}, // no agent, no shoal: nothing
		{[]string{"shoal", "nodes", ""}, ""},
	}
	var cases [][]string
	for _, tt := range tests {
		cases = append(cases, tt.words)
	}
	got := completeIn(t, bashCompletion(commandSpecs()), cases)
	for i, tt := range tests {
		if got[i] != tt.want {
			t.Errorf("%q<TAB>: got %q, want %q", strings.Join(tt.words, " "), got[i], tt.want)
		}
	}
}

// TestBashCompletionComplete: every command shoal --help lists, and every
// flag each one's --help lists, is completed: the script is made from them.
func TestBashCompletionComplete(t *testing.T) {
	specs := commandSpecs()
	cases := [][]string{{"shoal", ""}}
	var want []string
	var all []compSpec
	for _, s := range specs {
		all = append(all, s)
		for _, sub := range s.subs {
			sub.name = s.name + " " + sub.name
			all = append(all, sub)
		}
	}
	for _, s := range all {
		var w []string
		for _, f := range s.flags {
			w = append(w, flagWord(f.name))
		}
		want = append(want, strings.Join(w, " "))
		cases = append(cases, append(append([]string{"shoal"}, strings.Fields(s.name)...), "-"))
	}
	got := completeIn(t, bashCompletion(specs), cases)
	top := strings.Fields(got[0])
	for _, name := range append(commandNames(), "help", "--version") {
		if !slices.Contains(top, name) {
			t.Errorf("shoal <TAB> does not offer %s: %v", name, top)
		}
	}
	for i, s := range all {
		if got[i+1] != want[i] {
			t.Errorf("shoal %s -<TAB>: got %q, want %q", s.name, got[i+1], want[i])
		}
	}
	// What the registry holds now, not only what the specs say.
	for cmd, flags := range map[string][]string{"jobs": {"--state", "--owner", "--since", "--limit", "--before", "--json"}, "run": {"--ckpt-interval", "-n"}, "testbed up": {"--nodes", "--instance"}} {
		for i, s := range all {
			if s.name == cmd {
				for _, f := range flags {
					if !slices.Contains(strings.Fields(got[i+1]), f) {
						t.Errorf("shoal %s -<TAB> does not offer %s: %s", cmd, f, got[i+1])
					}
				}
			}
		}
	}
}

// TestZshCompletion: zsh accepts the script, and it names every command and
// every flag.
func TestZshCompletion(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh not installed")
	}
	specs := commandSpecs()
	script := zshCompletion(specs)
	path := filepath.Join(t.TempDir(), "_shoal")
	os.WriteFile(path, []byte(script), 0o644)
	if out, err := exec.Command(zsh, "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	for _, name := range commandNames() {
		if !strings.Contains(script, "\n    '"+name+":") {
			t.Errorf("the zsh script does not name command %s", name)
		}
	}
	for _, s := range specs {
		for _, f := range s.flags {
			if !strings.Contains(script, " "+f.name) && !strings.Contains(script, "'"+f.name) {
				t.Errorf("the zsh script does not name flag %s of %s", f.name, s.name)
			}
		}
	}
}

func TestCompletionCmd(t *testing.T) {
	t.Setenv("SHOAL_DATA_DIR", t.TempDir())
	t.Setenv("SHOAL_AGENT", "")
	for _, tt := range []struct {
		args   []string
		code   int
		stdout string // a prefix
		stderr string
	}{
		{[]string{"completion", "bash"}, exitOK, "# bash completion for shoal", ""},
		{[]string{"completion", "zsh"}, exitOK, "#compdef shoal", ""},
		{[]string{"completion", "fish"}, exitUsage, "", "shoal completion: unknown shell \"fish\": want bash or zsh (see 'shoal completion --help')\n"},
		{[]string{"completion", "bash", "zsh"}, exitUsage, "", "shoal completion: want one of bash, zsh, got [\"bash\" \"zsh\"] (see 'shoal completion --help')\n"},
		{[]string{"completion", "job-ids"}, exitFailure, "", ""}, // no agent: silence
	} {
		code, stdout, stderr := runOut(tt.args...)
		if code != tt.code || !strings.HasPrefix(stdout, tt.stdout) || (tt.stdout == "" && stdout != "") || stderr != tt.stderr {
			t.Errorf("shoal %s: exit %d, stdout %.40q, stderr %q; want %d, %q…, %q", strings.Join(tt.args, " "), code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
		}
	}
}
