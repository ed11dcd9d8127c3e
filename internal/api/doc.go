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

import "errors"

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

// statusErrors maps statuses to sentinels and wire codes, both ways.
var statusErrors = []struct {
	status int
	code   string
	err    error
}{
	{400, "bad_request", ErrBadRequest},
	{401, "unauthorized", ErrUnauthorized},
	{403, "forbidden", ErrForbidden},
	{404, "not_found", ErrNotFound},
	{405, "method_not_allowed", ErrMethodNotAllowed},
	{409, "conflict", ErrConflict},
	{413, "too_large", ErrTooLarge},
	{421, "misdirected", ErrMisdirected},
	{422, "corrupt", ErrCorrupt},
	{500, "internal", ErrInternal},
	{502, "bad_gateway", ErrBadGateway},
	{503, "not_available", ErrNotAvailable},
	{507, "over_quota", ErrOverQuota},
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

// statusOf returns the HTTP status and wire code for an error from a service.
func statusOf(err error) (int, string) {
	for _, s := range statusErrors {
		if errors.Is(err, s.err) {
			return s.status, s.code
		}
	}
	return 500, "internal"
}
