package profiles

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// androidHeatArgs make a heat run of about 3 s at 4 ranks, checkpointed every 500 ms.
var androidHeatArgs = []string{"--size", "100", "--steps", "600", "--pace", "5000"}

// referenceChecksum is the checksum of an uninterrupted heat run of args on this
// machine (one rank of heat-plain: heat's result does not depend on the count).
func referenceChecksum(t *testing.T, args []string) string {
	t.Helper()
	ref := watch.Spawn(t, nil, "mpirun.openmpi", append([]string{"--allow-run-as-root", "-n", "1",
		testenv.Built(t, "build/examples/heat-plain")}, args[:4]...)...)
	if code := ref.Wait(time.Minute); code != 0 {
		t.Fatalf("the reference run exited %d:\n%s", code, ref.Output())
	}
	return watch.Field(ref.Output(), "checksum")
}

// A 4-rank heat job runs on one android host (no agent: shoal run runs it there
// alone), checkpoints, and ends with the checksum of an uninterrupted run, with
// either MPI: Shoal launches Open MPI with its shmem framework on mmap, so mpirun,
// which would otherwise die of SIGSYS probing shmget, runs, and its ranks share
// memory through files; and it keeps MPICH's UCX from its SysV calls, which would
// kill every rank.
func TestAndroidHeat(t *testing.T) {
	b := bed.Up(t)
	ctx := context.Background()
	want := referenceChecksum(t, androidHeatArgs)
	h, err := b.Add(ctx, testbed.HostConfig{Cores: 2, Profile: testbed.Android.Name, NoAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Kill(ctx, h.Name) })

	tests := []struct{ engine, heat string }{
		{"openmpi", "build/examples/heat"},
		{"mpich", "build/mpich/examples/heat"},
	}
	for _, tt := range tests {
		cmd, err := b.Command(ctx, h.Name, append([]string{"env", "SHOAL_DATA_DIR=" + filepath.Join(t.TempDir(), "data"),
			testenv.Built(t, "bin/shoal"), "run", "-n", "4", "--engine", tt.engine, "--max-oversubscribe", "2", "--max-restarts", "0",
			"--ckpt-interval", "500ms", "--", testenv.Built(t, tt.heat)}, androidHeatArgs...)...)
		if err != nil {
			t.Fatal(err)
		}
		j := watch.Start(t, cmd)
		if code := j.Wait(2 * time.Minute); code != 0 {
			t.Errorf("%s: shoal run on %s exited %d:\n%s", tt.engine, h.Name, code, j.Output())
			continue
		}
		out := j.Output()
		if got := watch.Field(out, "checksum"); got != want {
			t.Errorf("%s: checksum %q, want the uninterrupted run's %q", tt.engine, got, want)
		}
		if !regexp.MustCompile(`shoal: epoch \d+ complete`).MatchString(out) {
			t.Errorf("%s: no epoch was complete:\n%s", tt.engine, out)
		}
	}
}
