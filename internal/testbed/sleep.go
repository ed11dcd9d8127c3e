package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MaxSleep is the longest [Bed.Sleep]: a day.
const MaxSleep = 24 * time.Hour

// ParseSleep reads the SECONDS of `shoal testbed sleep NODE SECONDS`: a number of
// seconds (fractions allowed), more than 0 and at most [MaxSleep].
func ParseSleep(s string) (time.Duration, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: SECONDS %q: want a number of seconds", ErrInvalidConfig, s)
	}
	d := time.Duration(v * float64(time.Second))
	if !(v > 0) || d < time.Millisecond || d > MaxSleep {
		return 0, fmt.Errorf("%w: SECONDS %q: want more than 0 and at most %d", ErrInvalidConfig, s, int(MaxSleep.Seconds()))
	}
	return d, nil
}

// freezer is how one cgroup directory freezes its processes: the file, and what to
// write to freeze and to thaw. The cgroup v2 core has cgroup.freeze in every group
// (Linux ≥ 5.2), with or without controllers; v1 needs the freezer hierarchy.
type freezer struct{ file, frozen, thawed string }

func freezerOf(dir string) (freezer, bool) {
	for _, f := range []freezer{
		{filepath.Join(dir, "cgroup.freeze"), "1", "0"},
		{filepath.Join(dir, "freezer.state"), "FROZEN", "THAWED"},
	} {
		if _, err := os.Stat(f.file); err == nil {
			return f, true
		}
	}
	return freezer{}, false
}

// freezers are the freezers of a host's cgroups.
func freezers(dirs []string) []freezer {
	var out []freezer
	for _, d := range dirs {
		if f, ok := freezerOf(d); ok {
			out = append(out, f)
		}
	}
	return out
}

// frozen reports whether any of a host's cgroups is asked to be frozen.
func frozen(dirs []string) bool {
	for _, f := range freezers(dirs) {
		b, err := os.ReadFile(f.file)
		// v1 reads FREEZING while it is on its way.
		if err == nil && strings.TrimSpace(string(b)) != f.thawed {
			return true
		}
	}
	return false
}

func setFrozen(dirs []string, on bool) error {
	fs := freezers(dirs)
	if len(fs) == 0 {
		return ErrNoFreezer
	}
	for _, f := range fs {
		v := f.thawed
		if on {
			v = f.frozen
		}
		if err := writeFile(f.file, v); err != nil {
			return fmt.Errorf("testbed: write %s to %s: %w", v, f.file, err)
		}
	}
	return nil
}

// wakeDue is the rule behind a sleep that outlives whoever started it: a host still
// frozen once its wake time is past (its waker was killed) is thawed by the next
// `status`, `sleep` or `wake`. The grace leaves the waker the first go.
func wakeDue(wakeAt, now time.Time) bool {
	const grace = 2 * time.Second
	return !wakeAt.IsZero() && now.After(wakeAt.Add(grace))
}

// wakerMarker names a host's waker in its argv ($0 of its shell), so that it is
// found again, never confused with an unrelated process that got its pid.
func (n names) wakerMarker(k int) string { return fmt.Sprintf("shoal-testbed-%d-n%d-waker", n.inst, k) }

