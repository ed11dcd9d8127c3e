package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"shoal/internal/api"
	"shoal/internal/job"
)

// script writes an executable shell script for ranks to run and returns its path.
func script(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterAgent starts an agent for jobs run through this test binary (TestMain)
// and points the commands at it.
func clusterAgent(t *testing.T) *cliAgent {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it)")
	}
	a := startCLIAgent(t, "cli1", "--init")
	t.Setenv("SHOAL_DATA_DIR", a.dir)
	return a
}

// runOut runs shoal with args and returns its exit code, stdout and stderr.
func runOut(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// detach submits a job with shoal run --detach and returns its id, the last line.
func detach(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runOut(append([]string{"run", "--detach"}, args...)...)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	id := lines[len(lines)-1]
	if code != exitOK || !regexp.MustCompile(`^[A-Za-z0-9._-]+$`).MatchString(id) {
		t.Fatalf("shoal run --detach %s: exit %d, last line %q; want 0 and the job id\nstderr: %s", strings.Join(args, " "), code, id, stderr)
	}
	return id
}

// sortedLines is s's lines in order: ranks' lines interleave as they please.
func sortedLines(s string) []string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(l)
	return l
}

var talk = `echo "out $OMPI_COMM_WORLD_RANK"
echo "err $OMPI_COMM_WORLD_RANK" >&2
sleep ${PAUSE:-0}
echo "late $OMPI_COMM_WORLD_RANK"
exit ${CODE:-0}
`

