package job

import (
	"fmt"
	"slices"
	"strings"
)

// Admit decides what becomes of spec, submitted under id, given the job the
// store holds under that id (held false: none) and whether this node drives a
// job of that id (driven: started, perhaps not yet in the store). A free id
// makes a new job (again false, no error). An ended task farm submitted again
// by its owner, the same program, files and tasks, is started again with the
// results it stored (again true); with another command line or files, only when
// the submission says so (FarmSpec.Rerun) and its tasks are the same, else it
// is refused naming what changed. Anything else is refused as taken, in words
// that name neither the holder nor the job's state: the refusal tells the
// submitter only that the id is in use (docs/security.md, "Users").
func Admit(id string, old Job, held, driven bool, spec Spec) (again bool, err error) {
	switch {
	case !held && !driven:
		return false, nil
	case held && !driven && SameOwner(old.Spec.Owner, spec.Owner) && endedFarm(old, spec):
		changed := farmChanges(old.Spec, spec)
		if len(changed) == 0 || (spec.Farm.Rerun && !slices.Contains(changed, changedTasks)) {
			return true, nil
		}
		return false, changedFarm(id, changed)
	}
	return false, Taken(id)
}

// endedFarm reports whether old is an ended task farm and spec a farm too:
// one its owner may start again.
func endedFarm(old Job, spec Spec) bool {
	return !old.Ended.IsZero() && old.Spec.Farm != nil && spec.Farm != nil
}

// What may change between a farm and the same id submitted again.
const (
	changedTasks = "its tasks"
	changedArgv  = "its command line"
	changedFiles = "its program or input files"
)

// farmChanges names what spec changes of old, a farm: its tasks (the results
// old stored are theirs), its command line, its files (a program built again).
func farmChanges(old, spec Spec) []string {
	var changed []string
	if !slices.Equal(old.Farm.Tasks, spec.Farm.Tasks) {
		changed = append(changed, changedTasks)
	}
	if !slices.Equal(old.Argv, spec.Argv) {
		changed = append(changed, changedArgv)
	}
	if !slices.EqualFunc(old.Files, spec.Files, func(a, b File) bool { return a == b }) {
		changed = append(changed, changedFiles)
	}
	return changed
}

// changedFarm refuses the owner's ended farm submitted again with changes: it
// says what changed and what would run it (the owner's own job: nothing is told
// to anyone else).
func changedFarm(id string, changed []string) error {
	what := strings.Join(changed, " and ")
	if slices.Contains(changed, changedTasks) {
		return &Error{ErrTaken, fmt.Sprintf("job id %q is your ended farm, and this one changes %s: the results it stored are of other tasks; choose another id", id, what)}
	}
	return &Error{ErrTaken, fmt.Sprintf("job id %q is your ended farm, and this one changes %s: --rerun runs the tasks it has no result for with this one; or choose another id", id, what)}
}

// OwnSubmission reports whether stored, found under the id a submission of
// spec was passed on with, is that submission, which reached the leader before
// its answer was lost: a job of the same owner. Another user's job under the
// id is theirs, not an answer to this submission.
func OwnSubmission(stored Job, spec Spec) bool {
	return SameOwner(stored.Spec.Owner, spec.Owner)
}
