// Package overlay holds the pure parts of the network the agents carry for
// MPI: a node's address in the overlay's prefix ([Candidate], [Choose]), which
// node owns a packet's destination ([Table]), the frames IP packets travel in
// between two agents ([WriteFrame], [ReadFrame]), and which of two tunnels
// between the same pair is kept ([Keep]). The device and the tunnels' I/O are
// the agent's; the TUN device itself is [Device].
package overlay
