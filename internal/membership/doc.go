// Package membership tells each Shoal agent which nodes are in its cluster, what
// they offer and whether they are still there.
//
// It wraps hashicorp/memberlist (SWIM gossip with a failure detector) and adds what
// Shoal needs on top: encrypted gossip keyed by the cluster secret ([DeriveGossipKey]),
// compact node metadata ([Meta]: API address, cores, measured speed, arch, OS,
// labels), a node table that keeps dead and departed nodes for display ([Node],
// [State]), and membership events delivered to any number of subscribers without
// ever blocking the gossip layer ([Membership.Subscribe]).
//
// A node that leaves politely ([Membership.Leave]) is reported as [StateLeft]; one
// that stops answering is [StateSuspect] while memberlist suspects it and [StateDead]
// once the failure detector gives up on it. [Config] says how fast that happens.
package membership

import "errors"

// Errors returned by this package. Callers test them with errors.Is; the returned
// errors wrap them with context (which field, which address).
var (
	// ErrInvalidConfig: a [Config] field has a value the package cannot use.
	ErrInvalidConfig = errors.New("membership: invalid config")
	// ErrSecretTooShort: the cluster secret has fewer than [MinSecretLen] bytes.
	ErrSecretTooShort = errors.New("membership: cluster secret too short")
	// ErrMetaTooLarge: encoded metadata exceeds [MaxMetaSize] bytes.
	ErrMetaTooLarge = errors.New("membership: node metadata too large")
	// ErrBadMeta: metadata received from a node could not be decoded.
	ErrBadMeta = errors.New("membership: malformed node metadata")
	// ErrNameTaken: a node alive in the cluster already has this node's name
	// (see [NameTakenError]).
	ErrNameTaken = errors.New("membership: node name already in the cluster")
	// ErrJoinUnreachable: no join address accepted a connection.
	ErrJoinUnreachable = errors.New("membership: join address unreachable")
	// ErrJoinRefused: a join address accepted the connection but the gossip exchange
	// failed; with Shoal's encrypted gossip this almost always means the two nodes
	// hold different cluster secrets.
	ErrJoinRefused = errors.New("membership: join refused")
	// ErrShutdown: the node has already left or shut down.
	ErrShutdown = errors.New("membership: shut down")
)
