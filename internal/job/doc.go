// Package job holds what a job is, whatever part of Shoal handles it: what a user
// submits ([Spec], checked by [Spec.Validate]), the record every node keeps of it
// ([Job]), the steps it goes through ([Event]), and the rules of its life, which are
// pure and tested on plain data: the states and the transitions between them
// ([Lifecycle], the one writer of a job's state), what follows each way a run ends
// ([RestartPolicy]), how long a silent node is waited for ([Patience]), and whose a
// job id is ([Admit]). The coordinator's run loop, the job service and the API carry
// these types as they are: the spec a user submits is the spec the run loop runs.
package job

import "errors"

// Errors of the package. A refusal names the job and says why in its own words
// ([*Error]), and unwraps to one of these.
var (
	// ErrInvalid: a spec breaks a rule of [Spec.Validate].
	ErrInvalid = errors.New("job: invalid")
	// ErrNotFound: no job has the id, or one the asker may not see.
	ErrNotFound = errors.New("job: not found")
	// ErrTaken: a submission's id is held by a job it may not start again.
	ErrTaken = errors.New("job: id taken")
)

// Error is a refusal about a job, in the words a user reads; it unwraps to one
// of the package's sentinels.
type Error struct {
	Err error  // ErrInvalid, ErrNotFound or ErrTaken
	Msg string // the whole line: `job id "x" is taken; choose another id`
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }
