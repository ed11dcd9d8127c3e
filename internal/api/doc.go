// Package api is the HTTP/JSON API of a Shoal agent: the [Server] every agent
// runs, the [Client] the CLI and other agents use, and the request
// authentication both share ([Sign], [Verifier]). docs/api.md is its
// specification.
//
// It is the edge, as net/http is: it owns the request and response bodies,
// and carries the nouns of the packages named after them without owning them
// ([node.Node], [shard.Index], [links.Link], traffic.Report, [job.Job]).
// Services fail with the kinds of [errkind], which the server answers with
// the statuses of one table (statusErrors) and the client maps back.
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
	"slices"
	"strings"

	"shoal/internal/errkind"
	"shoal/internal/job"
)

// Errors. Services return errors wrapping these, or the kinds of
// internal/errkind they stand for, to choose the HTTP status; [Client] methods
// return an [*Error] that unwraps to the one matching the status they
// received. Test with errors.Is.
var (
	ErrBadRequest       = errkind.BadRequest                    // 400
	ErrUnauthorized     = errkind.Unauthorized                  // 401
	ErrForbidden        = errkind.Forbidden                     // 403: a local user asking for what only root may do
	ErrNotFound         = errkind.NotFound                      // 404
	ErrMethodNotAllowed = errors.New("api: method not allowed") // 405
	ErrConflict         = errkind.Conflict                      // 409
	ErrMisdirected      = errors.New("api: misdirected")        // 421: signed for another agent, or an earlier run of this one
	ErrTooLarge         = errkind.TooLarge                      // 413
	ErrCorrupt          = errkind.Corrupt                       // 422: a stored shard fails verification
	ErrInternal         = errkind.Internal                      // 500
	ErrBadGateway       = errkind.BadGateway                    // 502: another node this one called failed
	ErrNotAvailable     = errkind.NotAvailable                  // 503: service not plugged in yet
	ErrOverQuota        = errkind.OverQuota                     // 507
	ErrUnreachable      = errkind.Unreachable                   // the client could not get an answer from the agent at all
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
// {"error": Message, "code": Code, "no_answer": NoAnswer}. It unwraps to the
// sentinel of its status.
type Error struct {
	Status  int
	Code    string
	Message string
	// NoAnswer: the API addresses of the nodes the agent called that gave it
	// no answer, when a 502 names them (errkind.NoAnswerFrom finds them).
	NoAnswer []string
}

func (e *Error) Error() string { return e.Message }

// NoAnswerFrom returns the nodes a 502 named as giving no answer.
func (e *Error) NoAnswerFrom() []string { return e.NoAnswer }

// Reason is the message without the words of its status's kind that start it
// (docs/api.md, "Errors"): "job j has already ended" for "api: conflict: job j
// has already ended", for a reader told the kind otherwise, as the CLI tells
// it by its exit code. A message that does not start with its kind is whole.
func (e *Error) Reason() string {
	for _, s := range statusErrors {
		if s.status == e.Status {
			if reason, ok := strings.CutPrefix(e.Message, s.err.Error()+": "); ok {
				return reason
			}
		}
	}
	return e.Message
}

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
