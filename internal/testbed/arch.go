package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Instruction sets a testbed host may have ([Config].Arch). A host of the machine's own
// ([ArchAmd64]) runs its processes as any other; an [ArchArm64] host runs them in a Debian
// arm64 root file system (`make arm64-root`) under qemu-aarch64 through binfmt_misc.
const (
	ArchAmd64 = "amd64"
	ArchArm64 = "arm64"
)

// DefaultArm64Root is where `make arm64-root` (scripts/arm64-root.sh) keeps the arm64
// root file system, and where [Config].Arm64Root points when empty.
const DefaultArm64Root = "/var/cache/shoal/arm64-root"

// binfmtAarch64 is the kernel's entry for qemu-aarch64 once binfmt_misc knows it.
const binfmtAarch64 = "/proc/sys/fs/binfmt_misc/qemu-aarch64"

// ErrNoArm64 says the machine cannot run arm64 hosts: the root file system is not built,
// or binfmt_misc does not run arm64 programs with qemu-aarch64 in every mount namespace
// (the F flag). The wrapping error says which and what to run.
var ErrNoArm64 = errors.New("testbed: no arm64 hosts on this machine")

// CheckArm64 reports whether arm64 hosts can run here with the root file system at root
// ("" means [DefaultArm64Root]), or an error wrapping [ErrNoArm64] that says what is
// missing. Tests skip with its message.
func CheckArm64(root string) error {
	if root == "" {
		root = DefaultArm64Root
	}
	if _, err := os.Stat(root + ".stamp"); err != nil {
		return fmt.Errorf("%w: the arm64 root %s is not built (make arm64-root)", ErrNoArm64, root)
	}
	for _, p := range []string{"bin/sh", "usr/bin/mpirun.openmpi"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			return fmt.Errorf("%w: the arm64 root %s has no /%s (make arm64-root)", ErrNoArm64, root, p)
		}
	}
	b, err := os.ReadFile(binfmtAarch64)
	if err != nil {
		return fmt.Errorf("%w: binfmt_misc has no qemu-aarch64 (make arm64-root registers it)", ErrNoArm64)
	}
	if err := binfmtUsable(string(b)); err != nil {
		return fmt.Errorf("%w: %s: %v (make arm64-root registers it again)", ErrNoArm64, binfmtAarch64, err)
	}
	return nil
}

// binfmtUsable checks binfmt_misc's description of an entry: enabled, and with the F
// flag, so that the kernel holds the interpreter open and runs arm64 programs inside a
// root file system that has no qemu.
func binfmtUsable(entry string) error {
	enabled, fix := false, false
	for _, line := range strings.Split(entry, "\n") {
		if line == "enabled" {
			enabled = true
		}
		if flags, ok := strings.CutPrefix(line, "flags: "); ok && strings.Contains(flags, "F") {
			fix = true
		}
	}
	switch {
	case !enabled:
		return errors.New("disabled")
	case !fix:
		return errors.New("registered without the F (fix-binary) flag")
	}
	return nil
}

// arm64Agent is the agent an arm64 host runs when the testbed's agent is bin: the same
// name in the directory arm64 beside it (bin/arm64/shoal for bin/shoal, which
// `make arm64-agent` builds).
func arm64Agent(bin string) string {
	return filepath.Join(filepath.Dir(bin), ArchArm64, filepath.Base(bin))
}

// agentBinary is the shoal executable of host h: the testbed's, or its arm64 build.
func (s *state) agentBinary(h *Host) string {
	if h.Arch == ArchArm64 {
		return s.Arm64Agent
	}
	return s.AgentBinary
}

// arm64Mounts are the machine's directories an arm64 host sees at the same paths inside
// its root: the kernel's views, devices (with /dev/shm, where Open MPI's shared memory
// lives), /tmp (the host's temp and data dirs, the secret, the test's files) and share
// (see [arm64Share]) unless /tmp holds it.
func arm64Mounts(share string) []string {
	m := []string{"/proc", "/sys", "/dev", "/tmp"}
	if share != "" && !strings.HasPrefix(share+"/", "/tmp/") {
		m = append(m, share)
	}
	return m
}

