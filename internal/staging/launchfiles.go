package staging

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"shoal/internal/engine"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/launch"
	"shoal/internal/node"
	"shoal/internal/overlay"
	"shoal/internal/place"
	"shoal/internal/userdir"
)

// Host is the node that launches a job, as its launch files name it.
type Host struct {
	Node     string // its name
	DataDir  string // its agent's data dir, with the agent's socket
	RunRoot  string // the directories of the runs of its jobs, the agent's (DATA/coord)
	ShoalBin string // the shoal executable (rank wrapper and rsh agent)
}

// LaunchFiles writes the hostfile, rankfile and rsh node map of a launch of
// job info placed as p over the live nodes, and describes it: the ranks get
// env, then the job's --env. They are written into the job's run directory,
// which is the agent's (under h.RunRoot), as files of the job's owner, whose
// launcher reads them: each one new, renamed over the last launch's, never
// written through. It returns the launch and the launcher's environment.
func LaunchFiles(h Host, info job.Job, p place.Placement, live map[string]node.Node, env []string) (engine.Launch, []string, error) {
	runDir := filepath.Join(h.RunRoot, info.ID)
	uid, gid := -1, -1
	if o := info.Spec.Owner; o != nil {
		uid, gid = o.UID, o.GID
	}
	write := func(path string, content []byte, perm os.FileMode) error {
		return userdir.Tree{Base: h.RunRoot}.WriteFileFor(path, content, perm, uid, gid)
	}
	cores := map[string]int{}
	rshNodes := map[string]string{}
	for name, n := range live {
		cores[name] = n.Cores
		rshNodes[name] = n.API
		if host, _, err := net.SplitHostPort(n.Addr); err == nil {
			rshNodes[host] = n.API
		}
	}
	hostfile := filepath.Join(runDir, "hostfile")
	rankfile := filepath.Join(runDir, "rankfile")
	nodesFile := filepath.Join(runDir, "rsh-nodes.json")
	nodesJSON, _ := json.Marshal(rshNodes)
	hosts := place.Hostfile(p)
	if info.Spec.Engine == "mpich" {
		hosts = place.MachineFile(p) // Hydra places by the file alone: it has no rankfile
	}
	for path, content := range map[string][]byte{
		hostfile: []byte(hosts), rankfile: []byte(place.Rankfile(p, cores)), nodesFile: nodesJSON,
	} {
		if err := write(path, content, 0o600); err != nil {
			return engine.Launch{}, nil, err
		}
	}
	arch := ""
	for _, n := range live {
		if arch != "" && n.Arch != arch {
			arch = place.Mixed // a world of several sets (--mix-arch)
			break
		}
		arch = n.Arch
	}
	wrapper := RankWrapper(h.ShoalBin)
	if arch != "" && arch != runtime.GOARCH {
		wrapper = foreignRankWrapper
	}
	wrapper = append(wrapper, StageArgs(info.Spec, arch)...)
	wrapper = append(wrapper, "--")
	over := false
	for name, n := range p.Counts() {
		over = over || n > cores[name]
	}
	env = append(env, EnvList(info.Spec.Env)...)
	// The coordinator removes epochs once newer ones are durable; a
	// rank must not remove one that is complete among the ranks but not yet copied,
	// nor the other ranks' copies its node holds.
	env = append(env, "SHOAL_KEEP_EPOCHS=1")
	rsh := rshAgent(h.ShoalBin)
	counts := p.Counts()
	l := engine.Launch{
		NRanks: len(p), Hosts: len(counts), LocalRanks: counts[h.Node],
		Program: info.Spec.Argv[0], Args: info.Spec.Argv[1:],
		Wrapper: wrapper, Hostfile: hostfile, Rankfile: rankfile,
		RshAgent: strings.Join(rsh, " "), Oversubscribe: over, Env: env,
	}
	if self, ok := live[h.Node]; ok {
		l.LocalAddr, _, _ = net.SplitHostPort(self.Addr)
	}
	if flag := info.Spec.OverlayFlag(); flag != "" {
		if err := overlayLaunch(&l, info.Spec.Engine, flag, h.Node, p, live); err != nil {
			return engine.Launch{}, nil, err
		}
	}
	if info.Spec.Engine == "mpich" {
		// Hydra's -launcher-exec names one executable and takes no arguments.
		script := filepath.Join(runDir, "rsh")
		words := make([]string, len(rsh))
		for i, w := range rsh {
			words[i] = launch.QuoteWord(w)
		}
		text := "#!/bin/sh\nexec " + strings.Join(words, " ") + " \"$@\"\n"
		if err := write(script, []byte(text), 0o700); err != nil {
			return engine.Launch{}, nil, err
		}
		l.RshAgent = script
	}
	// shoal rsh starts the daemons through this node's agent socket, as the
	// launcher's user: neither it nor any rank is given the cluster secret.
	launcherEnv := []string{
		"SHOAL_NODE_DATA=" + h.DataDir,
		"SHOAL_JOB=" + info.ID,
		"SHOAL_RSH_NODES=" + nodesFile,
		"SHOAL_AGENT_SOCKET=" + filepath.Join(h.DataDir, agentSocket),
		launch.EnvAgentBin + "=" + h.ShoalBin,
	}
	if o := info.Spec.Owner; o != nil {
		// The launcher, and the ranks it starts on this node, run as the job's
		// owner.
		l.RunAs = launch.Credential(o)
		launcherEnv = append(launcherEnv, launch.UserEnv(o)...)
	}
	return l, launcherEnv, nil
}

