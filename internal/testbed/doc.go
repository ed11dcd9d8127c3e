// Package testbed builds real hosts out of network namespaces on one Linux machine, so
// that Shoal's agents, Open MPI daemons and ranks run on separate "machines" in tests and
// demos.
//
// A host nK (n1, n2, …) of testbed instance I is:
//   - a network namespace shoal<I>-nK (see `ip netns list`) whose eth0 has address
//     10.77.I.(10+K)/24 and whose other end, the link shoal<I>-nK, is a port of the bridge
//     shoalbr<I> (address 10.77.I.1/24 in the machine's own namespace);
//   - a UTS namespace whose hostname is nK, kept alive by a bind mount at DIR/nK/uts;
//   - a temp dir DIR/nK/tmp (TMPDIR of every process in the host) and a data dir
//     DIR/nK/data, where DIR is /tmp/shoal-testbed for instance 0 and
//     /tmp/shoal-testbed-I otherwise;
//   - a cgroup shoal-testbed[-I]/nK holding every process started in the host, with an
//     optional CPU quota;
//   - an optional tc bandwidth limit (tbf, both directions of the host's link);
//   - with a [Profile] ([Config].Profile): wifi, a delay line in user space on its link
//     ([RunLink]): delay, jitter and loss each way, its bandwidth limit from the profile;
//     android, a seccomp filter on its processes that kills SysV IPC callers
//     ([ExecNoSysVIPC]) and a watchdog that kills its processes beyond 32
//     ([RunPhantomKiller]);
//   - when put to sleep ([Bed.Sleep]), its cgroup frozen until its wake time;
//   - with sites ([Config].Sites), membership of site S: its link is a port of the
//     site's bridge shoal<I>-sS instead of shoalbr<I>, and the site's bridge is joined
//     to shoalbr<I> by a veth pair (shoal<I>-sSo – shoal<I>-sSi) with a tbf at
//     [Config].SiteRate on each end, so only traffic between sites is limited, and the
//     hosts of a site share their site's link;
//   - with [Config].Arch arm64, a mount namespace of its own (kept at DIR/mntns/nK) in
//     which an overlay of the cached Debian arm64 root ([DefaultArm64Root]) is mounted at
//     DIR/nK/root, with /proc, /sys, /dev, /tmp and the arm64 agent's directory inside:
//     its processes chroot there and run under qemu-aarch64 through binfmt_misc (arch.go);
//   - unless disabled, a Shoal agent (`shoal agent`), logging to DIR/nK/agent.log;
//   - with [Config].Slurm, instead of the agent, a slurmd (and in n1 slurmctld) of the
//     testbed's Slurm cluster, whose munged and slurm.conf are in DIR/slurm (slurm.go).
//
// Processes run in a host through [Bed.Command] or [Bed.Exec], which enter its
// namespaces with nsenter and give it the environment of [HostEnv] (per-host TMPDIR, the
// host agent's data dir as SHOAL_DATA_DIR, and the Open MPI settings namespace hosts need,
// see [MPIEnv]). [Up], [Bed.Add] and [Bed.StartAgent] return once the agents they start
// are up and see the others alive.
//
// The state of a testbed lives in DIR/state.json, so that separate `shoal testbed`
// invocations and tests see the same hosts; [Open] reads it. [Clean] removes everything
// a testbed instance may have left behind — found from the state file and from a scan for
// its names — and [Up] calls it first, so a crashed run never breaks the next one.
//
// Everything here needs root.
package testbed
