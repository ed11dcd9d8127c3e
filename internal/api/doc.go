// Package api is the HTTP/JSON API of a Shoal agent: the [Server] every agent
// runs, the [Client] the CLI and other agents use, and the request
// authentication both share ([Sign], [Verifier]). docs/api.md is its
// specification.
//
// Every request except GET /v1/health carries an HMAC-SHA256 signature made with
// a key derived from the cluster secret ([DeriveAuthKey]), over the method, the
// path and query, a timestamp, a nonce and the SHA-256 of the body; the secret
// itself never crosses the network.
//
// The server answers node routes itself through a [LocalNode] (the agent) and
// hands job, launch, grant, file and shard routes to a [JobService], a
// [GrantService], a [DataService] and a [ShardService] (the coordinator, the
// node's launch service, the file store and the checkpoint store), which can be
// plugged in while the server runs. Until they are, those routes answer 503
// with [ErrNotAvailable].
package api

import (
	"errors"
	"shoal/internal/job"
	"slices"
)

// Errors. Services return errors wrapping these to choose the HTTP status;
// [Client] methods return an [*Error] that unwraps to the one matching the
// status they received. Test with errors.Is.
var (
	ErrBadRequest       = errors.New("api: bad request")        // 400
	ErrUnauthorized     = errors.New("api: unauthorized")       // 401
	ErrForbidden        = errors.New("api: forbidden")          // 403: a local user asking for what only root may do
	ErrNotFound         = errors.New("api: not found")          // 404
	ErrMethodNotAllowed = errors.New("api: method not allowed") // 405
	ErrConflict         = errors.New("api: conflict")           // 409
	ErrMisdirected      = errors.New("api: misdirected")        // 421: signed for another agent, or an earlier run of this one
	ErrTooLarge         = errors.New("api: request too large")  // 413
	ErrCorrupt          = errors.New("api: corrupt")            // 422: a stored shard fails verification
	ErrInternal         = errors.New("api: internal error")     // 500
	ErrBadGateway       = errors.New("api: bad gateway")        // 502: another node this one called failed
	ErrNotAvailable     = errors.New("api: not available")      // 503: service not plugged in yet
	// ErrOverQuota: a local user's upload would take their files in the
	// node's cache over their quota (507, as WebDAV's quotas answer, RFC 4331).
	ErrOverQuota = errors.New("api: over quota")
	// ErrUnreachable: the client could not get an answer from the agent at all.
	ErrUnreachable = errors.New("api: agent unreachable")
)

// statusErrors maps statuses to sentinels and wire codes, both ways: the one
// table of what each error of a service means on the wire. Besides the API's
// own sentinels, a status takes the errors of the packages whose services the
// server carries (also): a service returns its own package's error, the server
// answers with the status, and a client's [*Error] of that status is the API's
// sentinel and those errors too (errors.Is), so that a caller tells a remote
// refusal as it tells a local one.
var statusErrors = []struct {
	status int
	code   string
	err    error
	also   []error
}{
	{400, "bad_request", ErrBadRequest, []error{job.ErrInvalid}},
	{401, "unauthorized", ErrUnauthorized, nil},
	{403, "forbidden", ErrForbidden, nil},
	{404, "not_found", ErrNotFound, []error{job.ErrNotFound}},
	{405, "method_not_allowed", ErrMethodNotAllowed, nil},
	{409, "conflict", ErrConflict, []error{job.ErrTaken}},
	{413, "too_large", ErrTooLarge, nil},
	{421, "misdirected", ErrMisdirected, nil},
	{422, "corrupt", ErrCorrupt, nil},
	{500, "internal", ErrInternal, nil},
	{502, "bad_gateway", ErrBadGateway, nil},
	{503, "not_available", ErrNotAvailable, nil},
	{507, "over_quota", ErrOverQuota, nil},
}

// Error is an error answer from an agent: the HTTP status and the body
// {"error": Message, "code": Code}. It unwraps to the sentinel of its status.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error {
	for _, s := range statusErrors {
		if s.status == e.Status {
			return s.err
		}
	}
	if e.Status >= 500 {
		return ErrInternal
	}
	return ErrBadRequest
}

// Is reports whether target is one of the errors its status stands for
// besides the API's sentinel (statusErrors' also).
func (e *Error) Is(target error) bool {
	for _, s := range statusErrors {
		if s.status == e.Status && slices.Contains(s.also, target) {
			return true
		}
	}
	return false
}

// statusOf returns the HTTP status and wire code for an error from a service.
func statusOf(err error) (int, string) {
	for _, s := range statusErrors {
		if errors.Is(err, s.err) || slices.ContainsFunc(s.also, func(a error) bool { return errors.Is(err, a) }) {
			return s.status, s.code
		}
	}
	return 500, "internal"
}
