package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/test/testenv"
)

func TestRunArgumentErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, exitUsage, ""},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"run", "-n", "0", "/bin/true"}, exitUsage, "-n 0: need at least 1 rank"},
		{[]string{"run", "/bin/true"}, exitUsage, "shoal run: -n N is required: the job's number of ranks (or --min-ranks/--max-ranks for an elastic job)"},
		{[]string{"run", "-n", "65537", "/bin/true"}, exitUsage, "-n 65537: at most 65536 ranks"},
		{[]string{"run", "-n", "1048576", "/bin/true"}, exitUsage, "-n 1048576: at most 65536 ranks"},
		{[]string{"run", "-n", "2", "--max-oversubscribe", "65", "/bin/true"}, exitUsage, "--max-oversubscribe 65: want more than 0 and at most 64 ranks per core"},
		{[]string{"run", "-n", "2", "--max-oversubscribe", "NaN", "/bin/true"}, exitUsage, "--max-oversubscribe NaN: want more than 0"},
		{[]string{"run", "-n", "2", "--max-oversubscribe", "0", "/bin/true"}, exitUsage, "--max-oversubscribe 0: want more than 0"},
		{[]string{"run", "-n", "2", "--ranks-per-node", "-1", "/bin/true"}, exitUsage, "--ranks-per-node -1: want 0 (no bound) to 65536"},
		{[]string{"run", "--local", "-n", "2", "--ranks-per-node", "1", "/bin/true"}, exitUsage, "--ranks-per-node needs an agent"},
		{[]string{"run", "--local", "-n", "2", "--durable", dir, "/bin/true"}, exitUsage, "--durable needs an agent"},
		{[]string{"run", "--detach", "-n", "2", "--durable", dir, "/bin/true"}, exitUsage, "shoal run: --detach and --durable DIR: only the attached shoal run copies the job's epochs to a directory"},
		// A detached job's coordinator keeps its epochs in an object store: the
		// pair passes, and the run goes on to look for its program.
		{[]string{"run", "--detach", "-n", "2", "--durable", "s3://bucket/jobs", "no-such-program-anywhere"}, exitUsage, `program "no-such-program-anywhere" not found`},
		{[]string{"run", "--local", "-n", "2", "--user", "nobody", "/bin/true"}, exitUsage, "--user needs an agent"},
		{[]string{"run", "-n", "2", "--durable", dir, "--durable-rate", "20M", "/bin/true"}, exitUsage, "shoal run: --durable-rate: only with --durable s3://BUCKET/PREFIX"},
		{[]string{"run", "-n", "2", "--durable", "s3://bucket/jobs", "--durable-rate", "fast", "/bin/true"}, exitUsage, `invalid value "fast" for flag -durable-rate: want a size a second, such as 20M`},
		{[]string{"run", "-n", "2", "--durable", "s3://Bad_Bucket/jobs", "/bin/true"}, exitUsage, `shoal run: --durable: durable: "s3://Bad_Bucket/jobs": bad bucket name`},
		{[]string{"run", "-n", "2", "--durable", "s3:///jobs", "/bin/true"}, exitUsage, "no bucket"},
		{[]string{"run", "-n", "2", "--durable", "gs://bucket/jobs", "/bin/true"}, exitUsage, "neither an absolute directory nor s3://"},
		{[]string{"run", "-n", "2", "--durable", dir, "--durable-endpoint", "http://127.0.0.1:8333", "/bin/true"}, exitUsage, "--durable-endpoint: only with --durable s3://BUCKET/PREFIX"},
		{[]string{"run", "-n", "2", "--user", "root", "/bin/true"}, exitUsage, "--user root: a job without --user runs as the agents' user, root, already"},
		{[]string{"run", "-n", "2", "--user", "no-such-user-anywhere", "/bin/true"}, exitUsage, "--user no-such-user-anywhere: no such user on this node"},
		{[]string{"run", "-n", "2"}, exitUsage, "no program given"},
		{[]string{"run", "--bogus", "-n", "2", "/bin/true"}, exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"run", "-n", "2", "--ckpt-interval", "soon", "/bin/true"}, exitUsage, `invalid value "soon" for flag -ckpt-interval: want auto, seconds (30, 0.5) or a duration`},
		{[]string{"run", "-n", "2", "--ckpt-interval", "-5", "/bin/true"}, exitUsage, "--ckpt-interval -5s: must not be negative"},
		{[]string{"run", "-n", "2", "--ckpt-interval", "-1s", "/bin/true"}, exitUsage, "--ckpt-interval -1s: must not be negative"},
		{[]string{"run", "-n", "2", "--mtbf", "-1m", "/bin/true"}, exitUsage, "--mtbf -1m0s: must be positive"},
		{[]string{"run", "-n", "2", "--mtbf", "0", "/bin/true"}, exitUsage, "--mtbf 0s: must be positive"},
		{[]string{"run", "-n", "2", "--mtbf", "0s", "/bin/true"}, exitUsage, "--mtbf 0s: must be positive"},
		{[]string{"run", "-n", "2", "--mtbf", "often", "/bin/true"}, exitUsage, `invalid value "often" for flag -mtbf: want seconds (3600, 0.5) or a duration`},
		{[]string{"run", "-n", "2", "--mtbf", "10m", "--ckpt-interval", "30s", "/bin/true"}, exitUsage, "--mtbf 10m0s: only sets --ckpt-interval auto, not 30s"},
		{[]string{"run", "-n", "2", "--max-restarts", "-1", "/bin/true"}, exitUsage, "--max-restarts -1"},
		{[]string{"run", "-n", "2", filepath.Join(dir, "missing")}, exitUsage, "does not exist"},
		{[]string{"run", "-n", "2", "no-such-program-anywhere"}, exitUsage, `program "no-such-program-anywhere" not found`},
		{[]string{"run", "-n", "2", notExec}, exitUsage, "is not executable"},
		{[]string{"run", "-n", "2", "--job-id", "bad/id", "/bin/true"}, exitUsage, `job id "bad/id"`},
		{[]string{"run", "-n", "0", "/bin/true"}, exitUsage, "(or --min-ranks/--max-ranks for an elastic job)"},
		{[]string{"run", "--min-ranks", "8", "--max-ranks", "4", "/bin/true"}, exitUsage, "min_ranks 8 above max_ranks 4"},
		{[]string{"run", "--min-ranks", "-1", "/bin/true"}, exitUsage, "min_ranks -1, max_ranks 0: want 1 to 65536"},
		{[]string{"run", "-n", "3", "--min-ranks", "2", "--rank-multiple", "2", "/bin/true"}, exitUsage, "ranks 3: not a count the job allows (2 to 65536 ranks, a multiple of 2)"},
		{[]string{"run", "--min-ranks", "5", "--max-ranks", "7", "--ranks-pow2", "/bin/true"}, exitUsage, "no rank count satisfies 5 to 7 ranks, a power of two"},
		{[]string{"run", "-n", "2", "--rank-multiple", "2", "/bin/true"}, exitUsage, "--rank-multiple and --ranks-pow2 constrain an elastic job's count: give --min-ranks or --max-ranks too"},
		{[]string{"wait"}, exitUsage, "shoal wait: want JOB, the id of a job (see 'shoal wait --help')"},
		{[]string{"wait", "a", "b"}, exitUsage, "shoal wait: want one JOB, got 2 arguments"},
		{[]string{"wait", "--follow", "a"}, exitUsage, "shoal wait: flag provided but not defined: -follow"},
		{[]string{"logs"}, exitUsage, "shoal logs: want JOB, the id of a job"},
		{[]string{"jobs", "a", "b"}, exitUsage, "shoal jobs: want one JOB, got 2 arguments"},
		{[]string{"gc", "a"}, exitUsage, `shoal gc: takes no arguments, got ["a"]`},
		{[]string{"logs", "--bogus", "a"}, exitUsage, "shoal logs: flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code {
			t.Errorf("shoal %q: exit %d, want %d (stderr %q)", tt.args, code, tt.code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("shoal %q: stderr %q, want it to contain %q", tt.args, stderr.String(), tt.want)
		}
		if tt.want != "" && strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("shoal %q: error is not one line: %q", tt.args, stderr.String())
		}
	}
}

