// Package errkind names the kinds of failure that Shoal's stores, services and
// run loops share: a package returns an error wrapping one of these
// (fmt.Errorf("%w: no job %q", errkind.NotFound, id)) and callers test it
// with errors.Is, whether the error arose in the process or came back from
// another node. The API server maps each kind to an HTTP status in one table
// (internal/api), and its client maps the status back to the kind.
//
// The kinds' texts are the API's, which docs/api.md specifies as the start of
// an error answer ("api: not found: no job \"j\""): an error reads the same
// whether a node answered it or the process made it.
package errkind

import "errors"

// Kinds, with the HTTP status the API answers each with.
var (
	BadRequest   = errors.New("api: bad request")       // 400: the request is malformed or asks for what cannot be
	Unauthorized = errors.New("api: unauthorized")      // 401
	Forbidden    = errors.New("api: forbidden")         // 403: a local user asking for what only root may do
	NotFound     = errors.New("api: not found")         // 404
	Conflict     = errors.New("api: conflict")          // 409: the state forbids it (a job already ended)
	TooLarge     = errors.New("api: request too large") // 413
	Corrupt      = errors.New("api: corrupt")           // 422: stored data fails verification
	Internal     = errors.New("api: internal error")    // 500
	BadGateway   = errors.New("api: bad gateway")       // 502: another node this one called failed
	NotAvailable = errors.New("api: not available")     // 503: a service not ready, or stopping
	// OverQuota: a local user's upload would take their files in the node's
	// cache over their quota (507, as WebDAV's quotas answer, RFC 4331).
	OverQuota = errors.New("api: over quota")
	// Unreachable: no answer from another node's agent at all.
	Unreachable = errors.New("api: agent unreachable")
)

// NoAnswer is a failure of a call to other nodes (a bad gateway) that names
// the nodes, by API address, that gave no answer: its caller may count them
// as gone, where a bad gateway alone does not say which node failed.
type NoAnswer struct {
	Addrs []string
	Err   error // wraps BadGateway
}

func (e *NoAnswer) Error() string          { return e.Err.Error() }
func (e *NoAnswer) Unwrap() error          { return e.Err }
func (e *NoAnswer) NoAnswerFrom() []string { return e.Addrs }

// NoAnswerFrom returns the addresses of the nodes err says gave no answer,
// nil when it names none: those of a *NoAnswer, or of an error from another
// node that carried them (the API's 502 answer, docs/api.md).
func NoAnswerFrom(err error) []string {
	var named interface{ NoAnswerFrom() []string }
	if errors.As(err, &named) {
		return named.NoAnswerFrom()
	}
	return nil
}
