package bindings

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// The testbed the host-loss tests share: three hosts of 2 cores; each test kills
// one and adds another in its place.
var bed = &testenv.Shared{Config: testbed.Config{Nodes: 3, Cores: []int{2}, Instance: 226}}

func TestMain(m *testing.M) { os.Exit(bed.Main(m)) }

// launchLine is shoal run's launch line: "launching 4 ranks on 3 nodes (n1:0-1 n2:2 n3:3)".
var launchLine = regexp.MustCompile(`^shoal: launching 4 ranks on \d+ nodes \(([^)]*)\)`)

// On the testbed, a host that holds ranks is killed (every process on it) once the
// job has two complete epochs: the Fortran and Python heat under Open MPI, and the C and Fortran
// heat under MPICH (launched by Hydra through shoal rsh), go on from the newest epoch
// on the hosts left and finish with the C heat's uninterrupted checksum. (--no-replan:
// a move by traffic before the kill could take the ranks off the host killed.)
func TestHostLoss(t *testing.T) {
	cases := []struct {
		prog  program
		flags []string
	}{
		{fortranHeat, nil},
		{pythonHeat, nil}, // the venv's python runs in place; heat.py is staged
		{mpichHeat, []string{"--engine", "mpich"}},
		{mpichFortranHeat, []string{"--engine", "mpich"}},
	}
	for _, c := range cases {
		t.Run(c.prog.name, func(t *testing.T) {
			if len(c.flags) > 0 {
				if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
					t.Skip("MPICH not installed (make deps installs it)")
				}
			}
			want := cChecksum(t)
			argv := c.prog.argv(t)
			b := bed.Up(t)
			ctx := context.Background()
			args := append([]string{testenv.Built(t, "bin/shoal"), "run", "-n", "4", "--ckpt-interval", "500ms", "--max-oversubscribe", "2", "--no-replan"}, c.flags...)
			args = append(append(append(args, "--"), argv...), heatArgs...)
			cmd, err := b.Command(ctx, "n1", append(args, "--pace", heatPace)...)
			if err != nil {
				t.Fatal(err)
			}
			p := watch.Start(t, cmd)
			layout := p.WaitLine(launchLine.String(), time.Minute)[1]
			victim := lastHostBut(layout, "n1")
			if victim == "" {
				t.Fatalf("no host but n1 holds ranks: %s", layout)
			}
			p.WaitLine(`epoch 2 complete`, 2*time.Minute)
			if _, err := b.Kill(ctx, victim); err != nil {
				t.Fatal(err)
			}
			if code := p.Wait(3 * time.Minute); code != 0 {
				t.Fatalf("%s heat exited %d after %s was killed", c.prog.name, code, victim)
			}
			out := p.Output()
			if !regexp.MustCompile(`node ` + victim + ` lost .*; restarting 4 ranks from epoch`).MatchString(out) {
				t.Errorf("no restart after %s was lost", victim)
			}
			if got := watch.Field(out, "checksum"); got != want {
				t.Errorf("%s heat's checksum after losing %s = %q, want the C heat's uninterrupted %q", c.prog.name, victim, got, want)
			}
			// The next case finds three live hosts again.
			if _, err := b.Add(ctx, testbed.HostConfig{Cores: 2}); err != nil {
				t.Fatalf("add a host: %v", err)
			}
		})
	}
}

// lastHostBut returns the last host named in a launch layout ("n1:0-1 n2:2 n3:3")
// other than but.
func lastHostBut(layout, but string) string {
	last := ""
	for _, part := range strings.Fields(layout) {
		if host, _, _ := strings.Cut(part, ":"); host != but {
			last = host
		}
	}
	return last
}

// Submitted to an agent, a program not linked with libshoal gets the same warning as
// on one machine, and a libshoal program does not.
func TestUnmodifiedProgramWarnedOnCluster(t *testing.T) {
	b := bed.Up(t)
	for _, tt := range []struct {
		rel  string
		warn bool
	}{{"build/examples/heat-plain", true}, {"build/examples/heat", false}} {
		cmd, err := b.Command(context.Background(), "n1", testenv.Built(t, "bin/shoal"), "run", "-n", "2", "--",
			testenv.Built(t, tt.rel), "--size", "50", "--steps", "10")
		if err != nil {
			t.Fatal(err)
		}
		p := watch.Start(t, cmd)
		if code := p.Wait(time.Minute); code != 0 {
			t.Fatalf("%s exited %d", tt.rel, code)
		}
		warned := strings.Contains(p.Output(), "shoal: heat-plain does not use libshoal (no shoal_init in it): it writes no checkpoints, so a lost rank restarts it from the beginning")
		if warned != tt.warn {
			t.Errorf("%s on the cluster: warned %v, want %v", tt.rel, warned, tt.warn)
		}
	}
}
