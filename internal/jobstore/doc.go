// Package jobstore keeps the cluster's jobs in a state machine replicated with
// Raft (hashicorp/raft, its log in raft-boltdb), so that no node is special: every
// agent answers `shoal jobs`, `events`, `logs` and `wait` locally, from its
// replica on a server of the store, from a mirror that follows a server
// ([Store.Follow]) on any other node (a client); the job coordinator runs on the
// leader, and every decision it makes (job
// submitted, state changed, epoch complete, rank output, finished) is a log entry,
// so that a new leader resumes exactly where the old one stopped.
//
// Who votes: up to [MaxVoters] agents, always an odd number ([VoterTarget]), picked
// by the leader from the live members, longest-up first, and up to [MaxStandbys]
// standbys that follow the log without voting; the others are clients, so that
// what the leader sends does not grow with the cluster. The leader removes voters that membership declares dead or left
// and promotes standbys in their place ([PlanVoters], Consul's autopilot in
// small), so a cluster that loses nodes one at a time keeps its quorum. A job
// survives the loss of any node as long as a majority of the voters remains:
//   - 1 node: it votes alone; it is the whole cluster.
//   - 2 nodes: the older votes alone. Losing the other costs nothing; losing the
//     voter leaves nobody to coordinate until it comes back (the survivor says so).
//   - 3 or 4 nodes: 3 vote; any one may be lost at a time.
//   - 5 or more: 5 vote; any two may be lost at once.
package jobstore