// A program built with MPICH launched by Open MPI would run as single-rank
// worlds: shoal run refuses it before any launch, naming both.
func TestRunRefusesTheOtherMPI(t *testing.T) {
	heat := testenv.Built(t, "build/mpich/examples/heat")
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "--local", "-n", "2", "--engine", "openmpi", "--", heat, "--steps", "10"}, &stdout, &stderr)
	want := "shoal run: MPI mismatch: heat is built with MPICH (libmpich.so.12), and --engine openmpi launches Open MPI, whose ranks would not join its world: run it with --engine mpich\n"
	if code != exitUsage || stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("shoal run of MPICH's heat under Open MPI: exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout.String(), stderr.String(), exitUsage, want)
	}
}

// An elastic job grows onto joining nodes unless --auto-rebalance says
// otherwise; a fixed one does not.
func TestElasticAutoRebalance(t *testing.T) {
	for _, c := range []struct {
		args []string
		want float64
	}{
		{[]string{"-n", "2"}, 0},
		{[]string{"--max-ranks", "8"}, 1},
		{[]string{"--max-ranks", "8", "--auto-rebalance", "0"}, 0},
		{[]string{"--min-ranks", "2", "--auto-rebalance", "3"}, 3},
	} {
		var stdout, stderr bytes.Buffer
		f, _, code := parseRunFlags(append(c.args, "/bin/true"), &stdout, &stderr)
		if code != -1 || f.autoRebalance != c.want {
			t.Errorf("%q: exit %d, --auto-rebalance %g, want %g (%s)", c.args, code, f.autoRebalance, c.want, stderr.String())
		}
	}
}

