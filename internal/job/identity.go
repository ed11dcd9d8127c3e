package job

import "fmt"

// A job belongs to its submitter (Spec.Owner): only they, and the holders of
// the secret, see it, follow it, cancel it, read its results, or submit it
// again. Another local user is answered for it exactly as for an id no job has,
// so that no answer tells them which ids exist (docs/security.md, "Users").
// The one answer that must differ is a submission's: an id some job holds is
// taken, and NotFound and Taken word every such answer, whoever asks and
// whoever holds the id.

// NotFound is the error for job id the caller may not see: one no job has,
// or another user's. Both read the same, word for word.
func NotFound(id string) error { return &Error{ErrNotFound, fmt.Sprintf("no job %q", id)} }

// Taken is the refusal of a submission under id when a job holds it that
// the submission may not start again: the same words whoever holds it, in
// whatever state.
func Taken(id string) error {
	return &Error{ErrTaken, fmt.Sprintf("job id %q is taken; choose another id", id)}
}

// SameOwner reports whether a and b are one owner: both the agents' user
// (nil), or one local user by number, as the API compares a local caller with a job's owner.
func SameOwner(a, b *Owner) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.UID == b.UID
}
