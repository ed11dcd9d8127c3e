package engine

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// EnvOpenFiles is the soft limit on open files the rank wrapper gives a rank
// (at most the hard limit): the launcher runs with a lower one
// ([LauncherOpenFiles]), which the ranks it starts itself would inherit.
const EnvOpenFiles = "SHOAL_NOFILE"

// LauncherOpenFiles is the soft limit on open files a launcher starting
// daemons on hosts hosts and localRanks ranks beside itself runs with: room
// for a connection and a few pipes a daemon, and for the pipes and the
// connection of each rank it starts itself.
//
// Open MPI's mpirun closes every descriptor below its soft limit in each child
// it forks to start a daemon, one close(2) each, so a launch costs the
// launching node hosts × the limit system calls: an agent started by systemd
// (LimitNOFILE=65536) made mpirun spend about 2.4 s of CPU closing nothing at
// 128 hosts (18.7 ms a fork), where a login shell's 1024 costs 40 ms. The
// base is that shell's 1024, which plain mpirun runs with.
func LauncherOpenFiles(hosts, localRanks int) uint64 {
	return 1024 + 8*uint64(max(hosts, 0)) + 8*uint64(max(localRanks, 0))
}

// LowerOpenFiles lowers the soft limit on open files of process pid, a
// launcher just started, to want when it is higher; the hard limit stays. The
// launcher forks its daemons only once it has read its arguments and loaded
// its components, tens of milliseconds after its start: one that forked
// sooner would close more descriptors, nothing worse.
func LowerOpenFiles(pid int, want uint64) error {
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		return err
	}
	if old.Cur <= want {
		return nil
	}
	return unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: want, Max: old.Max}, nil)
}

// OpenFilesEnv is the EnvOpenFiles setting for the ranks of a launcher started
// by this process: this process's soft limit, which Go raises to about the
// hard one at its start.
func OpenFilesEnv() string {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return ""
	}
	return EnvOpenFiles + "=" + strconv.FormatUint(l.Cur, 10)
}

// restoreOpenFiles sets this process's soft limit on open files to the value
// of EnvOpenFiles, at most the hard limit, for the rank it starts next,
// and unsets the variable: the rank's limit is the agent's, not the
// launcher's.
func restoreOpenFiles() {
	v, ok := os.LookupEnv(EnvOpenFiles)
	if !ok {
		return
	}
	os.Unsetenv(EnvOpenFiles)
	want, err := strconv.ParseUint(v, 10, 64)
	var l syscall.Rlimit
	if err != nil || syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || want == 0 {
		return
	}
	// Go raised this process's soft limit at its start and gives a child the
	// limit the process started with, unless the program sets one, as here.
	l.Cur = min(want, l.Max)
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}