// --ckpt-interval is automatic unless seconds or a duration are given, as
// SHOAL_CKPT_INTERVAL takes them; 0 turns interval checkpoints off.
func TestIntervalFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want intervalFlag
	}{
		{nil, intervalFlag{auto: true}},
		{[]string{"--ckpt-interval", "auto"}, intervalFlag{auto: true}},
		{[]string{"--ckpt-interval", "30s"}, intervalFlag{d: 30 * time.Second}},
		{[]string{"--ckpt-interval", "0"}, intervalFlag{}},
		{[]string{"--ckpt-interval", "0.5"}, intervalFlag{d: 500 * time.Millisecond}},
		{[]string{"--ckpt-interval", "30"}, intervalFlag{d: 30 * time.Second}},
		{[]string{"--ckpt-interval", "2s", "--ckpt-interval", "auto"}, intervalFlag{auto: true}},
	} {
		var stdout, stderr bytes.Buffer
		f, _, code := parseRunFlags(append(append([]string{"-n", "2"}, c.args...), "/bin/true"), &stdout, &stderr)
		if code != -1 || f.ckptInterval != c.want { // -1: parsed, go on
			t.Errorf("%q: exit %d, interval %+v, want %+v (%s)", c.args, code, f.ckptInterval, c.want, stderr.String())
		}
	}
}

func TestHelpIsTrue(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("shoal --help: exit %d", code)
	}
	for name, c := range commands {
		if c.hidden {
			if strings.Contains(stdout.String(), " "+name+" ") {
				t.Errorf("shoal --help lists hidden command %q", name)
			}
			continue
		}
		if !strings.Contains(stdout.String(), "  "+name+" ") {
			t.Errorf("shoal --help does not list %q", name)
		}
	}
	stdout.Reset()
	if code := run([]string{"run", "--help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("shoal run --help: exit %d", code)
	}
	for _, flag := range []string{"-n ", "-ckpt-interval", "-mtbf", "-max-restarts", "-job-id", "-quiet", "-detach", "Exit codes"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("shoal run --help does not mention %q", flag)
		}
	}
	for cmd, words := range map[string][]string{
		"wait":   {"-data-dir", "-agent", "-secret-file", "re-attaches", "Exit codes", "3    ranks kept dying", "4    the agent knows no job", "130  the job was cancelled"},
		"logs":   {"-follow", "-data-dir", "-agent", "[rank] ", "stderr", "re-attaches", "Exit codes", "4 the agent knows no job"},
		"events": {"-follow", "-json", "Exit codes", "4 the agent knows no job"},
	} {
		stdout.Reset()
		if code := run([]string{cmd, "--help"}, &stdout, &stderr); code != exitOK {
			t.Fatalf("shoal %s --help: exit %d", cmd, code)
		}
		for _, w := range words {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("shoal %s --help does not mention %q", cmd, w)
			}
		}
	}
	stdout.Reset()
	run([]string{"--help"}, &stdout, &stderr)
	for _, w := range []string{"3 restarts exhausted", "4 no such job (jobs, wait, logs, events, cancel, rebalance)", "5 the job has\nended already (cancel, rebalance)", "130 cancelled", "2 usage error"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("shoal --help does not mention exit code %q", w)
		}
	}
}

func TestInterpreterScript(t *testing.T) {
	for prog, want := range map[string]bool{
		"/usr/bin/python3": true, "/v/bin/python": true, "/usr/bin/python3.11": true,
		"/x/heat": false, "/usr/bin/python3-config": false, "/x/pythonic": false,
	} {
		if got := interpreter(prog); got != want {
			t.Errorf("interpreter(%s) = %v, want %v", prog, got, want)
		}
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "heat.py")
	os.WriteFile(script, []byte("print(1)\n"), 0o644)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{script, "--size", "8"}, 0},
		{[]string{"-u", script}, 1},
		{[]string{"-X", "dev", "-W", "error", script}, 4}, // -X and -W take a value
		{[]string{"-c", "print(1)"}, -1},
		{[]string{"-m", "heat"}, -1},
		{[]string{filepath.Join(dir, "missing.py")}, -1},
		{[]string{dir}, -1},
		{nil, -1},
	} {
		if got := scriptArg(c.args); got != c.want {
			t.Errorf("scriptArg(%q) = %d, want %d", c.args, got, c.want)
		}
	}
}
