package jobservice

import (
	"strings"
	"testing"

	"shoal/internal/job"
)

// A job whose MPI the coordinating node lacks is refused at submission, naming the
// launcher and its packages; a task farm needs none.
func TestLaunchable(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, c := range []struct {
		spec job.Spec
		want string
	}{
		{job.Spec{}, "mpirun.openmpi not found (install Open MPI"},
		{job.Spec{Engine: "mpich"}, "mpiexec.mpich not found (install MPICH"},
		{job.Spec{Farm: &job.FarmSpec{}}, ""},
	} {
		err := launchable(c.spec)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("launchable(engine %q, farm %v) = %v, want %q", c.spec.Engine, c.spec.Farm != nil, err, c.want)
		}
	}
}
