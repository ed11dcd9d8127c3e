package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CmdError is a failed helper command (ip, tc, unshare) with what it printed.
type CmdError struct {
	Argv   []string
	Stderr string
	Err    error
}

func (e *CmdError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("%s: %s", strings.Join(e.Argv, " "), msg)
}

func (e *CmdError) Unwrap() error { return e.Err }

// sh runs a helper command in the machine's own network namespace, also when the caller
// itself runs inside a testbed host (`shoal testbed exec n1 -- shoal testbed cut n2`).
func (n names) sh(ctx context.Context, argv ...string) error {
	_, err := n.shOut(ctx, argv...)
	return err
}

func (n names) shOut(ctx context.Context, argv ...string) (string, error) {
	return n.shIn(ctx, "", argv...)
}

// shIn is shOut with stdin given to the command.
func (n names) shIn(ctx context.Context, stdin string, argv ...string) (string, error) {
	full := argv
	if p := n.machineNetns(); p != "" {
		full = append([]string{"nsenter", "--net=" + p, "--"}, argv...)
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	var stdout, stderr bytes.Buffer
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &CmdError{Argv: argv, Stderr: stderr.String(), Err: err}
	}
	return stdout.String(), nil
}

// machineNetns is the path of the network namespace the testbed was built in when the
// caller is in another one, else "". Up keeps that namespace at DIR/machine-netns (a bind
// mount): /proc/1/ns/net would do, but a container's init may not let us open it.
func (n names) machineNetns() string {
	self, err := nsID("/proc/self/ns/net")
	if err != nil {
		return ""
	}
	for _, p := range []string{n.machineNetnsPath(), "/proc/1/ns/net"} {
		if id, err := nsID(p); err == nil && isNsfs(p) {
			if id == self {
				return ""
			}
			return p
		}
	}
	return ""
}

// keepMachineNetns bind-mounts the caller's network namespace at DIR/machine-netns.
func (n names) keepMachineNetns() error {
	p := n.machineNetnsPath()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return err
	}
	if err := syscall.Mount("/proc/self/ns/net", p, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("testbed: keep the machine's network namespace at %s: %w", p, err)
	}
	return nil
}

// nsid identifies a namespace (or any file): device and inode.
type nsid struct{ dev, ino uint64 }

func nsID(path string) (nsid, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nsid{}, err
	}
	return nsid{uint64(st.Dev), st.Ino}, nil
}

// hostMatch says which processes belong to a host: members of its cgroups, and every
// process in its network or UTS namespace (also those something else started there).
type hostMatch struct {
	cgroups []string
	ns      []nsid // namespaces: network, UTS
}

func matchFor(n names, k int, cgroups []string) hostMatch {
	m := hostMatch{cgroups: cgroups}
	for _, p := range []string{n.netnsPath(k), n.utsPath(k)} {
		if id, err := nsID(p); err == nil && isNsfs(p) {
			m.ns = append(m.ns, id)
		}
	}
	return m
}

// isNsfs tells a namespace bind mount from the plain file it covers.
func isNsfs(path string) bool {
	var st syscall.Statfs_t
	const nsfsMagic = 0x6e736673
	return syscall.Statfs(path, &st) == nil && st.Type == nsfsMagic
}

// pids lists the processes of the host, never the caller itself.
func (m hostMatch) pids() []int {
	seen := map[int]bool{}
	for _, cg := range m.cgroups {
		for _, pid := range cgroupPids(cg) {
			seen[pid] = true
		}
	}
	if len(m.ns) > 0 {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || seen[pid] {
				continue
			}
			for _, kind := range []string{"net", "uts"} {
				id, err := nsID("/proc/" + e.Name() + "/ns/" + kind)
				if err != nil {
					continue
				}
				for _, want := range m.ns {
					if id == want {
						seen[pid] = true
					}
				}
			}
		}
	}
	self := os.Getpid()
	out := make([]int, 0, len(seen))
	for pid := range seen {
		if pid != self && pid > 1 {
			out = append(out, pid)
		}
	}
	return out
}

// kill sends SIGKILL to every process of the host until none is left (processes may fork
// while being killed) and returns how many it killed.
func (m hostMatch) kill(ctx context.Context) (killed int, err error) {
	deadline := time.Now().Add(10 * time.Second)
	all := map[int]bool{}
	for {
		pids := m.pids()
		if len(pids) == 0 {
			return len(all), nil
		}
		for _, cg := range m.cgroups {
			cgroupKill(cg)
		}
		for _, pid := range pids {
			all[pid] = true
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return len(all), fmt.Errorf("testbed: processes %v survive SIGKILL", pids)
		}
		select {
		case <-ctx.Done():
			return len(all), ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state is the field after "(comm)"; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// alive reports whether pid runs in the network namespace want: it is the host's process
// and not an unrelated one that got the same pid later.
func alive(pid int, want nsid) bool {
	if !running(pid) {
		return false
	}
	id, err := nsID("/proc/" + strconv.Itoa(pid) + "/ns/net")
	return err == nil && id == want
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// mountDir mounts a tmpfs of its own on the testbed's directory, where the hosts
// keep their temp and data dirs, so that hosts cost what machines with a disk of
// their own do, whatever file system this machine's /tmp is on.
//
// Hosts create and remove many files: every launch makes a job's directories,
// its files, the MPI daemons' session directories and the ranks' state files.
// On an ext4 without a journal (the root file system of the machine these
// figures were measured on) the inode allocator passes over the inodes freed
// in the last seconds, reading each one's inode table block, so after a test or
// two each new file took milliseconds of CPU: at a 32-host launch, the rank
// wrappers used 0.30 to 0.38 CPU-s, nearly all of it in mkdir and open, against
// 0.07 on a tmpfs, and plain mpirun took 1.7 to 2.2 s against 1.2 to 1.5.
// checkRootDir checks that dir is a directory only root can change: not a link,
// root's, writable by nobody else. The testbed's directories are in /tmp, which is
// every user's: root writes secrets there, sources files from there and mounts
// over them, and so follows nothing a user could have put in their place. Once it
// holds, it goes on holding, since /tmp's sticky bit keeps others from renaming or
// removing root's entries. The error wraps fs.ErrNotExist when dir is missing.
func checkRootDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is not a directory only root can change (%v): remove it", dir, fi.Mode())
	}
	return nil
}

// makeDir makes the instance's directory if it is missing and checks that it is
// only root's ([checkRootDir]).
func (n names) makeDir() error {
	if err := os.Mkdir(n.dir(), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("testbed: %w", err)
	}
	if err := checkRootDir(n.dir()); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	return nil
}

func (n names) mountDir() error {
	return syscall.Mount("tmpfs", n.dir(), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755")
}

// unmountUnder detaches every mount at or below dir (the testbed's tmpfs, the
// hosts' UTS namespace files), deepest first.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			if p := unescapeMount(f[4]); p == dir || strings.HasPrefix(p, dir+"/") {
				points = append(points, p)
			}
		}
	}
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			errs = append(errs, fmt.Errorf("testbed: unmount %s: %w", points[i], err))
		}
	}
	return errors.Join(errs...)
}