func TestDetachWaitLogs(t *testing.T) {
	clusterAgent(t)
	prog := script(t, "talk", talk)

	t.Run("succeeded", func(t *testing.T) {
		code, stdout, _ := runOut("run", "--detach", "-n", "2", "--job-id", "talk-ok", "--", prog)
		if want := "shoal: job talk-ok: 2 ranks of talk, coordinated by cli1\ntalk-ok\n"; code != exitOK || stdout != want {
			t.Fatalf("shoal run --detach: exit %d, stdout %q; want 0, %q", code, stdout, want)
		}
		if code, stdout, stderr := runOut("wait", "talk-ok"); code != exitOK || stdout != "" || stderr != "" {
			t.Errorf("shoal wait: exit %d, stdout %q, stderr %q; want 0 and nothing printed", code, stdout, stderr)
		}
		code, stdout, stderr := runOut("logs", "talk-ok")
		if code != exitOK || strings.Join(sortedLines(stdout), ",") != "[0] late 0,[0] out 0,[1] late 1,[1] out 1" ||
			strings.Join(sortedLines(stderr), ",") != "[0] err 0,[1] err 1" {
			t.Errorf("shoal logs: exit %d\nstdout %q\nstderr %q\nwant 0, each rank's out and late lines on stdout, err on stderr", code, stdout, stderr)
		}
		// A second cancel, or a rebalance, of the ended job says it has ended.
		for _, cmd := range []string{"cancel", "rebalance"} {
			want := "shoal " + cmd + ": job talk-ok has already ended: succeeded\n"
			if code, _, stderr := runOut(cmd, "talk-ok"); code != exitEnded || stderr != want {
				t.Errorf("shoal %s of an ended job: exit %d, stderr %q; want %d, %q", cmd, code, stderr, exitEnded, want)
			}
		}
		// The same lines as shoal run --quiet prints.
		_, runStdout, runStderr := runOut("run", "--quiet", "-n", "2", "--", prog)
		if strings.Join(sortedLines(runStdout), ",") != strings.Join(sortedLines(stdout), ",") ||
			strings.Join(sortedLines(runStderr), ",") != strings.Join(sortedLines(stderr), ",") {
			t.Errorf("shoal logs printed\n%q\n%q\nshoal run --quiet\n%q\n%q", stdout, stderr, runStdout, runStderr)
		}
	})

	t.Run("quiet", func(t *testing.T) {
		code, stdout, _ := runOut("run", "--detach", "--quiet", "-n", "1", "--", prog)
		if !regexp.MustCompile(`^talk-\w+\n$`).MatchString(stdout) {
			t.Errorf("shoal run --detach --quiet: exit %d, stdout %q; want the id alone", code, stdout)
		}
		runOut("wait", strings.TrimSpace(stdout))
	})

	t.Run("program fails", func(t *testing.T) {
		id := detach(t, "-n", "2", "--env", "CODE=7", "--", prog)
		code, stdout, stderr := runOut("wait", id)
		want := regexp.MustCompile(`^shoal wait: job ` + id + ` failed: rank \d exited with code 7; not restarting \(the program failed by itself\)\n$`)
		if code != 7 || stdout != "" || !want.MatchString(stderr) {
			t.Errorf("shoal wait: exit %d, stdout %q, stderr %q; want 7 and one line matching %s", code, stdout, stderr, want)
		}
	})

	t.Run("follow", func(t *testing.T) {
		id := detach(t, "-n", "2", "--env", "PAUSE=1", "--", prog)
		code, stdout, _ := runOut("logs", "--follow", id)
		if code != exitOK || strings.Join(sortedLines(stdout), ",") != "[0] late 0,[0] out 0,[1] late 1,[1] out 1" {
			t.Errorf("shoal logs --follow: exit %d, stdout %q; want 0 and every line, the late ones too", code, stdout)
		}
		var j job.Job
		_, out, _ := runOut("jobs", "--json")
		var l api.JobList
		json.Unmarshal([]byte(out), &l)
		for _, x := range l.Jobs {
			if x.ID == id {
				j = x
			}
		}
		if j.State != job.Succeeded {
			t.Errorf("after shoal logs --follow, job %s is %q, want it ended: succeeded", id, j.State)
		}
	})

	// The jobs above, listed by the agent a page at a time, newest first, with
	// their times; the filters are the agent's.
	t.Run("listed", func(t *testing.T) {
		_, out, _ := runOut("jobs", "--json")
		var all api.JobList
		if err := json.Unmarshal([]byte(out), &all); err != nil || len(all.Jobs) < 4 || all.Next != "" {
			t.Fatalf("shoal jobs --json: %v, %d jobs, next %q; want 4 or more and no next\n%s", err, len(all.Jobs), all.Next, out)
		}
		var want []string
		for i, j := range all.Jobs {
			want = append(want, j.ID)
			if i > 0 && j.Submitted.After(all.Jobs[i-1].Submitted) {
				t.Errorf("job %s submitted after %s, listed before it: want newest first", j.ID, all.Jobs[i-1].ID)
			}
			if j.Started.Before(j.Submitted) || j.Ended.Before(j.Started) {
				t.Errorf("job %s: submitted %v, started %v, ended %v: want them in that order, all set", j.ID, j.Submitted, j.Started, j.Ended)
			}
		}
		var got []string
		args := []string{"jobs", "--limit", "2"}
		for page := 0; page < len(want); page++ {
			code, out, stderr := runOut(args...)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if code != exitOK || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], " SUBMITTED  DURATION ") {
				t.Fatalf("shoal %s: exit %d, %s\n%s", strings.Join(args, " "), code, out, stderr)
			}
			more := false
			for _, l := range lines[1:] {
				if _, next, ok := strings.Cut(l, "; the next "); ok {
					_, next, _ = strings.Cut(next, ": shoal ")
					next, _, _ = strings.Cut(next, ";")
					args, more = strings.Fields(next), true
					continue
				}
				got = append(got, strings.Fields(l)[0])
			}
			if !more {
				break
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("shoal jobs --limit 2, page after page: %v; want %v", got, want)
		}
		// The ids the completion scripts offer.
		if code, out, stderr := runOut("completion", "job-ids"); code != exitOK || out != strings.Join(want, "\n")+"\n" || stderr != "" {
			t.Errorf("shoal completion job-ids: exit %d, stdout %q, stderr %q; want 0 and the ids, newest first: %v", code, out, stderr, want)
		}
		_, out, _ = runOut("jobs", "--json", "--state", "failed", "--since", "1h")
		var failed api.JobList
		json.Unmarshal([]byte(out), &failed)
		if len(failed.Jobs) != 1 || failed.Jobs[0].State != job.Failed {
			t.Errorf("shoal jobs --state failed --since 1h: %s; want the one failed job", out)
		}
		if code, _, stderr := runOut("jobs", want[0], "--state", "failed"); code != exitUsage || stderr != "shoal jobs: --state, --owner, --since, --limit, --all and --before select jobs to list: not with JOB (see 'shoal jobs --help')\n" {
			t.Errorf("shoal jobs JOB --state failed: exit %d, stderr %q; want %d and one line", code, stderr, exitUsage)
		}
	})

	t.Run("unknown job", func(t *testing.T) {
		for _, cmd := range []string{"wait", "logs", "rebalance", "cancel"} {
			code, _, stderr := runOut(cmd, "nosuch")
			if code != exitNoJob || !strings.HasPrefix(stderr, `shoal `+cmd+`: no job "nosuch" known to the agent at `) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("shoal %s nosuch: exit %d, stderr %q; want %d and one line naming the job", cmd, code, stderr, exitNoJob)
			}
		}
	})
}

