package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/node"
	"shoal/internal/slurm"
)

func init() {
	register("slurm-agent", command{
		summary: "run one node's agent of a Slurm allocation (started by shoal run through srun)",
		run:     slurmAgentCmd,
		hidden:  true,
	})
}

// slurmJoinTimeout bounds how long an agent of an allocation waits for the first
// node's agent to listen before it gives up.
const slurmJoinTimeout = time.Minute

// slurmAgentCmd is one task of the srun step `shoal run` starts inside an allocation
// (slurm.AgentStep): it takes the allocation's secret out of the environment into a
// file of mode 0600 in a new directory of its own (slurm.MakeNodeDir), removes Slurm's
// variables from the environment, and runs `shoal agent` with its data dir there:
// --init on the first node, --join it on the others. The directory goes when the agent
// ends.
func slurmAgentCmd(args []string, stdout, stderr io.Writer) int {
	var job, first, firstAddr, run string
	var port int
	fs := flag.NewFlagSet("slurm-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&job, "job", "", "Slurm job id")
	fs.StringVar(&first, "first", "", "the node whose agent starts the cluster")
	fs.StringVar(&firstAddr, "first-addr", "", "its gossip address HOST:PORT")
	fs.IntVar(&port, "port", 0, "gossip port (API: +1, job store: +2)")
	fs.StringVar(&run, "run", "", "where shoal run runs, NODE:PID, when on a node of the allocation")
	if err := fs.Parse(args); err != nil || job == "" || first == "" || firstAddr == "" || port <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "shoal slurm-agent: want --job ID --first NODE --first-addr HOST:PORT --port P (shoal run starts it)")
		return exitUsage
	}
	name := os.Getenv("SLURMD_NODENAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	cores := os.Getenv("SLURM_CPUS_ON_NODE")
	restarts, _ := strconv.Atoi(os.Getenv("SLURM_RESTART_COUNT"))
	base := slurm.Base(os.Getenv) // before ScrubEnv takes SLURM_TMPDIR away
	secret := slurm.ScrubEnv()
	if len(secret) == 0 {
		fmt.Fprintf(stderr, "shoal slurm-agent: %s: no %s in the environment\n", name, slurm.SecretEnv)
		return exitFailure
	}
	// A new directory of this run's: what a killed run of the same job left (a
	// requeued job has the same id) is removed, the new cluster starts afresh.
	nd, err := slurm.MakeNodeDir(base, job, []byte(secret+"\n"))
	if err != nil {
		fmt.Fprintf(stderr, "shoal slurm-agent: %s: %v\n", name, err)
		return exitFailure
	}
	defer os.RemoveAll(nd.Dir)
	argv := []string{"--data-dir", nd.DataDir, "--name", name, "--secret-file", nd.SecretFile,
		"--bind", net.JoinHostPort("0.0.0.0", strconv.Itoa(port))}
	if n, err := strconv.Atoi(cores); err == nil && n > 0 {
		argv = append(argv, "--cores", cores)
	}
	if name == first {
		argv = append(argv, "--init")
	} else {
		// One srun starts every agent at once: the first may not listen yet.
		if err := waitListening(firstAddr, slurmJoinTimeout); err != nil {
			fmt.Fprintf(stderr, "shoal slurm-agent: %s: the agent of %s: %v\n", name, first, err)
			return exitFailure
		}
		argv = append(argv, "--join", firstAddr)
	}
	runNode, pidText, _ := strings.Cut(run, ":")
	runPID, _ := strconv.Atoi(pidText)
	if runNode != "" && runNode != name {
		stop := make(chan struct{})
		defer close(stop)
		go watchOrphan(orphanWatch{dir: nd.DataDir, self: name, runNode: runNode, job: job, restarts: restarts}, stop, stderr)
	}
	return runAgent(argv, termPasser(runNode == name, runPID), stdout, stderr)
}

// orphanGrace is how long shoal run's node must have been dead before an agent ends
// the Slurm job it leaves behind (watchOrphan).
const orphanGrace = 3 * time.Second

// orphanWatch is what watchOrphan needs to know.
type orphanWatch struct {
	dir      string // this agent's data dir
	self     string // this node
	runNode  string // the node shoal run runs on, the batch host
	job      string // the Slurm job id
	restarts int    // SLURM_RESTART_COUNT of this run of it
}

