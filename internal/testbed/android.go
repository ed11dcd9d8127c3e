package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Android is a phone's app sandbox as Termux's programs meet it: Android's seccomp filter
// kills a process that calls SysV IPC (shmget and the rest: "Bad system call", termux
// science-packages #49), and since Android 12 the phantom-process killer SIGKILLs an
// app's processes beyond 32 (termux-app #2366; the limit is the device setting
// max_phantom_processes). On the testbed every process of the host runs under a seccomp
// filter that traps the SysV IPC calls with SIGSYS ([ExecNoSysVIPC]), and a watchdog
// ([RunPhantomKiller]) kills the host's newest processes beyond [PhantomLimit].
var Android = Profile{
	Name: "android", NoSysVIPC: true, ProcessLimit: PhantomLimit,
	Source: "termux science-packages #49 (SysV IPC), termux-app #2366 (phantom-process killer)",
}

// PhantomLimit is Android 12's default max_phantom_processes.
const PhantomLimit = 32

// sysvIPCCalls are the system calls of SysV IPC on this machine's instruction set
// (x86-64 and arm64 have no multiplexing ipc call), and auditArch its AUDIT_ARCH value.
var sysvIPCCalls = []uint32{
	syscall.SYS_SHMGET, syscall.SYS_SHMAT, syscall.SYS_SHMCTL, syscall.SYS_SHMDT,
	syscall.SYS_SEMGET, syscall.SYS_SEMOP, syscall.SYS_SEMCTL, syscall.SYS_SEMTIMEDOP,
	syscall.SYS_MSGGET, syscall.SYS_MSGSND, syscall.SYS_MSGRCV, syscall.SYS_MSGCTL,
}

func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return 0xc000003e, nil
	case "arm64":
		return 0xc00000b7, nil
	}
	return 0, fmt.Errorf("testbed: no SysV IPC filter for %s", runtime.GOARCH)
}

// sockFilter is struct sock_filter, one classic BPF instruction.
type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// noSysVIPCFilter is the seccomp program: on arch, the calls in nrs trap (SIGSYS, which
// kills the process unless it handles it: "Bad system call"); everything else is
// allowed, other instruction sets' calls too (a qemu-user process makes the machine's).
func noSysVIPCFilter(arch uint32, nrs []uint32) []sockFilter {
	const (
		ldAbsW   = 0x20 // BPF_LD | BPF_W | BPF_ABS
		jeqK     = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
		retK     = 0x06 // BPF_RET | BPF_K
		retAllow = 0x7fff0000
		retTrap  = 0x00030000
	)
	n := len(nrs)
	prog := []sockFilter{
		{code: ldAbsW, k: 4}, // seccomp_data.arch
		{code: jeqK, jt: 0, jf: uint8(n + 1), k: arch},
		{code: ldAbsW, k: 0}, // seccomp_data.nr
	}
	for i, nr := range nrs {
		// to the trap, after the other comparisons and the allow
		prog = append(prog, sockFilter{code: jeqK, jt: uint8(n - i), jf: 0, k: nr})
	}
	return append(prog, sockFilter{code: retK, k: retAllow}, sockFilter{code: retK, k: retTrap})
}

// ExecNoSysVIPC installs the SysV IPC filter on this process and executes argv in its
// place, which keeps the filter, as do all it starts (`shoal testbed no-sysv-ipc`, the
// step an android host's commands go through). It returns only on failure.
func ExecNoSysVIPC(argv []string) error {
	arch, err := auditArch()
	if err != nil {
		return err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	prog := noSysVIPCFilter(arch, sysvIPCCalls)
	fprog := struct {
		len    uint16
		filter *sockFilter
	}{uint16(len(prog)), &prog[0]}
	// A filter belongs to the thread that installs it; exec keeps that thread's.
	runtime.LockOSThread()
	const prSetSeccomp, seccompModeFilter = 22, 2
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("testbed: install the SysV IPC filter: %w", e)
	}
	return syscall.Exec(path, argv, os.Environ())
}

// proc is one process of a host, for the phantom-process killer.
type proc struct {
	pid   int
	start uint64 // clock ticks after boot (field 22 of /proc/PID/stat)
}

// phantomExcess is the killer's rule: the newest processes beyond limit, newest first
// (the oldest — the agent, the MPI daemons — are kept). Ties go by pid.
func phantomExcess(procs []proc, limit int) []int {
	if len(procs) <= limit {
		return nil
	}
	sorted := append([]proc(nil), procs...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].start != sorted[j].start {
			return sorted[i].start > sorted[j].start
		}
		return sorted[i].pid > sorted[j].pid
	})
	var out []int
	for _, p := range sorted[:len(sorted)-limit] {
		out = append(out, p.pid)
	}
	return out
}

func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // from field 3, the state
	if len(f) < 20 || f[0] == "Z" {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// PhantomConfig is what [RunPhantomKiller] needs.
type PhantomConfig struct {
	Instance, Host int
	Limit          int
	Every          time.Duration // how often the host's processes are counted
}

// RunPhantomKiller is an android host's phantom-process killer (`shoal testbed
// phantom-killer`, which [Up] and [Bed.Add] start in its own session): every cfg.Every
// it counts the host's processes and SIGKILLs the newest beyond cfg.Limit, writing a
// line for each to stdout (the host's killer.log). It returns when ctx ends.
func RunPhantomKiller(ctx context.Context, cfg PhantomConfig) error {
	n := names{cfg.Instance}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	var m *hostMatch
	for {
		// The host is in the state file once up or add has made all of it.
		if st, err := loadState(n); m == nil && err == nil {
			if h, err := st.host(n.hostName(cfg.Host)); err == nil {
				hm := matchFor(n, cfg.Host, h.Cgroups)
				m = &hm
			}
		}
		if m == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				continue
			}
		}
		var procs []proc
		for _, pid := range m.pids() {
			if start, ok := procStart(pid); ok {
				procs = append(procs, proc{pid, start})
			}
		}
		for _, pid := range phantomExcess(procs, cfg.Limit) {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				fmt.Printf("%s killed pid %d (%s): n%d has %d processes, beyond its limit of %d\n",
					time.Now().Format(time.RFC3339Nano), pid, strings.TrimSpace(string(comm)), cfg.Host, len(procs), cfg.Limit)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// killerMarker names a host's phantom-process killer in its argv.
func (n names) killerMarker(k int) string {
	return fmt.Sprintf("shoal-testbed-%d-n%d-killer", n.inst, k)
}

// startKiller starts host k's phantom-process killer in its own session, logging to
// DIR/nK/killer.log.
func (n names) startKiller(bin string, k, limit int) (int, error) {
	if bin == "" {
		return 0, fmt.Errorf("%w: profile android needs the shoal executable for its process killer (Config.LinkBinary or AgentBinary)", ErrInvalidConfig)
	}
	logf, err := os.OpenFile(filepath.Join(n.hostDir(k), "killer.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	argv := []string{bin, "testbed", "phantom-killer", "--instance", strconv.Itoa(n.inst),
		"--node", strconv.Itoa(k), "--limit", strconv.Itoa(limit), "--marker", n.killerMarker(k)}
	if mn := n.machineNetns(); mn != "" {
		argv = append([]string{"nsenter", "--net=" + mn, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("testbed: start the process killer of n%d: %w", k, err)
	}
	go cmd.Wait()
	return cmd.Process.Pid, nil
}
