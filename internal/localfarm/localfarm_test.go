package localfarm

import (
	"errors"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/localrun"
)

func TestAdmit(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	farmSpec := func(argv []string, tasks []string, rerun bool) job.Spec {
		return job.Spec{ID: "f", Argv: argv, Files: []job.File{{Name: argv[0], SHA256: "aa", Size: 1, Mode: 0o755}},
			Farm: &job.FarmSpec{Tasks: tasks, Retries: 3, Rerun: rerun}}
	}
	was := farmSpec([]string{"p", "{}"}, []string{"a", "b"}, false)
	ended := &localrun.Record{Job: "f", State: job.Failed, Ended: at.Add(-time.Minute), Farm: &was}
	killed := &localrun.Record{Job: "f", State: job.Running, Started: at.Add(-time.Hour), Farm: &was}
	runJob := &localrun.Record{Job: "f", State: job.Failed, Ended: at}
	for _, tt := range []struct {
		name      string
		old       *localrun.Record
		spec      job.Spec
		wantAgain bool
		wantErr   error
	}{
		{"a new id", nil, was, false, nil},
		{"the same farm, ended", ended, was, true, nil},
		{"the same farm, its shoal farm killed", killed, was, true, nil},
		{"a shoal run job's id", runJob, was, false, job.ErrTaken},
		{"another command line", ended, farmSpec([]string{"p", "-v", "{}"}, []string{"a", "b"}, false), false, job.ErrTaken},
		{"another command line, --rerun", ended, farmSpec([]string{"p", "-v", "{}"}, []string{"a", "b"}, true), true, nil},
		{"other tasks, --rerun", ended, farmSpec([]string{"p", "{}"}, []string{"a", "c"}, true), false, job.ErrTaken},
	} {
		again, err := Admit("f", tt.old, tt.spec, at)
		if again != tt.wantAgain || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("%s: Admit = %v, %v; want %v, %v", tt.name, again, err, tt.wantAgain, tt.wantErr)
		}
	}
}
