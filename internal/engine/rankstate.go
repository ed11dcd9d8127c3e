package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"shoal/internal/job"
	"shoal/internal/userdir"
)

// RankState is how one rank's process ended, as written by `shoal exec-rank` (see
// docs/launcher-protocol.md): the job's type, so a node reports the states it
// read as they are.
type RankState = job.RankState

// Rank wrapper states.
const (
	StateRunning  = "running"
	StateExited   = "exited"
	StateSignaled = "signaled" // died of a signal nobody in the launcher sent: a loss
	StateStopped  = "stopped"  // the launcher tore it down after another rank failed
	// StateVanished is what a reader makes of a rank whose wrapper is gone while
	// its state says running: the wrapper was killed by SIGKILL, the one signal
	// that leaves it no word (see job.RankLimits).
	StateVanished = "vanished"
)

// RankFile is the state file of rank in dir.
func RankFile(dir string, rank int) string {
	return filepath.Join(dir, fmt.Sprintf("r%06d", rank))
}

// WriteRankState records s atomically, so a reader never sees half a line.
func WriteRankState(dir string, s RankState) error {
	line := fmt.Sprintf("pid=%d state=%s time=%d", s.PID, s.State, s.TimeNs)
	switch s.State {
	case StateExited:
		line += fmt.Sprintf(" code=%d", s.Code)
	case StateSignaled, StateStopped:
		line += fmt.Sprintf(" signal=%d", s.Signal)
	}
	path := RankFile(dir, s.Rank)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(line+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadRankStates returns the states of every rank that wrote one in dir, by
// rank; a rank that says it runs while its wrapper's process is gone is
// [StateVanished]. The ranks run as the job's owner, whose directory dir is: it is read
// through t, one of its parents, without following a link.
func ReadRankStates(t userdir.Tree, dir string) ([]RankState, error) {
	ents, err := t.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []RankState
	for _, e := range ents {
		var rank int
		if _, err := fmt.Sscanf(e.Name(), "r%06d", &rank); err != nil || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		s, ok := readRankState(t, filepath.Join(dir, e.Name()), rank)
		if !ok {
			continue // removed between listing and reading
		}
		if s.State == StateRunning && s.PID > 0 && syscall.Kill(s.PID, 0) == syscall.ESRCH {
			// Gone: read again, as it may have written its end and exited
			// between the two looks.
			if again, ok := readRankState(t, filepath.Join(dir, e.Name()), s.Rank); ok && again.State == StateRunning {
				s.State = StateVanished
			} else if ok {
				s = again
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out, nil
}

// readRankState reads the state file path of rank.
func readRankState(t userdir.Tree, path string, rank int) (RankState, bool) {
	s := RankState{Rank: rank}
	b, err := t.ReadFile(path, 4096)
	if err != nil {
		return s, false
	}
	for _, kv := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "pid":
			fmt.Sscan(v, &s.PID)
		case "state":
			s.State = v
		case "code":
			fmt.Sscan(v, &s.Code)
		case "signal":
			fmt.Sscan(v, &s.Signal)
		case "time":
			fmt.Sscan(v, &s.TimeNs)
		}
	}
	return s, true
}

// Outcome classifies how a run of a job ended, from its ranks' states.
type Outcome struct {
	Kind  OutcomeKind
	Cause *RankState // the rank that ended the run, for RankLost and AppFailed
}

// OutcomeKind says whether a run's end is success, a recoverable loss or the
// program's own failure.
type OutcomeKind int

const (
	Succeeded OutcomeKind = iota
	RankLost              // a rank died of a signal: restart from a checkpoint
	AppFailed             // a rank exited non-zero by itself: do not retry
	Unknown               // the launcher failed without any rank telling why
)

// Classify decides what ended a run of nranks ranks whose launcher exited with
// launcherCode. The first rank to end badly is the cause: when one rank is killed, its
// peers may fail on broken connections a moment later, and those are consequences.
func Classify(states []RankState, nranks, launcherCode int) Outcome {
	var first *RankState
	exited0 := 0
	for i := range states {
		s := &states[i]
		bad := s.State == StateSignaled || s.State == StateExited && s.Code != 0
		if s.State == StateExited && s.Code == 0 {
			exited0++
		}
		if bad && (first == nil || s.TimeNs < first.TimeNs) {
			first = s
		}
	}
	switch {
	case first != nil && first.State == StateSignaled:
		return Outcome{Kind: RankLost, Cause: first}
	case first != nil:
		return Outcome{Kind: AppFailed, Cause: first}
	case launcherCode == 0 && (exited0 == nranks || len(states) < nranks):
		// Ranks on other nodes record their state there; the launcher's clean exit
		// speaks for them.
		return Outcome{Kind: Succeeded}
	}
	return Outcome{Kind: Unknown}
}
