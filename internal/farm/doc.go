// Package farm holds the pure parts of a task farm: a bag of independent tasks,
// each one run of a program, dispatched to the nodes of a cluster as they have
// room (`shoal farm`).
//
//   - [Expand] builds a task's command line from the farm's template.
//   - [Scheduler] decides which task runs next, and where: the node with the
//     fewest tasks in hand per unit of capacity (cores × learned speed), each
//     node kept at its cores plus a prefetch of tasks waiting on it, so that a
//     core that finishes a task starts the next without a round trip to the
//     coordinator (Clop's least-queued dispatch with prefetch).
//   - [Ledger] records the tasks done, where their results are stored, and the
//     tasks that failed for good: what the job store keeps, so that a new
//     coordinator, or the same farm started again, runs only what is left.
//
// Nothing here touches the network, processes or the clock: the coordinator
// (internal/coord) calls these with what it observed.
package farm