// startWaker starts, in its own session, a shell that sleeps d and thaws dirs. It
// runs in the machine's network namespace, so that it is none of a host's processes
// even when the caller runs inside one.
func (n names) startWaker(k int, dirs []string, d time.Duration) (int, error) {
	script := fmt.Sprintf("sleep %.3f", d.Seconds())
	for _, f := range freezers(dirs) {
		script += "; echo " + f.thawed + " > " + shellQuote(f.file)
	}
	argv := []string{"/bin/sh", "-c", script, n.wakerMarker(k)}
	if p := n.machineNetns(); p != "" {
		argv = append([]string{"nsenter", "--net=" + p, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("testbed: start the waker of n%d: %w", k, err)
	}
	go cmd.Wait()
	return cmd.Process.Pid, nil
}

// stopWaker kills host k's waker and its sleep, if pid is still that waker.
func (n names) stopWaker(k, pid int) {
	if pid <= 0 {
		return
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(b), n.wakerMarker(k)) {
		return
	}
	syscall.Kill(-pid, syscall.SIGKILL)
}

// Sleep freezes every process of node (its agent, MPI daemons and ranks: the members of
// its cgroups) for d, as a phone asleep or a paused VM: they stop where they are, their
// connections stay open, their timers run late, and after d they go on. It returns at
// once; a waker process of its own thaws the host at the wake time, and should it be
// killed, the next [Bed.Status], Sleep or [Bed.Wake] does. Sleeping a host that sleeps
// sets a new wake time. A caller inside the host leaves its cgroups first, or it would
// freeze too. It fails with [ErrNoFreezer] where the machine's cgroups cannot freeze.
func (b *Bed) Sleep(ctx context.Context, node string, d time.Duration) (wakeAt time.Time, err error) {
	if d <= 0 || d > MaxSleep {
		return time.Time{}, fmt.Errorf("%w: sleep of %v: want more than 0 and at most %v", ErrInvalidConfig, d, MaxSleep)
	}
	unlock, err := lock(b.n)
	if err != nil {
		return time.Time{}, err
	}
	defer unlock()
	st, err := loadState(b.n)
	if err != nil {
		return time.Time{}, err
	}
	h, err := st.host(node)
	if err != nil {
		return time.Time{}, err
	}
	if len(freezers(h.Cgroups)) == 0 {
		return time.Time{}, fmt.Errorf("%w (%s)", ErrNoFreezer, st.Cgroups.describe())
	}
	leaveGroup(b.n)
	b.n.stopWaker(h.Index, h.WakerPID)
	wakeAt = time.Now().Add(d)
	if err := setFrozen(h.Cgroups, true); err != nil {
		return time.Time{}, err
	}
	pid, err := b.n.startWaker(h.Index, h.Cgroups, d)
	if err != nil {
		return time.Time{}, err
	}
	h.WakeAt, h.WakerPID = wakeAt.UnixMilli(), pid
	return wakeAt, st.save(b.n)
}

// Wake thaws node now, ahead of its wake time; a host that is awake stays so.
func (b *Bed) Wake(ctx context.Context, node string) error {
	unlock, err := lock(b.n)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := loadState(b.n)
	if err != nil {
		return err
	}
	h, err := st.host(node)
	if err != nil {
		return err
	}
	return b.wake(st, h)
}

func (b *Bed) wake(st *state, h *Host) error {
	b.n.stopWaker(h.Index, h.WakerPID)
	if frozen(h.Cgroups) {
		if err := setFrozen(h.Cgroups, false); err != nil {
			return err
		}
	}
	h.WakeAt, h.WakerPID = 0, 0
	return st.save(b.n)
}

// wakeOverdue thaws the hosts whose wake time is past ([wakeDue]) and forgets the wake
// times of those awake.
func (b *Bed) wakeOverdue() error {
	st, err := loadState(b.n)
	if err != nil {
		return err
	}
	due := false
	for _, h := range st.Hosts {
		due = due || h.WakeAt != 0 && wakeDue(time.UnixMilli(h.WakeAt), time.Now())
	}
	if !due {
		return nil
	}
	unlock, err := lock(b.n)
	if err != nil {
		return err
	}
	defer unlock()
	if st, err = loadState(b.n); err != nil {
		return err
	}
	for i := range st.Hosts {
		h := &st.Hosts[i]
		if h.WakeAt != 0 && wakeDue(time.UnixMilli(h.WakeAt), time.Now()) {
			if frozen(h.Cgroups) {
				b.logf("%s was still asleep past its wake time (its waker died): waking it", h.Name)
			}
			if err := b.wake(st, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// killMarked kills the process group of every process one of whose arguments starts
// with prefix: the testbed's own helpers outside the hosts (wakers), which carry a
// marker naming their instance and host.
func killMarked(prefix string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(b), "\x00") {
			if strings.HasPrefix(arg, prefix) {
				syscall.Kill(-pid, syscall.SIGKILL)
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}
