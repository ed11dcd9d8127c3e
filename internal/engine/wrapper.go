package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Environment variables the rank wrapper reads; the runner sets them.
const (
	EnvRanksDir = "SHOAL_RANKS_DIR" // where rank state files go
	// EnvStageRanks lists the ranks ([FormatRanks]) whose shards are being
	// staged while the job starts: they keep SHOAL_STAGE_WAIT, which tells
	// libshoal to wait for the shard to arrive; the others lose it, so that a
	// rank whose shard is not coming fails at once.
	EnvStageRanks = "SHOAL_STAGE_RANKS"
	EnvStageWait  = "SHOAL_STAGE_WAIT"
)

// forwarded are the signals the launcher uses to tear a job down; the wrapper passes
// them to the program and records the program's end as "stopped", not as a loss.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCONT, syscall.SIGUSR1, syscall.SIGUSR2}

// toldGrace bounds how long a wrapper whose program died of a stop signal waits
// to learn whether it was sent the same signal (and so was told to stop).
const toldGrace = 200 * time.Millisecond

// stopSignal reports whether s is one of the forwarded signals that stop a program.
func stopSignal(s syscall.Signal) bool {
	return s == syscall.SIGTERM || s == syscall.SIGINT || s == syscall.SIGHUP
}

// RunWrapped runs argv as one rank of a job and records how it ended in the ranks
// directory named by SHOAL_RANKS_DIR (see docs/launcher-protocol.md). It returns the
// exit code the wrapper should exit with: the program's own, or 128+signal.
func RunWrapped(argv []string, stderr io.Writer) int {
	dir := os.Getenv(EnvRanksDir)
	rank, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_RANK"))
	if err != nil {
		rank, err = strconv.Atoi(os.Getenv("PMI_RANK")) // MPICH's Hydra
	}
	if dir == "" || err != nil {
		fmt.Fprintln(stderr, "shoal exec-rank: not started by shoal run (SHOAL_RANKS_DIR or the MPI rank is not set)")
		return 127
	}
	if list, ok := os.LookupEnv(EnvStageRanks); ok {
		if staged, err := RanksContain(list, rank); err != nil || !staged {
			os.Unsetenv(EnvStageWait)
		}
		os.Unsetenv(EnvStageRanks)
	}
	restoreOpenFiles()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The program must not outlive the wrapper: the launcher may SIGKILL the wrapper,
	// and an orphaned rank would keep computing beside the relaunched job. Pdeathsig
	// follows the creating thread, so this goroutine keeps its thread for good.
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "shoal: rank %d: cannot start %s: %v\n", rank, argv[0], err)
		WriteRankState(dir, RankState{Rank: rank, State: StateExited, Code: 127, TimeNs: time.Now().UnixNano()})
		return 127
	}
	pid := cmd.Process.Pid
	WriteRankState(dir, RankState{Rank: rank, PID: pid, State: StateRunning})
	var told atomic.Bool
	toldCh := make(chan struct{})
	go func() {
		for s := range sigs {
			if s != syscall.SIGCONT && s != syscall.SIGUSR1 && s != syscall.SIGUSR2 && !told.Swap(true) {
				close(toldCh)
			}
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	now := time.Now().UnixNano()
	st := RankState{Rank: rank, PID: pid, TimeNs: now}
	var ee *exec.ExitError
	switch {
	case err == nil:
		st.State = StateExited
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			st.Signal = int(ws.Signal())
			st.State = StateSignaled
			if stopSignal(ws.Signal()) && !told.Load() {
				// Open MPI's daemon signals the wrapper's whole process group: the
				// program may die of it before this wrapper's signal has come
				// through the runtime to the goroutine above.
				select {
				case <-toldCh:
				case <-time.After(toldGrace):
				}
			}
			if told.Load() {
				st.State = StateStopped
			}
		} else {
			st.State, st.Code = StateExited, ws.ExitStatus()
		}
	default:
		fmt.Fprintf(stderr, "shoal: rank %d: %v\n", rank, err)
		st.State, st.Code = StateExited, 127
	}
	WriteRankState(dir, st)
	if st.Signal != 0 {
		return 128 + st.Signal
	}
	return st.Code
}

// FormatRanks writes ranks (ascending) as a list of ranks and ranges: "0-3,7".
func FormatRanks(ranks []int) string {
	var b []byte
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(ranks[i]), 10)
		if j > i {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(ranks[j]), 10)
		}
		i = j + 1
	}
	return string(b)
}

// RanksContain reports whether the list FormatRanks wrote holds rank.
func RanksContain(list string, rank int) (bool, error) {
	if list == "" {
		return false, nil
	}
	in := false
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return false, fmt.Errorf("rank list %q: %q is not a rank", list, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return false, fmt.Errorf("rank list %q: %q is not a range", list, part)
			}
		}
		in = in || rank >= a && rank <= b
	}
	return in, nil
}