// Ranks that keep dying of a signal use up --max-restarts: exit 3, as a job run on
// this machine alone gives, whether shoal run follows the job or shoal wait does.
func TestClusterRestartsExhausted(t *testing.T) {
	clusterAgent(t)
	die := script(t, "die", "kill -KILL $$\n")

	code, stdout, stderr := runOut("run", "-n", "2", "--max-restarts", "1", "--", die)
	want := regexp.MustCompile(`(?m)^shoal run: job die-\w+ failed: rank \d killed by signal 9; giving up after 1 restart \(--max-restarts\)$`)
	if code != exitRestarts || !want.MatchString(stderr) {
		t.Errorf("shoal run: exit %d, stderr %q; want %d and a line matching %s", code, stderr, exitRestarts, want)
	}
	if n := strings.Count(stdout, "restarting from the beginning"); n != 1 {
		t.Errorf("%d restarts in\n%s\nwant 1", n, stdout)
	}

	id := detach(t, "-n", "1", "--max-restarts", "0", "--", die)
	if code, _, stderr := runOut("wait", id); code != exitRestarts || !strings.Contains(stderr, "giving up after 0 restarts") {
		t.Errorf("shoal wait: exit %d, stderr %q; want %d, giving up after 0 restarts", code, stderr, exitRestarts)
	}
	_, out, _ := runOut("jobs", "--json")
	var l api.JobList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	for _, j := range l.Jobs {
		if !j.Exhausted || j.State != job.Failed {
			t.Errorf("job %s: state %s, exhausted %t; want failed, exhausted", j.ID, j.State, j.Exhausted)
		}
	}
}

func TestDetachNeedsAnAgent(t *testing.T) {
	t.Setenv("SHOAL_DATA_DIR", t.TempDir())
	t.Setenv("SHOAL_AGENT", "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--detach", "--local", "-n", "1", "/bin/true"}, "shoal run: --detach and --local: a detached job needs an agent to run it\n"},
		{[]string{"run", "--detach", "-n", "1", "/bin/true"}, "shoal run: --detach needs an agent, and none runs on this node (or --local was given)\n"},
		{[]string{"run", "--detach", "--wait-for-nodes", "1s", "-n", "1", "/bin/true"}, "shoal run: --detach and --wait-for-nodes need an agent, and none runs on this node (or --local was given)\n"},
	}
	for _, tt := range tests {
		if code, stdout, stderr := runOut(tt.args...); code != exitUsage || stderr != tt.want || stdout != "" {
			t.Errorf("shoal %s: exit %d, stdout %q, stderr %q; want %d, %q", strings.Join(tt.args, " "), code, stdout, stderr, exitUsage, tt.want)
		}
	}
}

// An agent's --engine is the MPI of the jobs submitted to it that name none; a job
// that names one keeps it. (The jobs' programs only need to start: the test reads
// the engine each job was given.)
func TestAgentDefaultEngine(t *testing.T) {
	if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
		t.Skip("MPICH not installed (make deps installs it)")
	}
	a := startCLIAgent(t, "cli1", "--init", "--engine", "mpich")
	t.Setenv("SHOAL_DATA_DIR", a.dir)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "mpich"},
		{[]string{"--engine", "openmpi"}, "openmpi"},
	} {
		id := detach(t, append(append([]string{"-n", "1"}, c.flags...), "--", "/bin/true")...)
		code, out, stderr := runOut("jobs", "--json", id)
		if code != exitOK {
			t.Fatalf("shoal jobs %s: exit %d: %s", id, code, stderr)
		}
		var job struct {
			Spec struct {
				Engine string `json:"engine"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(out), &job); err != nil {
			t.Fatalf("shoal jobs --json %s: %v\n%s", id, err, out)
		}
		if job.Spec.Engine != c.want {
			t.Errorf("run %v on an agent with --engine mpich: the job's engine is %q, want %q", c.flags, job.Spec.Engine, c.want)
		}
		runOut("wait", id)
	}
}
