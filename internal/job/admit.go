package job

import (
	"slices"
)

// Admit decides what becomes of spec, submitted under id, given the job the
// store holds under that id (held false: none) and whether this node drives a
// job of that id (driven: started, perhaps not yet in the store). A free id
// makes a new job (again false, no error). An ended task farm submitted again
// by its owner, the same program, files and tasks, is started again with the
// results it stored (again true). Anything else is refused as taken, in words
// that name neither the holder nor the job's state: the refusal tells the
// submitter only that the id is in use (docs/security.md, "Users").
func Admit(id string, old Job, held, driven bool, spec Spec) (again bool, err error) {
	switch {
	case !held && !driven:
		return false, nil
	case held && !driven && SameOwner(old.Spec.Owner, spec.Owner) && sameFarm(old, spec):
		return true, nil
	}
	return false, Taken(id)
}

// sameFarm reports whether spec is old's, an ended task farm, submitted again:
// the same command line and tasks, so that the results old stored are those
// spec asks for. Who submits it is [Admit]'s to compare.
func sameFarm(old Job, spec Spec) bool {
	if old.Ended.IsZero() || old.Spec.Farm == nil || spec.Farm == nil {
		return false
	}
	return slices.Equal(old.Spec.Argv, spec.Argv) && slices.Equal(old.Spec.Farm.Tasks, spec.Farm.Tasks) &&
		slices.EqualFunc(old.Spec.Files, spec.Files, func(a, b File) bool { return a == b })
}

// OwnSubmission reports whether stored, found under the id a submission of
// spec was passed on with, is that submission, which reached the leader before
// its answer was lost: a job of the same owner. Another user's job under the
// id is theirs, not an answer to this submission.
func OwnSubmission(stored Job, spec Spec) bool {
	return SameOwner(stored.Spec.Owner, spec.Owner)
}
