package job

// RankState is how one rank of a job on a node ran or ended, as its wrapper
// `shoal exec-rank` recorded it (docs/launcher-protocol.md, "Rank wrapper"; the
// states are internal/engine's, which reads and writes the files).
type RankState struct {
	Rank   int    `json:"rank"`
	PID    int    `json:"pid"`
	State  string `json:"state"`            // running, exited, signaled (a loss), stopped (torn down by the launcher), vanished (its wrapper killed by SIGKILL)
	Code   int    `json:"code,omitempty"`   // exit code, for exited
	Signal int    `json:"signal,omitempty"` // for signaled and stopped
	TimeNs int64  `json:"time_ns"`          // when the wrapper saw it end (Unix ns); 0 while running
}
