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

// The node a job is submitted to gives it its engine when it names none, and
// encrypts an MPI job's traffic when its agent runs with --mpi-encrypt; a job
// cannot turn that off, and a task farm, which runs no MPI, is left alone.
func TestDefaults(t *testing.T) {
	farm := &job.FarmSpec{}
	for _, c := range []struct {
		name        string
		cfg         Config
		spec        job.Spec
		wantEngine  string
		wantEncrypt bool
		wantByAgent bool
	}{
		{"nothing asked", Config{Engine: "openmpi"}, job.Spec{}, "openmpi", false, false},
		{"the job's engine", Config{Engine: "openmpi"}, job.Spec{Engine: "mpich"}, "mpich", false, false},
		{"the job asks", Config{}, job.Spec{MPIEncrypt: true}, "", true, false},
		{"the agent asks", Config{MPIEncrypt: true}, job.Spec{}, "", true, true},
		{"the agent asks, over the overlay", Config{MPIEncrypt: true}, job.Spec{MPIOverlay: true}, "", true, true},
		{"both ask", Config{MPIEncrypt: true}, job.Spec{MPIEncrypt: true}, "", true, false},
		{"a farm", Config{MPIEncrypt: true}, job.Spec{Farm: farm}, "", false, false},
	} {
		s := &Service{cfg: c.cfg}
		got, byAgent := s.defaults(c.spec)
		if got.Engine != c.wantEngine || got.MPIEncrypt != c.wantEncrypt || byAgent != c.wantByAgent {
			t.Errorf("%s: engine %q, mpi_encrypt %v, by the agent %v; want %q, %v, %v", c.name, got.Engine, got.MPIEncrypt, byAgent, c.wantEngine, c.wantEncrypt, c.wantByAgent)
		}
	}
}
