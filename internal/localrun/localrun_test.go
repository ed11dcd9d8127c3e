package localrun

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
	"shoal/internal/retention"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func heat(args ...string) Identity {
	return Identity{Program: "/x/heat", Size: 4000, ModNs: 1e18, Args: args, Ranks: 4}
}

func TestDecide(t *testing.T) {
	ended := func(s job.State, id Identity) *Record {
		return &Record{Job: "j", Identity: id, State: s, Started: t0.Add(-time.Minute), Ended: t0.Add(-12 * time.Second)}
	}
	rebuilt := heat("--steps", "300")
	rebuilt.ModNs++
	elastic := heat("--steps", "300")
	elastic.Ranks, elastic.Range = 0, "2 to 8 ranks"
	tests := []struct {
		name  string
		old   *Record
		held  bool
		fresh bool
		now   Identity
		want  Action
		err   error
		words []string // in Why, or in the error
	}{
		{"first run", nil, false, false, heat(), Fresh, nil, nil},
		{"--fresh over a kept run", ended(job.Cancelled, heat("a")), true, true, heat("b"), Fresh, nil, nil},
		{"same run cancelled", ended(job.Cancelled, heat("--steps", "300")), true, false, heat("--steps", "300"), Resume, nil, []string{"an earlier run, cancelled 12 s ago"}},
		{"same run failed", ended(job.Failed, heat()), true, false, heat(), Resume, nil, []string{"failed 12 s ago"}},
		{"same run, nothing kept", ended(job.Cancelled, heat()), false, false, heat(), Resume, nil, nil},
		{"killed shoal run", &Record{Job: "j", Identity: heat(), State: job.Running, Started: t0.Add(-time.Minute)}, true, false, heat(), Resume, nil, []string{"interrupted (shoal run was killed) 60 s ago or later"}},
		{"other arguments", ended(job.Cancelled, heat("--steps", "300")), true, false, heat("--steps", "400"), Refuse, ErrOtherRun, []string{"arguments --steps 300 (now --steps 400)", "--fresh"}},
		{"no arguments now", ended(job.Cancelled, heat("--steps", "300")), true, false, heat(), Refuse, ErrOtherRun, []string{"arguments --steps 300 (now none)"}},
		{"other program", ended(job.Cancelled, heat()), true, false, Identity{Program: "/y/heat", Ranks: 4}, Refuse, ErrOtherRun, []string{"program /x/heat (now /y/heat)"}},
		{"rebuilt program", ended(job.Cancelled, heat("--steps", "300")), true, false, rebuilt, Refuse, ErrOtherRun, []string{"/x/heat as it was before it changed at"}},
		{"other rank count", ended(job.Cancelled, heat()), true, false, Identity{Program: "/x/heat", Size: 4000, ModNs: 1e18, Ranks: 2}, Refuse, ErrOtherRun, []string{"4 ranks (now 2 ranks)"}},
		{"fixed to elastic", ended(job.Cancelled, heat("--steps", "300")), true, false, elastic, Refuse, ErrOtherRun, []string{"4 ranks (now 2 to 8 ranks)"}},
		{"succeeded and kept", ended(job.Succeeded, heat()), true, false, heat(), Refuse, ErrSucceeded, []string{"succeeded 12 s ago", "--fresh"}},
		{"unrecorded checkpoints", nil, true, false, heat(), Refuse, ErrUnrecorded, []string{"no run shoal recorded", "--fresh"}},
		{"a farm's id, --fresh", &Record{Job: "j", State: job.Failed, Farm: &job.Spec{ID: "j"}}, false, true, heat(), Refuse, ErrOtherRun, []string{"job j is a task farm run on this machine (shoal farm)"}},
	}
	for _, tt := range tests {
		d := Decide("j", tt.old, tt.held, tt.fresh, tt.now, t0)
		if d.Action != tt.want {
			t.Errorf("%s: action %d, want %d (%+v)", tt.name, d.Action, tt.want, d)
			continue
		}
		text := d.Why
		if tt.err != nil {
			if !errors.Is(d.Err, tt.err) {
				t.Errorf("%s: error %v, want %v", tt.name, d.Err, tt.err)
				continue
			}
			text = d.Err.Error()
			if strings.Contains(text, "\n") || strings.HasPrefix(text, "localrun:") {
				t.Errorf("%s: error %q is not one line for a user", tt.name, text)
			}
		} else if d.Err != nil {
			t.Errorf("%s: error %v, want none", tt.name, d.Err)
		}
		for _, w := range tt.words {
			if !strings.Contains(text, w) {
				t.Errorf("%s: got %q, want it to say %q", tt.name, text, w)
			}
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	s := Store{CkptRoot: t.TempDir(), RunRoot: t.TempDir()}
	if r, err := s.Read("j"); r != nil || err != nil {
		t.Fatalf("Read of no record = %v, %v; want nil, nil", r, err)
	}
	want := Record{Job: "j", Identity: heat("--size", "8"), State: job.Cancelled, Started: t0, Ended: t0.Add(time.Minute), Keep: job.KeepForever}
	if err := s.Write(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read("j")
	if err != nil {
		t.Fatal(err)
	}
	want.Format = Format
	if len(got.Differences(want.Identity)) != 0 || got.State != want.State || !got.Ended.Equal(want.Ended) || got.Keep != want.Keep {
		t.Errorf("read %+v, want %+v", *got, want)
	}
	if _, err := os.Stat(filepath.Join(s.RunRoot, "j", RecordFile+".tmp")); !os.IsNotExist(err) {
		t.Errorf("temporary record left behind: %v", err)
	}
}

func TestLockKeepsRunsApart(t *testing.T) {
	s := Store{CkptRoot: t.TempDir(), RunRoot: t.TempDir()}
	l, err := s.Lock("j", 4242)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Lock("j", 1)
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "job j is running on this machine (pid 4242)") {
		t.Errorf("second lock: %v, want ErrRunning naming pid 4242", err)
	}
	l.Release()
	l, err = s.Lock("j", 1)
	if err != nil {
		t.Errorf("lock after release: %v", err)
	}
	l.Release()
}

// A store's jobs at t0: what a collection removes, by the retention rules.
func TestCollect(t *testing.T) {
	s := Store{CkptRoot: t.TempDir(), RunRoot: t.TempDir()}
	epoch := func(id string) {
		if err := os.MkdirAll(filepath.Join(s.CkptRoot, id, "e00000003"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	record := func(id string, state job.State, ended time.Duration, keep job.Duration) {
		epoch(id)
		r := Record{Job: id, Identity: heat(), State: state, Started: t0.Add(-ended - time.Minute), Keep: keep}
		if state != job.Running {
			r.Ended = t0.Add(-ended)
		}
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	record("cancelled-old", job.Cancelled, 25*time.Hour, 0)
	record("failed-old", job.Failed, 24*time.Hour, 0)
	record("cancelled-new", job.Cancelled, time.Hour, 0)
	record("kept", job.Cancelled, 100*time.Hour, job.KeepForever)
	record("keep-for-over", job.Succeeded, 3*time.Hour, job.Duration(2*time.Hour))
	record("keep-for-left", job.Succeeded, time.Hour, job.Duration(2*time.Hour))
	record("running", job.Running, 0, 0)
	running, err := s.Lock("running", 7)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Release()
	// A shoal run killed 30 h ago: its record says running, nobody holds its lock.
	record("killed", job.Running, 0, 0)
	old := t0.Add(-30 * time.Hour)
	for _, p := range []string{filepath.Join(s.RunRoot, "killed", RecordFile), filepath.Join(s.RunRoot, "killed"), filepath.Join(s.CkptRoot, "killed")} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	epoch("unrecorded")

	removed, err := s.Collect(retention.DefaultPolicy(), t0, "", false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range removed {
		if r.Err != nil {
			t.Errorf("%s %s: %v", r.Job, r.Kind, r.Err)
		}
		if r.Remove {
			got[r.Job] = true
		}
	}
	for _, c := range []struct {
		id   string
		gone bool
	}{
		{"cancelled-old", true}, {"failed-old", true}, {"keep-for-over", true}, {"killed", true},
		{"cancelled-new", false}, {"kept", false}, {"keep-for-left", false}, {"running", false}, {"unrecorded", false},
	} {
		_, ckptErr := os.Stat(filepath.Join(s.CkptRoot, c.id))
		_, runErr := os.Stat(filepath.Join(s.RunRoot, c.id))
		ckptGone, runGone := os.IsNotExist(ckptErr), os.IsNotExist(runErr)
		if c.id == "unrecorded" {
			runGone = ckptGone // it never had a run directory
		}
		if got[c.id] != c.gone || ckptGone != c.gone || runGone != c.gone {
			t.Errorf("job %s: reported removed %v, checkpoints gone %v, run directory gone %v; want %v",
				c.id, got[c.id], ckptGone, runGone, c.gone)
		}
	}

	// --job removes a kept run at once, and refuses a running one.
	if _, err := s.Collect(retention.DefaultPolicy(), t0, "running", false); !errors.Is(err, ErrRunning) {
		t.Errorf("collecting a running job by name: %v, want ErrRunning", err)
	}
	if _, err := s.Collect(retention.DefaultPolicy(), t0, "kept", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.CkptRoot, "kept")); !os.IsNotExist(err) {
		t.Errorf("job kept with --keep still there after its collection by name")
	}
}
