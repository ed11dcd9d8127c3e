// Package overlay holds the pure parts of the network the agents carry for
// MPI: a node's address in the overlay's prefix ([Candidate], [Choose]), which
// node owns a packet's destination ([Table]), the frames IP packets travel in
// between two agents ([WriteFrame], [ReadFrame]), which of two tunnels
// between the same pair is kept ([Keep]), and which node a packet to a peer is
// written to: the peer, or a relay when the pair connects in neither
// direction ([Route]). The device and the tunnels' I/O are
// the agent's; the TUN device itself is [Device].
package overlay
