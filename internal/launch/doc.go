// Package launch starts MPI daemons on a node for remote coordinators: the
// agent side of `shoal rsh`, and the protocol both sides speak.
//
// A coordinator first grants a job on the node ([Service.Grant], POST
// /v1/grants). Open MPI's mpirun then runs `shoal rsh NODE orted …` instead of
// ssh; shoal rsh asks NODE's agent to launch (POST /v1/launch, switched to
// the launch protocol), and the agent's [Service] runs the daemon in its own
// process group, relaying stdin, stdout, stderr, signals and the exit status
// over the connection in frames ([ReadFrame], [WriteFrame], [Relay] for the
// client side; docs/api.md specifies them).
//
// Nothing launched outlives its reason to run: when the connection drops the
// command gets SIGTERM and, a second later, SIGKILL; when it exits, what it
// left behind is killed; [Service.Revoke] (the coordinator fencing a job) and
// [Service.RevokeCoordinator] (the coordinator's node died) kill all of a
// job's processes. MPI daemons start their ranks in process groups of their
// own, so every launched process also carries [MarkerVar] in its
// environment, and kills find the ranks through it.
package launch