// arm64Share is the directory of the machine that arm64 hosts see besides the system's,
// given their agent: the tree it was built in (X for X/bin/arm64/shoal: the repository,
// with the arm64 builds of libshoal and the examples in X/build/arm64, whose rpath
// names that path), else the agent's own directory. Never / or /usr, which would hide
// the root's own.
func arm64Share(agent string) string {
	dir := filepath.Dir(agent)
	if filepath.Base(dir) == ArchArm64 && filepath.Base(filepath.Dir(dir)) == "bin" {
		if tree := filepath.Dir(filepath.Dir(dir)); tree != "/" && tree != "/usr" {
			return tree
		}
	}
	return dir
}

// makeArm64Root gives arm64 host k its own mount namespace, kept alive by a bind mount at
// DIR/mntns/nK, in which an overlay of the cached root (its changes in DIR/nK/rootfs, so
// the cache stays as built) is mounted at DIR/nK/root with [arm64Mounts] inside it.
// The host's processes enter that namespace and chroot into the overlay ([prefix]).
func makeArm64Root(ctx context.Context, n names, h *Host, root, share string) error {
	if err := n.makeMntnsDir(); err != nil {
		return err
	}
	upper, work := h.Dir+"/rootfs/upper", h.Dir+"/rootfs/work"
	for _, d := range []string{upper, work, h.Root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(h.MountNS, nil, 0o644); err != nil {
		return err
	}
	script := "set -e; mount -t overlay overlay -o " +
		shellQuote("lowerdir="+root+",upperdir="+upper+",workdir="+work) + " " + shellQuote(h.Root)
	for _, d := range arm64Mounts(share) {
		in := shellQuote(h.Root + d)
		script += "; mkdir -p " + in + "; mount --rbind " + shellQuote(d) + " " + in
	}
	if err := n.sh(ctx, "unshare", "--mount="+h.MountNS, "--propagation", "private", "--", "/bin/sh", "-c", script); err != nil {
		return fmt.Errorf("testbed: make the arm64 root of %s: %w", h.Name, err)
	}
	return nil
}

// makeMntnsDir makes DIR/mntns a private mount of its own: a mount namespace can only be
// kept by a bind mount outside shared propagation (else it could come to hold itself).
func (n names) makeMntnsDir() error {
	d := n.mntnsDir()
	if isMountPoint(d) {
		return nil
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount(d, d, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("testbed: bind %s: %w", d, err)
	}
	if err := syscall.Mount("", d, "", syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("testbed: make %s private: %w", d, err)
	}
	return nil
}

func isMountPoint(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && unescapeMount(f[4]) == dir {
			return true
		}
	}
	return false
}

// arm64Enter is the argv, after nsenter's options, that moves into an arm64 host's root:
// chroot into it, then its own /bin/sh (arm64, under qemu) returns to the caller's
// working directory ($PWD, which exec.Cmd sets with Dir) when the root has it, as a
// host of the machine's own keeps its working directory.
func arm64Enter(h *Host) []string {
	return []string{"--mount=" + h.MountNS, "--", "/usr/sbin/chroot", h.Root,
		"/bin/sh", "-c", `cd "${PWD:-/}" 2>/dev/null || cd /; exec "$@"`, "shoal-testbed-" + h.Name}
}

// setupArm64 records in st the root file system and agent of arm64 hosts, and checks
// both when cfg has arm64 hosts: an error wrapping [ErrNoArm64] when the machine cannot
// run them, or when the testbed's agent has no arm64 build.
func setupArm64(ctx context.Context, st *state, cfg Config) error {
	st.Arm64Root = cfg.Arm64Root
	if st.Arm64Root == "" {
		st.Arm64Root = DefaultArm64Root
	}
	if st.AgentBinary != "" {
		st.Arm64Agent = cfg.Arm64Agent
		if st.Arm64Agent == "" {
			st.Arm64Agent = arm64Agent(st.AgentBinary)
		}
	}
	if !slices.Contains(cfg.Arch, ArchArm64) {
		return nil
	}
	if err := CheckArm64(st.Arm64Root); err != nil {
		return err
	}
	if st.Arm64Agent == "" {
		return nil
	}
	// A static linux/arm64 build runs here through binfmt_misc as it does in the root.
	if _, err := probeAgent(ctx, st.Arm64Agent); err != nil {
		return fmt.Errorf("%w: the agent of arm64 hosts: %v (make arm64-agent builds bin/arm64/shoal)", ErrNoArm64, err)
	}
	return nil
}
