// Package bindings runs the Fortran and Python programs built over libshoal the way
// users run them (shoal run, plain mpirun, real signals) and holds them to the C
// program: the same checksum after a killed rank, shards alike, read by the Python
// shard reader. install_test.go builds and runs programs against an installed Shoal.
package bindings

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/test/testenv"
	"shoal/test/watch"
)

func requireOpenMPI(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mpirun.openmpi"); err != nil {
		t.Skip("Open MPI not installed (make deps installs it)")
	}
}

// heatArgs is the job every language runs: under a second of work on 4 ranks (C); the runs
// that are interrupted add a floor of 2.5 ms per step so that they last at least 5 s. (At
// 1 ms, 2 s, MPICH's ranks, polling on 2 cores for 4 ranks, sometimes ran in 3.4 s with their
// first checkpoint at 60 %: the job ended before its second epoch, which the test waits
// for to kill a rank.)
var heatArgs = []string{"--size", "400", "--steps", "2000"}

const heatPace = "2500"

// program is one language's heat as shoal run starts it.
type program struct {
	name string
	argv func(t *testing.T) []string
}

var (
	cHeat       = program{"C", func(t *testing.T) []string { return []string{testenv.Built(t, "build/examples/heat")} }}
	fortranHeat = program{"Fortran", func(t *testing.T) []string { return []string{testenv.Built(t, "build/examples/fortran/heat")} }}
	pythonHeat  = program{"Python", func(t *testing.T) []string {
		return []string{testenv.Built(t, "build/venv/bin/python"), testenv.Built(t, "examples/python/heat.py")}
	}}
)

// The C heat's uninterrupted checksum, computed once for all the tests that compare
// with it.
var (
	referenceOnce sync.Once
	reference     string
	referenceErr  string
)

func cChecksum(t *testing.T) string {
	t.Helper()
	requireOpenMPI(t)
	argv := cHeat.argv(t)
	referenceOnce.Do(func() {
		p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, testenv.Built(t, "bin/shoal"),
			append(append([]string{"run", "-n", "4", "--ckpt-interval", "0", "--"}, argv...), heatArgs...)...)
		if code := p.Wait(3 * time.Minute); code != 0 {
			referenceErr = fmt.Sprintf("the C heat's reference run exited %d:\n%s", code, p.Output())
			return
		}
		if reference = watch.Field(p.Output(), "checksum"); reference == "" {
			referenceErr = "the C heat's reference run printed no checksum:\n" + p.Output()
		}
	})
	if referenceErr != "" {
		t.Fatal(referenceErr)
	}
	return reference
}

// killRank2AfterEpoch2 runs prog on 4 ranks under shoal run with a checkpoint every
// 500 ms, SIGKILLs rank 2 once epoch 2 is complete, and returns the finished job's
// output.
func killRank2AfterEpoch2(t *testing.T, prog program, flags ...string) string {
	t.Helper()
	shoal := testenv.Built(t, "bin/shoal")
	data := t.TempDir()
	args := append(append([]string{"run", "-n", "4", "--ckpt-interval", "500ms"}, flags...), "--")
	args = append(args, prog.argv(t)...)
	args = append(append(args, heatArgs...), "--pace", heatPace)
	p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + data}, shoal, args...)
	job := p.WaitLine(`^shoal: job ([^:]+):`, 30*time.Second)[1]
	p.WaitLine(`epoch 2 complete`, 2*time.Minute)
	syscall.Kill(testenv.RankPID(t, data, job, 2), syscall.SIGKILL)
	if code := p.Wait(3 * time.Minute); code != 0 {
		t.Fatalf("%s heat exited %d after the kill", prog.name, code)
	}
	return p.Output()
}

func TestHeatSurvivesKilledRank(t *testing.T) {
	for _, prog := range []program{fortranHeat, pythonHeat} {
		t.Run(prog.name, func(t *testing.T) {
			want := cChecksum(t)
			out := killRank2AfterEpoch2(t, prog)
			if !strings.Contains(out, "shoal: rank 2 killed by signal 9; restarting from epoch") {
				t.Errorf("no restart line naming rank 2 and signal 9")
			}
			if !regexp.MustCompile(`(?m)heat: resumed at step [1-9]`).MatchString(out) {
				t.Errorf("the relaunched run did not resume mid-run (no 'heat: resumed at step N>0')")
			}
			if got := watch.Field(out, "checksum"); got != want {
				t.Errorf("%s heat's checksum after the kill = %q, want the C heat's uninterrupted %q", prog.name, got, want)
			}
		})
	}
}

var (
	mpichHeat        = program{"MPICH C", func(t *testing.T) []string { return []string{testenv.Built(t, "build/mpich/examples/heat")} }}
	mpichFortranHeat = program{"MPICH Fortran", func(t *testing.T) []string { return []string{testenv.Built(t, "build/mpich/examples/fortran/heat")} }}
)

