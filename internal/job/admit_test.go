package job

import (
	"errors"
	"testing"
	"time"
)

// TestAdmit: a free id makes a new job; an ended farm submitted again by its
// owner, the same program, files and tasks, starts again with its results;
// every other submission under a held id is refused in the same words,
// whoever holds the id and whatever its job's state.
func TestAdmit(t *testing.T) {
	alice := &Owner{UID: 1001, GID: 1001, Name: "alice"}
	alice2 := &Owner{UID: 1001, GID: 100, Name: "alice"} // another primary group: the same user
	bob := &Owner{UID: 1002, GID: 1002, Name: "bob"}
	farmSpec := func(owner *Owner, tasks ...string) Spec {
		return Spec{ID: "x", Argv: []string{"tile", "{}"}, Files: []File{{Name: "tile", SHA256: "ab", Size: 3, Mode: 0o755}},
			Farm: &FarmSpec{Tasks: tasks}, Owner: owner}
	}
	// fixed is farmSpec with another command line or program, rerun or not.
	fixed := func(owner *Owner, argv, program bool, rerun bool, tasks ...string) Spec {
		s := farmSpec(owner, tasks...)
		if argv {
			s.Argv = []string{"tile", "--fixed", "{}"}
		}
		if program {
			s.Files = []File{{Name: "tile", SHA256: "cd", Size: 4, Mode: 0o755}}
		}
		s.Farm.Rerun = rerun
		return s
	}
	ended := func(spec Spec) Job {
		return Job{ID: "x", State: Succeeded, Spec: spec, Ended: time.Unix(1700000000, 0)}
	}
	running := func(spec Spec) Job { return Job{ID: "x", State: Running, Spec: spec} }
	mpi := func(owner *Owner) Spec {
		return Spec{ID: "x", Ranks: 2, Argv: []string{"heat"}, Owner: owner}
	}
	tests := []struct {
		name         string
		old          Job
		held, driven bool
		spec         Spec
		again, taken bool
		refusal      string // "": the words of an id taken
	}{
		{"a free id", Job{}, false, false, farmSpec(alice, "0"), false, false, ""},
		{"the owner's ended farm again", ended(farmSpec(alice, "0", "1")), true, false, farmSpec(alice, "0", "1"), true, false, ""},
		{"the owner's, from another group", ended(farmSpec(alice, "0", "1")), true, false, farmSpec(alice2, "0", "1"), true, false, ""},
		{"root's ended farm again by root", ended(farmSpec(nil, "0")), true, false, farmSpec(nil, "0"), true, false, ""},
		{"another user's ended farm, the same command line", ended(farmSpec(alice, "0", "1")), true, false, farmSpec(bob, "0", "1"), false, true, ""},
		{"a user's ended farm by root", ended(farmSpec(alice, "0")), true, false, farmSpec(nil, "0"), false, true, ""},
		{"root's ended farm by a user", ended(farmSpec(nil, "0")), true, false, farmSpec(alice, "0"), false, true, ""},
		{"the owner's farm, other tasks", ended(farmSpec(alice, "0", "1")), true, false, farmSpec(alice, "0", "2"), false, true,
			`job id "x" is your ended farm, and this one changes its tasks: the results it stored are of other tasks; choose another id`},
		{"the owner's farm, running", running(farmSpec(alice, "0")), true, true, farmSpec(alice, "0"), false, true, ""},
		{"another user's farm, running", running(farmSpec(alice, "0")), true, true, farmSpec(bob, "0"), false, true, ""},
		{"the owner's farm, driven but ended in the store", ended(farmSpec(alice, "0")), true, true, farmSpec(alice, "0"), false, true, ""},
		{"driven here, not yet in the store", Job{}, false, true, farmSpec(alice, "0"), false, true, ""},
		{"the owner's MPI job", ended(mpi(alice)), true, false, mpi(alice), false, true, ""},
		{"another user's MPI job", ended(mpi(alice)), true, false, mpi(bob), false, true, ""},
		{"the owner's farm, another command line, rerun", ended(farmSpec(alice, "0", "1")), true, false, fixed(alice, true, false, true, "0", "1"), true, false, ""},
		{"the owner's farm, another program, rerun", ended(farmSpec(alice, "0", "1")), true, false, fixed(alice, false, true, true, "0", "1"), true, false, ""},
		{"the owner's farm, another command line", ended(farmSpec(alice, "0", "1")), true, false, fixed(alice, true, false, false, "0", "1"), false, true,
			`job id "x" is your ended farm, and this one changes its command line: --rerun runs the tasks it has no result for with this one; or choose another id`},
		{"the owner's farm, another program and tasks", ended(farmSpec(alice, "0", "1")), true, false, fixed(alice, false, true, false, "0"), false, true,
			`job id "x" is your ended farm, and this one changes its tasks and its program or input files: the results it stored are of other tasks; choose another id`},
		{"the owner's farm, other tasks, rerun", ended(farmSpec(alice, "0", "1")), true, false, fixed(alice, true, false, true, "0", "2"), false, true,
			`job id "x" is your ended farm, and this one changes its tasks and its command line: the results it stored are of other tasks; choose another id`},
		{"another user's ended farm, rerun", ended(farmSpec(alice, "0", "1")), true, false, fixed(bob, true, false, true, "0", "1"), false, true, ""},
		{"the owner's farm, running, rerun", running(farmSpec(alice, "0")), true, true, fixed(alice, true, false, true, "0"), false, true, ""},
	}
	for _, tt := range tests {
		again, err := Admit("x", tt.old, tt.held, tt.driven, tt.spec)
		if again != tt.again || (err != nil) != tt.taken {
			t.Errorf("%s: admit = %v, %v; want again %v, taken %v", tt.name, again, err, tt.again, tt.taken)
			continue
		}
		if err == nil {
			continue
		}
		// The refusal names the id only, not the owner, not the state; but the
		// owner is told what changed in their own ended farm.
		want := `job id "x" is taken; choose another id`
		if tt.refusal != "" {
			want = tt.refusal
		}
		if !errors.Is(err, ErrTaken) || err.Error() != want {
			t.Errorf("%s: refused with %q, want %q (ErrTaken)", tt.name, err, want)
		}
	}
}

// TestOwnSubmission: a job found under the id a submission was passed on with
// is taken for that submission only when it is its submitter's.
func TestOwnSubmission(t *testing.T) {
	alice := &Owner{UID: 1001, GID: 1001}
	bob := &Owner{UID: 1002, GID: 1002}
	for _, tt := range []struct {
		stored, submitter *Owner
		want              bool
	}{
		{alice, alice, true},
		{nil, nil, true},
		{alice, bob, false},
		{alice, nil, false},
		{nil, alice, false},
	} {
		got := OwnSubmission(Job{ID: "x", Spec: Spec{Owner: tt.stored}}, Spec{ID: "x", Owner: tt.submitter})
		if got != tt.want {
			t.Errorf("OwnSubmission(stored by %v, submitted by %v) = %v, want %v", tt.stored, tt.submitter, got, tt.want)
		}
	}
}
