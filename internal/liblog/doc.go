// Package liblog carries the log lines of the libraries the agent builds on,
// hashicorp's raft and memberlist, into the agent's own [slog.Logger]: as
// records of their own, so that a line does not nest the library's timestamp
// and level inside the agent's, at a level mapped from the library's, and with
// a warning or error that repeats (raft's heartbeat to a voter that is gone
// fails every few seconds for as long as it is gone) rate-limited by a
// [Limiter].
//
// Levels map so: the libraries' errors and warnings are the agent's errors and
// warnings; their info, debug and trace lines narrate their internals
// (elections, pipelines, probes) and are the agent's debug lines, shown with
// shoal agent --verbose.
package liblog