// Under MPICH (shoal run --engine mpich, the programs built in build/mpich), a killed
// rank costs the same as under Open MPI: a restart from the newest epoch, and the
// uninterrupted result.
func TestMPICHHeatSurvivesKilledRank(t *testing.T) {
	if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
		t.Skip("MPICH not installed (make deps installs it)")
	}
	for _, prog := range []program{mpichHeat, mpichFortranHeat} {
		t.Run(prog.name, func(t *testing.T) {
			want := cChecksum(t)
			out := killRank2AfterEpoch2(t, prog, "--engine", "mpich")
			if !strings.Contains(out, "shoal: rank 2 killed by signal 9; restarting from epoch") {
				t.Errorf("no restart line naming rank 2 and signal 9")
			}
			if got := watch.Field(out, "checksum"); got != want {
				t.Errorf("%s heat's checksum after the kill = %q, want the Open MPI C heat's uninterrupted %q", prog.name, got, want)
			}
		})
	}
}

// A program that does not use libshoal is told apart at launch: shoal run says a lost
// rank restarts it from the beginning, not where its checkpoints go.
func TestUnmodifiedProgramWarned(t *testing.T) {
	requireOpenMPI(t)
	for _, tt := range []struct {
		rel  string
		warn bool
	}{{"build/examples/heat-plain", true}, {"build/examples/heat", false}} {
		p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + t.TempDir()}, testenv.Built(t, "bin/shoal"),
			"run", "-n", "2", "--", testenv.Built(t, tt.rel), "--size", "50", "--steps", "10")
		if code := p.Wait(time.Minute); code != 0 {
			t.Fatalf("%s exited %d", tt.rel, code)
		}
		first := strings.SplitN(p.Output(), "\n", 2)[0]
		warned := strings.Contains(first, "heat-plain does not use libshoal (no shoal_init in it): it writes no checkpoints, so a lost rank restarts it from the beginning")
		if warned != tt.warn || strings.Contains(first, "checkpoints in") == tt.warn {
			t.Errorf("%s: launch line %q; want the no-libshoal warning: %v", tt.rel, first, tt.warn)
		}
	}
}

// shardLine matches what `python -m shoal FILE` prints for one shard.
var shardLine = regexp.MustCompile(`: job (\S+) epoch (\d+) rank (\d+)/(\d+) regions \[([^\]]*)\] checksum`)

// The three languages' heat write shards of the same layout (step and grid, ids 1 and
// 2, the same element sizes and counts), and the Python shard reader verifies them all.
func TestShardsAlikeAndReadByPython(t *testing.T) {
	requireOpenMPI(t)
	python := testenv.Built(t, "build/venv/bin/python")
	tables := map[string][]string{}
	for _, prog := range []program{cHeat, fortranHeat, pythonHeat} {
		dir := t.TempDir()
		args := append([]string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
			"-n", "2", "-x", "SHOAL_DIR=" + dir, "-x", "SHOAL_JOB=heat", "-x", "SHOAL_CKPT_INTERVAL=0.1"},
			prog.argv(t)...)
		args = append(args, "--size", "60", "--steps", "400", "--pace", "2000")
		p := watch.Spawn(t, nil, "mpirun.openmpi", args...)
		if code := p.Wait(2 * time.Minute); code != 0 {
			t.Fatalf("%s heat under mpirun exited %d", prog.name, code)
		}
		shards, _ := filepath.Glob(filepath.Join(dir, "heat", "e*", "r*.shard"))
		if len(shards) < 2 {
			t.Fatalf("%s heat left %d shards in %s, want at least one epoch of 2 ranks", prog.name, len(shards), dir)
		}
		sort.Strings(shards)
		cmd := exec.Command(python, append([]string{"-m", "shoal"}, shards...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("python -m shoal on %s's shards: %v\n%s", prog.name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(shards) {
			t.Fatalf("python -m shoal printed %d lines for %d shards:\n%s", len(lines), len(shards), out)
		}
		for i, line := range lines {
			m := shardLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%s: unexpected reader line %q", prog.name, line)
			}
			rank, _ := strconv.Atoi(m[3])
			if m[1] != "heat" || m[4] != "2" || !strings.HasSuffix(shards[i], fmt.Sprintf("r%06d.shard", rank)) {
				t.Errorf("%s: shard %s read as job %s rank %s/%s", prog.name, shards[i], m[1], m[3], m[4])
			}
			tables[prog.name] = append(tables[prog.name], fmt.Sprintf("rank %d: %s", rank, m[5]))
		}
		tables[prog.name] = tables[prog.name][len(tables[prog.name])-2:] // the newest epoch
	}
	// 60 rows over 2 ranks: each protects its 30 interior rows (its block of the global
	// grid, without the ghost rows), 62 points wide.
	want := []string{"rank 0: 1:1x4, 2:1860x8", "rank 1: 1:1x4, 2:1860x8"}
	for name, got := range tables {
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("%s heat's newest shards hold %q, want %q", name, got, want)
		}
	}
}