// watchOrphan ends the Slurm job when shoal run's node is lost. The batch script dies
// with its node, but under --no-kill Slurm keeps the job running on the nodes left,
// agents included, with nothing to end it before its time limit (Slurm 22.05 logs
// "batch step received … This should never happen"). Once the node has been dead
// orphanGrace and Slurm has given up on it too (DOWN or not responding, after
// SlurmdTimeout), the live agent of the lowest name requeues the job when Slurm allows
// (slurm.Job.Requeueable), so that its next run resumes from --durable DIR, and
// cancels it otherwise. It checks first that the job is still this run (RUNNING, the
// same restart count, the lost node its batch host): a node that left at the job's
// end, or a job requeued already, is left alone. It returns once it has acted, or
// when stop is closed.
func watchOrphan(w orphanWatch, stop <-chan struct{}, stderr io.Writer) {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var c *api.Client
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if c == nil {
			addr, secret, err := agent.FindLocal(w.dir)
			if err != nil {
				continue // not listening yet
			}
			c = api.NewClient(addr, secret)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		nodes, err := c.Nodes(ctx)
		cancel()
		if err != nil || !orphaned(nodes, w.self, w.runNode, time.Now()) {
			continue
		}
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		done := endOrphan(ctx, w, log)
		cancel()
		if done {
			return
		}
	}
}

// orphaned reports whether nodes, as agent self sees them at now, show runNode dead
// for orphanGrace while self is the live node of the lowest name, and not leaving.
func orphaned(nodes []node.Node, self, runNode string, now time.Time) bool {
	lost := false
	for _, n := range nodes {
		switch {
		case n.Name == runNode:
			lost = n.State == "dead" && now.Sub(n.Since) >= orphanGrace
		case n.Name == self:
			if n.State != "alive" || n.Leaving {
				return false
			}
		case n.State == "alive" && n.Name < self:
			return false
		}
	}
	return lost
}

// endOrphan requeues or cancels Slurm job w.job, whose batch host w.runNode is lost,
// if it is still the run this agent belongs to, once Slurm too has given up on that
// node: until then Slurm could place the requeued job on it again. It reports whether
// there is nothing left to do.
func endOrphan(ctx context.Context, w orphanWatch, log *slog.Logger) (done bool) {
	job, err := slurm.ShowJob(ctx, w.job)
	switch {
	case err != nil:
		log.Warn("shoal run's node is lost, and Slurm does not answer", "node", w.runNode, "err", err)
		return false
	case job.State != "RUNNING" || job.Restarts != w.restarts || job.BatchHost != w.runNode:
		return true
	}
	if lost, err := slurm.NodeLost(ctx, w.runNode); err != nil || !lost {
		return false
	}
	if why := job.Requeueable(); why != "" {
		log.Warn("shoal run's node is lost: cancelling the Slurm job, which cannot be requeued", "node", w.runNode, "job", w.job, "why", why)
		err = slurm.Cancel(ctx, w.job)
	} else {
		log.Warn("shoal run's node is lost: requeueing the Slurm job; its next run resumes from --durable DIR", "node", w.runNode, "job", w.job)
		err = slurm.Requeue(ctx, w.job)
	}
	if err != nil {
		log.Warn("ending the Slurm job left without its batch script", "job", w.job, "err", err)
	}
	return true
}

// termPasser is how an agent answers SIGTERM, given whether shoal run runs on its node,
// as process pid. Slurm sends SIGTERM to every task of the job's steps when it
// preempts the job (with a GraceTime) or cancels it, and only cancels signal the batch
// script too: the agent on shoal run's node passes the signal on to shoal run, which
// holds the job (--durable) or cancels it, then stops the agents. No agent leaves by
// itself: the agents keep the checkpoints the hold needs. Ranks, which Slurm signals
// as well, may die of it; the job then restarts from its newest epoch first.
func termPasser(runsHere bool, pid int) func(*slog.Logger) {
	if !runsHere || pid <= 0 {
		return func(log *slog.Logger) {
			log.Info("SIGTERM from Slurm: staying until shoal run stops the agents")
		}
	}
	return func(log *slog.Logger) {
		if !sameExecutable(pid) {
			log.Warn("SIGTERM from Slurm: shoal run is gone; staying until Slurm ends the step", "pid", pid)
			return
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			log.Warn("SIGTERM from Slurm: cannot pass it on to shoal run", "pid", pid, "err", err)
			return
		}
		log.Info("SIGTERM from Slurm: passed on to shoal run, which holds or cancels the job", "pid", pid)
	}
}

// sameExecutable reports whether process pid runs this process's executable: a pid
// of shoal run's that a later process took is not signalled.
func sameExecutable(pid int) bool {
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return false
	}
	other, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && other == self
}

// waitListening waits until addr accepts TCP connections.
func waitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer after %v: %v", addr, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
