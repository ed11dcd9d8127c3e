// Package agent wires together the services of one Shoal node: its data
// directory, the cluster secret, gossip membership, the HTTP API, the launch
// service that starts MPI daemons for remote coordinators (internal/launch,
// [Agent.Launcher]) and, once the lead engineer plugs them in, the job
// coordinator and checkpoint store.
//
// Every agent serves launch grants and launches from the start, coordinator or
// not. It fences: when membership declares a node dead or left, the launch
// grants of the jobs that node coordinated are revoked and their processes on
// this node killed; when the agent stops, everything it launched is killed;
// when it starts, it kills what a previous agent on the same data dir left.
//
// An agent owns its data directory for its lifetime (a lock file, see
// [LockedError]). It publishes the address of its API in the data directory
// ([AddrFile]) and keeps a copy of the cluster secret there ([SecretFile]),
// which is how the CLI on the same node finds and calls it without flags
// ([FindLocal]). The data directory is $SHOAL_DATA_DIR, else /var/lib/shoal for
// root, else ~/.shoal ([DefaultDataDir]).
package agent

import "errors"

// Errors. Test with errors.Is.
var (
	// ErrDataDirLocked: another agent holds the data directory ([LockedError]).
	ErrDataDirLocked = errors.New("agent: data dir in use")
	// ErrNoSecret: no cluster secret was found and none may be created.
	ErrNoSecret = errors.New("agent: no cluster secret")
	// ErrBadSecret: the secret file is unusable: readable by others, or too short.
	ErrBadSecret = errors.New("agent: unusable secret file")
	// ErrNoAgent: no agent is running with this data directory.
	ErrNoAgent = errors.New("agent: no local agent")
	// ErrConfig: a Config field has an unusable value.
	ErrConfig = errors.New("agent: invalid config")
	// ErrMetricsListen: a --metrics-listen address is not IP:PORT, or not a
	// loopback address and not allowed to be ([CheckMetricsListen]).
	ErrMetricsListen = errors.New("agent: metrics listen address refused")
)
