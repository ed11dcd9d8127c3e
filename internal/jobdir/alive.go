package jobdir

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"shoal/internal/job"
)

// A rank's alive file, r<rank>.alive in the job's directory: libshoal's record
// of the rank's last snapshot call, rewritten in place at its agreements
// (lib/src/alive.c; docs/shard-format.md, "Files on disk"). The agent reads
// it to report the ranks that stopped calling (ShardIndex.Silent).

// Alive states.
const (
	AliveRun  = "run"  // the rank runs and calls shoal_snapshot
	AliveHold = "hold" // held after a checkpoint for a relaunch: no calls, on purpose
	AliveDone = "done" // in shoal_finalize: no more calls
)

// Alive is one record of an alive file.
type Alive struct {
	State string
	Calls int64         // shoal_snapshot calls so far
	At    time.Duration // CLOCK_MONOTONIC of the record
	Gap   time.Duration // since the record before; 0: the first
	Every time.Duration // per call over that gap
	PID   int
	CPU   time.Duration // the process's CPU time at At
}

// AliveName is rank's alive file's name.
func AliveName(rank int) string { return fmt.Sprintf("r%06d.alive", rank) }

// ParseAliveName returns the rank of an alive file's name.
func ParseAliveName(name string) (int, bool) { return parseRankName(name, ".alive") }

// AlivePath returns rank's alive file.
func (d Dir) AlivePath(rank int) string { return filepath.Join(d.Path(), AliveName(rank)) }

// ParseAlive reads an alive file: one line, "alive STATE calls N at NS gap NS
// every NS pid P cpu NS", padded with spaces. Anything else is not a record.
func ParseAlive(b []byte) (Alive, bool) {
	f := strings.Fields(string(b))
	keys := []string{"calls", "at", "gap", "every", "pid", "cpu"}
	if len(f) != 2+2*len(keys) || f[0] != "alive" || (f[1] != AliveRun && f[1] != AliveHold && f[1] != AliveDone) {
		return Alive{}, false
	}
	var v [6]int64
	for i, k := range keys {
		n, err := strconv.ParseInt(f[3+2*i], 10, 64)
		if f[2+2*i] != k || err != nil || n < 0 {
			return Alive{}, false
		}
		v[i] = n
	}
	if v[4] == 0 || v[4] > 1<<22 { // pid_max's highest
		return Alive{}, false
	}
	return Alive{State: f[1], Calls: v[0], At: time.Duration(v[1]), Gap: time.Duration(v[2]),
		Every: time.Duration(v[3]), PID: int(v[4]), CPU: time.Duration(v[5])}, true
}

// Silent says whether the rank of record a, read at now (CLOCK_MONOTONIC)
// when its process had used cpu (negative: unknown), is silent: running, and
// without a call for longer than [job.SilentAfter] its gap.
func (a Alive) Silent(rank int, now, cpu time.Duration) (job.Silent, bool) {
	silence := now - a.At
	if a.State != AliveRun || silence <= job.SilentAfter(a.Gap) {
		return job.Silent{}, false
	}
	busy := -1.0
	if cpu >= 0 {
		busy = max(float64(cpu-a.CPU)/float64(silence), 0)
	}
	return job.Silent{Rank: rank, Calls: a.Calls, For: job.Duration(silence), Gap: job.Duration(a.Gap),
		Every: job.Duration(a.Every), Busy: busy}, true
}
