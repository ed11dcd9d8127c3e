package shardstore

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/userdir"
)

// The job's ranks on this node that stopped making snapshot calls, from their
// alive files (jobdir.Alive): what the coordinator's hang rule weighs
// (job.Hung).

// aliveFile bounds what the store reads of an alive file: one padded line.
const aliveFile = 512

// silent lists the job's ranks on this node that stopped calling (SilentIn).
func (s *Store) silent(id string) []job.Silent { return SilentIn(s.jobDir(id)) }

// SilentIn lists the ranks of the job directory d that run and made no
// snapshot call for longer than job.SilentAfter their usual gap, by rank,
// with the share of a core each process used since its last call. A rank
// whose process is gone, or is not its alive file's owner's, is not listed:
// it ended (the run's end says how), or its pid was taken by another process
// since. The files are read through d's tree, following no link.
func SilentIn(d jobdir.Dir) []job.Silent {
	jdir, err := d.Tree().OpenDir(d.Path())
	if err != nil {
		return nil
	}
	defer jdir.Close()
	ents, err := jdir.ReadDir()
	if err != nil {
		return nil
	}
	var out []job.Silent
	wall := time.Now()
	for _, de := range ents {
		rank, ok := jobdir.ParseAliveName(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		// A file rewritten within the least silence is a rank that calls: a
		// stat instead of a read, the /proc lookup and two clocks (a clock
		// set back shows a modification in the future, which is read).
		if fi, err := jdir.Lstat(de.Name()); err == nil {
			if age := wall.Sub(fi.ModTime()); age >= 0 && age < job.SilentAfter(0) {
				continue
			}
		}
		a, owner, ok := readAlive(jdir, de.Name())
		if !ok || a.State != jobdir.AliveRun {
			continue
		}
		cpu, ok := processCPU(a.PID, owner)
		if !ok {
			continue
		}
		if sl, ok := a.Silent(rank, monotonicNow(), cpu); ok {
			out = append(out, sl)
		}
	}
	return out
}

// readAlive reads the alive file name in dir, and its owner.
func readAlive(dir *userdir.Dir, name string) (jobdir.Alive, uint32, bool) {
	f, err := dir.Open(name)
	if err != nil {
		return jobdir.Alive{}, 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return jobdir.Alive{}, 0, false
	}
	b, err := io.ReadAll(io.LimitReader(f, aliveFile))
	if err != nil {
		return jobdir.Alive{}, 0, false
	}
	a, ok := jobdir.ParseAlive(b)
	return a, ownerOf(fi), ok
}

// processCPU returns the CPU time process pid used so far, -1 when it cannot
// be read; ok is false when the process is gone or is not owner's.
func processCPU(pid int, owner uint32) (time.Duration, bool) {
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false
		}
		return -1, true
	}
	if ownerOf(fi) != owner {
		return 0, false
	}
	// The process's CPU-time clock, as clock_getcpuclockid(3) makes it:
	// every thread's time, as libshoal's CLOCK_PROCESS_CPUTIME_ID counts it.
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|2), &ts); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ESRCH) {
			return 0, false
		}
		return -1, true
	}
	return time.Duration(ts.Nano()), true
}

// ownerOf returns the user owning the file fi describes.
func ownerOf(fi fs.FileInfo) uint32 {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return st.Uid
	case *unix.Stat_t:
		return st.Uid
	}
	return ^uint32(0)
}

// monotonicNow is CLOCK_MONOTONIC, the clock of the alive files' times.
func monotonicNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
