package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecRankDiesWithLauncher: SIGKILL to the process that started the rank
// wrapper (orted or mpirun) ends the wrapper and its rank, with either wrapper.
func TestExecRankDiesWithLauncher(t *testing.T) {
	for name, wrapper := range rankWrappers(t) {
		t.Run(name, func(t *testing.T) { dieWithLauncher(t, wrapper) })
	}
}

func dieWithLauncher(t *testing.T, wrapper []string) {
	ranks := t.TempDir()
	var m [8]byte
	rand.Read(m[:])
	marker := hex.EncodeToString(m[:])
	// sh stands for the launcher; "& wait" keeps it from exec'ing the wrapper.
	launcher := exec.Command("/bin/sh", append([]string{"-c", `"$@" -- sleep 60 & wait`, "sh"}, wrapper...)...)
	launcher.Env = append(os.Environ(), "SHOAL_RANKS_DIR="+ranks, "OMPI_COMM_WORLD_RANK=0", "SHOAL_TEST_MARKER="+marker)
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	ours := func() []int { return pidsWithEnv("SHOAL_TEST_MARKER", func(v string) bool { return v == marker }) }
	defer func() {
		for _, pid := range ours() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(ranks, "r000000"))
		if strings.Contains(string(b), "state=running") && len(ours()) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rank did not start: state %q, processes %v", b, ours())
		}
		time.Sleep(20 * time.Millisecond)
	}
	launcher.Process.Kill()
	launcher.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for len(ours()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes still running after the launcher was killed: %v", ours())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExecRankStagesOnce: on a node, exec-rank places the job's staged file
// into the job's work directory and, at later launches, finds it there by its
// stamp in the job directory; an input the program changed is copied again.
func TestExecRankStagesOnce(t *testing.T) {
	bin := buildShoal(t)
	node, content, sum := stagedNode(t)
	jobDir := filepath.Join(node, "jobs", "j1")
	input := filepath.Join(jobDir, "work", "in.txt")
	stampFile := filepath.Join(jobDir, "staged", "in.txt")
	launch := func() {
		t.Helper()
		out, err := catStaged([]string{bin, "exec-rank"}, node, sum)
		if err != nil || string(out) != string(content) {
			t.Fatalf("exec-rank: %v, output %q, want the staged input", err, out)
		}
	}
	launch() // copies the input into place
	time.Sleep(50 * time.Millisecond)
	launch() // hashes it once and stamps it
	stamp, err := os.ReadFile(stampFile)
	if err != nil || !strings.HasPrefix(string(stamp), sum+" ") {
		t.Fatalf("stamp %s: %q, %v; want one beginning with the input's sha256", stampFile, stamp, err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(input, []byte("changed by the program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	launch() // the change is seen and undone
}

// buildShoalRank compiles cmd/shoal-rank into dir, where it looks for shoal.
func buildShoalRank(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "shoal-rank")
	out, err := exec.Command("cc", "-std=c11", "-O2", "-Wall", "-Werror", "-o", bin, "../shoal-rank/shoal-rank.c").CombinedOutput()
	if err != nil {
		t.Fatalf("cc shoal-rank.c: %v\n%s", err, out)
	}
	return bin
}

// rankWrappers are the two rank wrappers, by name: `shoal exec-rank` and
// shoal-rank next to that shoal.
func rankWrappers(t *testing.T) map[string][]string {
	bin := buildShoal(t)
	return map[string][]string{
		"exec-rank":  {bin, "exec-rank"},
		"shoal-rank": {buildShoalRank(t, filepath.Dir(bin))},
	}
}

// stopBy is how a rank wrapper under test is told to stop, if it is.
type stopBy int

const (
	wrapperOnly stopBy = iota + 1
	group
)

// TestRankWrappers: both wrappers keep docs/launcher-protocol.md's "Rank
// wrapper" the same way: the program's exit code, the rank's state, signals
// passed on, a program that cannot start, and SHOAL_STAGE_WAIT kept only for
// the ranks whose shards are staged.
func TestRankWrappers(t *testing.T) {
	for name, wrapper := range rankWrappers(t) {
		t.Run(name, func(t *testing.T) {
			// signal: 0 runs prog to its end; wrapperOnly sends SIGTERM to the wrapper
			// once the program runs; group to the wrapper's whole process group, as
			// Open MPI's daemon does.
			run := func(rank string, extraEnv []string, signal stopBy, prog ...string) (code int, state, stdout, stderr string) {
				t.Helper()
				ranks := t.TempDir()
				cmd := exec.Command(wrapper[0], append(append(wrapper[1:], "--"), prog...)...)
				cmd.Env = append(os.Environ(), "SHOAL_RANKS_DIR="+ranks, "OMPI_COMM_WORLD_RANK="+rank)
				cmd.Env = append(cmd.Env, extraEnv...)
				var out, errb strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &errb
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if signal != 0 { // once the program runs, the wrapper is told to stop
					deadline := time.Now().Add(10 * time.Second)
					for {
						b, _ := os.ReadFile(rankFile(ranks, rank))
						if strings.Contains(string(b), "state=running") {
							break
						}
						if time.Now().After(deadline) {
							t.Fatal("the program did not start")
						}
						time.Sleep(10 * time.Millisecond)
					}
					if signal == group {
						syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
					} else {
						cmd.Process.Signal(syscall.SIGTERM)
					}
				}
				cmd.Wait()
				b, _ := os.ReadFile(rankFile(ranks, rank))
				return cmd.ProcessState.ExitCode(), string(b), out.String(), errb.String()
			}
			want := func(what string, code, wantCode int, state string, wantState ...string) {
				t.Helper()
				if code != wantCode {
					t.Errorf("%s: exit code %d, want %d", what, code, wantCode)
				}
				for _, w := range wantState {
					if !strings.Contains(state, w) {
						t.Errorf("%s: rank state %q, want %q in it", what, state, w)
					}
				}
			}
			code, state, _, _ := run("2", nil, 0, "/bin/sh", "-c", "exit 3")
			want("exit 3", code, 3, state, "state=exited", "code=3")
			code, state, _, _ = run("0", nil, 0, "/bin/sh", "-c", "kill -9 $$")
			want("killed", code, 128+9, state, "state=signaled", "signal=9")
			code, state, _, _ = run("1", nil, wrapperOnly, "/bin/sleep", "30")
			want("told to stop", code, 128+15, state, "state=stopped", "signal=15")
			for range 5 { // the program may die before the wrapper sees its signal
				code, state, _, _ = run("1", nil, group, "/bin/sleep", "30")
				want("its process group told to stop", code, 128+15, state, "state=stopped", "signal=15")
			}
			code, state, _, stderr := run("0", nil, 0, "/nonexistent/program")
			want("missing program", code, 127, state, "pid=0 state=exited", "code=127")
			if !strings.Contains(stderr, "rank 0: cannot start /nonexistent/program") {
				t.Errorf("missing program: stderr %q, want it to say the rank cannot start it", stderr)
			}
			show := []string{"/bin/sh", "-c", `echo "wait=${SHOAL_STAGE_WAIT-unset} ranks=${SHOAL_STAGE_RANKS-unset}"`}
			staged := []string{"SHOAL_STAGE_WAIT=30s", "SHOAL_STAGE_RANKS=0-1,5"}
			for rank, line := range map[string]string{"5": "wait=30s ranks=unset", "1": "wait=30s ranks=unset", "3": "wait=unset ranks=unset"} {
				code, _, stdout, _ := run(rank, staged, 0, show...)
				if code != 0 || strings.TrimSpace(stdout) != line {
					t.Errorf("rank %s, shards of 0-1,5 staged: exit %d, the program saw %q, want %q", rank, code, stdout, line)
				}
			}
			code, _, stdout, _ := run("1", []string{"SHOAL_STAGE_WAIT=30s", "SHOAL_STAGE_RANKS=1-x"}, 0, show...)
			if code != 0 || strings.TrimSpace(stdout) != "wait=unset ranks=unset" {
				t.Errorf("a malformed rank list: the program saw %q, want SHOAL_STAGE_WAIT removed", stdout)
			}
		})
	}
}

// TestShoalRankTrustsOnlyStamps: shoal-rank copies a missing job file itself and
// takes one in place only on a stamp that describes it; anything else goes to
// `shoal exec-rank`. Here no shoal is next to it, so going there fails, which
// shows which launches did.
func TestShoalRankTrustsOnlyStamps(t *testing.T) {
	bin := buildShoal(t)
	crank := buildShoalRank(t, t.TempDir())
	node, content, sum := stagedNode(t)
	input := filepath.Join(node, "jobs", "j1", "work", "in.txt")
	launch := func(wrapper []string, wantOK bool, what string) {
		t.Helper()
		out, err := catStaged(wrapper, node, sum)
		ok := err == nil && string(out) == string(content)
		if ok != wantOK {
			t.Fatalf("%s: %v, output %q; want success %v", what, err, out, wantOK)
		}
		if !wantOK && !strings.Contains(string(out), "shoal-rank: cannot run") {
			t.Fatalf("%s: output %q, want it handed to shoal exec-rank (absent here)", what, out)
		}
	}
	launch([]string{crank}, true, "a missing file: copied by shoal-rank")
	launch([]string{crank}, false, "a file in place with no stamp")
	time.Sleep(50 * time.Millisecond)
	launch([]string{bin, "exec-rank"}, true, "shoal exec-rank hashes and stamps it")
	launch([]string{crank}, true, "stamped: taken by shoal-rank")
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(input, []byte("changed by the program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	launch([]string{crank}, false, "changed since it was stamped")
}

// rankFile is the state file of rank (a number) in ranks.
func rankFile(ranks, rank string) string {
	n, _ := strconv.Atoi(rank)
	return filepath.Join(ranks, fmt.Sprintf("r%06d", n))
}

// stagedNode is a node's data dir whose cache holds one job file, content,
// whose sha256 is sum.
func stagedNode(t *testing.T) (node string, content []byte, sum string) {
	t.Helper()
	node = t.TempDir()
	content = []byte("input of the job\n")
	h := sha256.Sum256(content)
	sum = hex.EncodeToString(h[:])
	if err := os.MkdirAll(filepath.Join(node, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(node, "files", sum), content, 0o644); err != nil {
		t.Fatal(err)
	}
	return node, content, sum
}

// catStaged runs rank 0 of job j1 on node through wrapper, with the cached file
// sum staged as in.txt and /bin/cat printing it.
func catStaged(wrapper []string, node, sum string) ([]byte, error) {
	args := append(slices.Clone(wrapper[1:]), "--stage", "in.txt="+sum+":644", "--", "/bin/cat", "in.txt")
	cmd := exec.Command(wrapper[0], args...)
	cmd.Env = append(os.Environ(), "SHOAL_NODE_DATA="+node, "SHOAL_JOB=j1", "OMPI_COMM_WORLD_RANK=0")
	return cmd.CombinedOutput()
}

// TestRankWrappersRestoreOpenFiles: the launcher runs with a lower soft limit
// on open files than its agent; both wrappers set a rank's to SHOAL_NOFILE
// (never above the hard limit) and remove the variable.
func TestRankWrappersRestoreOpenFiles(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < 300 {
		t.Skipf("the hard limit on open files is %d", lim.Max)
	}
	hard := strconv.FormatUint(lim.Max, 10)
	for name, wrapper := range rankWrappers(t) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range []struct{ env, want string }{
				{"SHOAL_NOFILE=250", "250 unset"},
				{"SHOAL_NOFILE=" + strconv.FormatUint(lim.Max+1000, 10), hard + " unset"}, // at most the hard limit
				{"SHOAL_NOFILE=0", "100 unset"},                                           // nonsense: left alone
				{"SHOAL_NOFILE=lots", "100 unset"},                                        // not a number: left alone
				{"SHOAL_OTHER=1", "100 unset"},
			} {
				// The launcher's lower limit: 100, set by the shell the wrapper replaces.
				script := `ulimit -Sn 100 && exec "$@"`
				args := append(append([]string{"-c", script, "sh"}, wrapper...), "--", "/bin/sh", "-c", `echo "$(ulimit -Sn) ${SHOAL_NOFILE-unset}"`)
				cmd := exec.Command("/bin/sh", args...)
				cmd.Env = append(os.Environ(), "SHOAL_RANKS_DIR="+t.TempDir(), "OMPI_COMM_WORLD_RANK=0", tt.env)
				out, err := cmd.Output()
				if err != nil || strings.TrimSpace(string(out)) != tt.want {
					t.Errorf("%s: %v, the rank saw %q, want %q", tt.env, err, out, tt.want)
				}
			}
		})
	}
}
