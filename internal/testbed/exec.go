package testbed

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// prefix is the argv that runs the argv after it inside host h: a shell that moves
// itself into the host's cgroups before anything can fork (and reads the S3 server's
// settings, with Config.S3: from a file, so that its secret is in no argv), then
// nsenter into the host's network and UTS namespaces (and, for an arm64 host, its mount namespace and root: see
// [arm64Enter]), then env with [HostEnv]. On a host whose profile denies SysV IPC, a
// `shoal testbed no-sysv-ipc` step before nsenter installs the filter ([ExecNoSysVIPC]).
func prefix(st *state, h *Host) []string {
	var argv []string
	script := ""
	for _, d := range h.Cgroups {
		script += "echo $$ > " + shellQuote(d+"/cgroup.procs") + " && "
	}
	if st.S3Env != "" && (st.S3Hosts == nil || slices.Contains(st.S3Hosts, h.Name)) {
		script += ". " + shellQuote(st.S3Env) + " && "
	}
	if script != "" {
		argv = append(argv, "/bin/sh", "-c", script+`exec "$@"`, "shoal-testbed-"+h.Name)
	}
	if p, ok, _ := lookupProfile(h.Profile); ok && p.NoSysVIPC {
		argv = append(argv, st.LinkBinary, "testbed", "no-sysv-ipc", "--")
	}
	argv = append(argv, "nsenter", "--net="+h.netnsPath(), "--uts="+h.UTS)
	if h.Arch == ArchArm64 {
		argv = append(argv, arm64Enter(h)...)
	} else {
		argv = append(argv, "--")
	}
	argv = append(argv, "env")
	argv = append(argv, HostEnv(*h, st.Instance)...)
	return append(argv, st.Slurm.env()...)
}

// Prefix returns the argv that runs the argv appended to it inside node, with the host's
// cgroups, namespaces and environment: what an ssh replacement for Open MPI's
// plm_rsh_agent needs. It needs nothing from this process.
func (b *Bed) Prefix(node string) ([]string, error) {
	st, err := loadState(b.n)
	if err != nil {
		return nil, err
	}
	h, err := st.host(node)
	if err != nil {
		return nil, err
	}
	return prefix(st, h), nil
}

// Command returns a command that runs argv inside node when started, like
// exec.CommandContext: the caller sets its stdio and starts it. Its process is the
// program itself (every step of the prefix execs), so its exit status and signals are the
// program's.
func (b *Bed) Command(ctx context.Context, node string, argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("testbed: no command")
	}
	p, err := b.Prefix(node)
	if err != nil {
		return nil, err
	}
	full := append(p, argv...)
	return exec.CommandContext(ctx, full[0], full[1:]...), nil
}

// Exec runs argv inside node and returns its standard output. A failure of the program
// is an *exec.ExitError (with its standard error) wrapped with the node's name.
func (b *Bed) Exec(ctx context.Context, node string, argv ...string) ([]byte, error) {
	cmd, err := b.Command(ctx, node, argv...)
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			msg = ": " + strings.TrimSpace(string(ee.Stderr))
		}
		return out, fmt.Errorf("testbed: %s on %s%s: %w", strings.Join(argv, " "), node, msg, err)
	}
	return out, nil
}