// ErrNoOverlay means a job runs on the overlay (--mpi-overlay or
// --mpi-encrypt) and a node of its launch has
// no overlay (its agent was started without --overlay).
var ErrNoOverlay = errors.New("staging: node without the overlay")

// overlayLaunch points l's MPI at the overlay's device for a job run with
// flag, --mpi-overlay or --mpi-encrypt: Open MPI's daemons (the coordinator's callback included) and
// ranks talk over shoal0 only; MPICH's ranks use UCX on shoal0 (shared memory
// within a node stays theirs: UCX_NET_DEVICES names network devices only),
// and Hydra's proxies call the coordinator back at its overlay address. Given
// on the command line, Open MPI's settings win over the OMPI_MCA_ environment
// a launcher or agent may have (the testbed's MPIEnv).
func overlayLaunch(l *engine.Launch, mpi, flag, coordinator string, p place.Placement, live map[string]node.Node) error {
	self := live[coordinator]
	for name := range p.Counts() {
		if live[name].Overlay == "" {
			return fmt.Errorf("%w: the job runs with %s and node %s has no overlay (start its agent with --overlay auto)", ErrNoOverlay, flag, name)
		}
	}
	if self.Overlay == "" {
		return fmt.Errorf("%w: the job runs with %s and its coordinator's node %s has no overlay (start its agent with --overlay auto)", ErrNoOverlay, flag, coordinator)
	}
	if mpi == "mpich" {
		l.Env = append(l.Env, "UCX_NET_DEVICES="+overlay.DeviceName)
		l.LocalAddr = self.Overlay
		return nil
	}
	if l.MCA == nil {
		l.MCA = map[string]string{}
	}
	l.MCA["btl_tcp_if_include"] = overlay.DeviceName
	l.MCA["oob_tcp_if_include"] = overlay.DeviceName
	return nil
}

// agentSocket is the agent's local socket in the data dir (agent.SocketFile;
// the agent package is built on this one).
const agentSocket = "agent.sock"

// RankWrapper is the command each rank is started through: shoal-rank, the
// wrapper without Go's start-up (cmd/shoal-rank), when it is installed next to
// shoalBin, as make build and make install put it; else `shoal exec-rank`.
// Like shoal itself, it is looked for on this node and run at the same path on
// every node of the launch.
func RankWrapper(shoalBin string) []string { return beside(shoalBin, "shoal-rank", "exec-rank") }

// foreignRankWrapper starts ranks on nodes of another instruction set than
// this one's, whose shoal is another build, wherever it is: the node's own
// agent's, which its launch service names to the daemons it starts (and this
// node's to the ranks the launcher starts here), launch.EnvAgentBin.
var foreignRankWrapper = []string{"/bin/sh", "-c", `exec "$` + launch.EnvAgentBin + `" exec-rank "$@"`, "shoal"}

// rshAgent is the command mpirun starts each daemon through: shoal-rsh, the
// launcher hook without Go's start-up (cmd/shoal-rsh), when it is installed
// next to shoalBin; else `shoal rsh`. It runs on this node only.
func rshAgent(shoalBin string) []string { return beside(shoalBin, "shoal-rsh", "rsh") }

// beside is the executable name next to shoalBin when it is there, else
// shoalBin's subcommand sub.
func beside(shoalBin, name, sub string) []string {
	fast := filepath.Join(filepath.Dir(shoalBin), name)
	if st, err := os.Stat(fast); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
		return []string{fast}
	}
	return []string{shoalBin, sub}
}

// StageArgs are the --stage arguments of `shoal exec-rank` and `shoal
// exec-task` that place the job's files in a node's job directory: the program
// executable, the other files readable, unless their mode says otherwise; those
// of the node's instruction set, arch, or for a world of several (place.Mixed)
// every build, each named with its set for the ranks to choose theirs.
func StageArgs(spec job.Spec, arch string) []string {
	var args []string
	staged, tagged := spec.FilesFor(arch), false
	if arch == place.Mixed {
		staged, tagged = spec.Files, true
	}
	for _, f := range staged {
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
			if f.Name == spec.Argv[0] {
				mode = 0o755
			}
		}
		stage := files.Stage{Name: f.Name, Sum: f.SHA256, Mode: mode}
		if tagged {
			stage.Arch = f.Arch
		}
		args = append(args, "--stage", stage.String())
	}
	return args
}

// EnvList is env as KEY=VALUE words, sorted by key: what a rank's environment
// gets of the job's --env.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
