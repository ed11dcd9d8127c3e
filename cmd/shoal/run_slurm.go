package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/jobstore"
	"shoal/internal/slurm"
)

// Timeouts of the agents `shoal run` starts in a Slurm allocation.
const (
	// slurmAgentsTimeout bounds the wait for every allocated node's agent to join.
	slurmAgentsTimeout = time.Minute
	// slurmStopTimeout bounds how long the agents take to leave at the end.
	slurmStopTimeout = 15 * time.Second
)

// runInAllocation runs the job inside the Slurm allocation alloc, where no agent
// answers: it starts one agent on each allocated node (slurm.AgentStep, one srun
// step), waits until they have all joined, runs the job over them as runOnCluster does
// for any cluster, and stops the agents at the end. It returns shoal run's exit code.
func runInAllocation(alloc slurm.Allocation, f runFlags, program string, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: cannot find the shoal executable: %v\n", err)
		return exitFailure
	}
	var store durable.Store
	if f.durable != "" {
		// Before the agents start: a DIR that cannot be written, a bucket that cannot
		// be read, or another job's epoch is the user's to fix.
		var code int
		if store, code = openDurable(ctx, f, program, args, stderr); code >= 0 {
			return code
		}
	}
	if f.durable != "" && startedByShell() {
		fmt.Fprintln(stderr, "shoal: warning: the batch script's shell runs shoal run: Slurm's warning signal (--signal=B:TERM) ends the shell, not shoal run; write `exec shoal run …` (docs/slurm.md)")
	}
	nodes, err := slurm.Hostnames(ctx, alloc.NodeList)
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: Slurm job %s: %v\n", alloc.JobID, err)
		return exitFailure
	}
	addr, err := slurm.NodeAddr(ctx, nodes[0])
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: Slurm job %s: %v\n", alloc.JobID, err)
		return exitFailure
	}
	step := slurm.AgentStep{Alloc: alloc, Shoal: self, FirstNode: nodes[0], FirstAddr: addr, Port: slurm.AgentPort(alloc.JobID)}
	if here := os.Getenv("SLURMD_NODENAME"); here != "" {
		// The batch host: its agent passes Slurm's SIGTERM on to this process.
		step.Run = fmt.Sprintf("%s:%d", here, os.Getpid())
	}
	// This node's copy of the agents' log, and nothing else: the secret travels to the
	// agents in srun's environment (slurm.SecretEnv).
	logDir, err := slurm.PrivateDir(os.TempDir(), slurm.DirName(alloc.JobID)+"-run-")
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return exitFailure
	}
	logPath := filepath.Join(logDir, "agents.log")
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "shoal run: %v\n", err)
		return exitFailure
	}
	defer log.Close()
	secret := agent.NewSecret()
	argv := step.Argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), slurm.SecretEnv+"="+string(secret))
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a Ctrl-C at the terminal is shoal run's to handle (the
	// job is cancelled, then the agents stop), not srun's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !f.quiet {
		fmt.Fprintf(stdout, "shoal: Slurm job %s: starting an agent on each of its %d nodes (%s; log %s)\n",
			alloc.JobID, len(nodes), alloc.NodeList, logPath)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "shoal run: start the agents: %v\n", err)
		return exitFailure
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c := api.NewClient(step.APIAddr(), secret)
	code := awaitAgents(ctx, c, len(nodes), exited, logPath, f.quiet, stdout, stderr)
	var dr *durableRun
	var ar *allocRun
	if store != nil {
		dr = &durableRun{secret: secret, store: store, loc: f.durable, endpoint: f.durableEndpoint, rate: f.durableRate,
			quiet: f.quiet, stdout: stdout, slurmJob: alloc.JobID, restarts: alloc.Restarts}
		ar = &allocRun{alloc: alloc, durable: dr}
	}
	if code < 0 {
		// runOnCluster catches the interrupts from here on.
		stop()
		code = runOnCluster(c, f, program, args, stdout, stderr, dr, ar)
	}
	// Nothing from here on may be cut short by a SIGTERM: the requeue below sends
	// one, the time limit another, and an agent that did not leave passes on the
	// one stopAgents sends it.
	signal.Ignore(syscall.SIGTERM)
	held := uint64(0)
	if ar != nil {
		held = ar.held
	}
	if held > 0 {
		code = exitHeld
	}
	clean := stopAgents(c, secret, cmd, exited)
	if held > 0 {
		requeue(alloc, held, f.durable, stdout, stderr)
	}
	if !clean || (code != exitOK && code != exitHeld) {
		fmt.Fprintf(stderr, "shoal: the agents' log is %s\n", logPath)
		return code
	}
	os.RemoveAll(logDir)
	return code
}

// requeue puts the Slurm job of alloc, held with epoch kept in dir, back into the
// queue when Slurm allows it (slurm.Job.Requeueable): its next run resumes from that
// epoch. Otherwise it says how to resume by hand.
func requeue(alloc slurm.Allocation, epoch uint64, dir string, stdout, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	job, err := slurm.ShowJob(ctx, alloc.JobID)
	why := job.Requeueable()
	if err != nil {
		why = err.Error()
	}
	if why != "" {
		fmt.Fprintf(stdout, "shoal: epoch %d kept in %s; not requeueing Slurm job %s (%s): a shoal run with --durable %s resumes from it\n",
			epoch, dir, alloc.JobID, why, dir)
		return
	}
	fmt.Fprintf(stdout, "shoal: epoch %d kept in %s; requeueing Slurm job %s, whose next run resumes from it\n", epoch, dir, alloc.JobID)
	if err := slurm.Requeue(ctx, alloc.JobID); err != nil {
		fmt.Fprintf(stderr, "shoal: %v; a shoal run with --durable %s resumes from epoch %d\n", err, dir, epoch)
	}
}

// startedByShell reports whether shoal run's parent is the shell running a Slurm
// batch script (slurmstepd runs it from a file named slurm_script): Slurm's warning
// signal (--signal=B:TERM) then reaches the shell, which dies of it, not shoal run.
func startedByShell() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", os.Getppid()))
	return err == nil && strings.Contains(string(b), "slurm_script")
}

// awaitAgents waits until c's agent sees n agents alive and the job store's leader
// with all the voters it wants. It returns -1 to go on: all joined and settled, or at
// least the first agent answers after slurmAgentsTimeout (a node lost while they start
// is what the job would survive later anyway; a line says so). Otherwise the exit code,
// having said why: the step ended, nobody answered, or an interrupt.
func awaitAgents(ctx context.Context, c *api.Client, n int, exited <-chan struct{}, logPath string, quiet bool, stdout, stderr io.Writer) int {
	start := time.Now()
	deadline := start.Add(slurmAgentsTimeout)
	alive, lastErr := 0, error(nil)
	for {
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		nodes, err := c.Nodes(nctx)
		cancel()
		if err == nil {
			alive = 0
			leaders, voters := 0, 0
			for _, nd := range nodes {
				if nd.State == "alive" {
					alive++
				}
				switch nd.Role {
				case "leader":
					leaders++
					voters++
				case "voter":
					voters++
				}
			}
			// The job store settled too: its leader has made the voters it wants
			// of the nodes that joined at once, so that the job's start is not
			// interrupted by an election.
			if alive >= n && leaders == 1 && voters >= jobstore.VoterTarget(alive) {
				if !quiet {
					fmt.Fprintf(stdout, "shoal: %d agents up in %.1f s\n", alive, time.Since(start).Seconds())
				}
				return -1
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			switch {
			case alive >= n:
				fmt.Fprintf(stderr, "shoal: the %d agents' job store has not settled in %v; going on (log %s)\n", alive, slurmAgentsTimeout, logPath)
				return -1
			case alive > 0:
				fmt.Fprintf(stderr, "shoal: only %d of %d agents joined in %v; running on those (log %s)\n", alive, n, slurmAgentsTimeout, logPath)
				return -1
			}
			fmt.Fprintf(stderr, "shoal run: the agents did not start in %v: %s; last lines of %s:\n%s\n",
				slurmAgentsTimeout, errorLine(lastErr), logPath, tailFile(logPath, 10))
			return exitFailure
		}
		select {
		case <-exited:
			fmt.Fprintf(stderr, "shoal run: the agents' srun step ended before they all joined; last lines of %s:\n%s\n", logPath, tailFile(logPath, 10))
			return exitFailure
		case <-ctx.Done():
			fmt.Fprintln(stderr, "shoal run: interrupted while the agents started")
			return exitCancelled
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stopAgents ends the agents' step and reports whether every live agent left
// cleanly. Every agent is asked to leave through its API (it then removes its data
// dir, and its task ends). srun still waits for the tasks of nodes lost on the way,
// which will never report, so once the live agents are gone it gets SIGTERM, then
// SIGKILL, which Slurm turns into the end of the step.
func stopAgents(c *api.Client, secret []byte, cmd *exec.Cmd, exited <-chan struct{}) (clean bool) {
	ctx, cancel := context.WithTimeout(context.Background(), slurmStopTimeout)
	defer cancel()
	nodes, err := c.Nodes(ctx)
	clean = err == nil
	results := make(chan error)
	asked := 0
	for _, nd := range nodes {
		if nd.State != "alive" || nd.API == "" {
			continue
		}
		asked++
		go func(addr string) {
			_, err := api.NewClient(addr, secret).Leave(ctx, slurmStopTimeout/2)
			results <- err
		}(nd.API)
	}
	for range asked {
		if err := <-results; err != nil {
			clean = false
		}
	}
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			cmd.Process.Signal(sig)
		}
		select {
		case <-exited:
			return clean
		case <-time.After(2 * time.Second):
		}
	}
	<-exited
	return clean
}

// tailFile is the last n lines of a file, indented, or a note that it cannot be read.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// allocationOf returns the Slurm allocation shoal run runs in, or false outside one
// (or when its environment cannot be read, which note says).
func allocationOf(note io.Writer) (slurm.Allocation, bool) {
	a, err := slurm.FromEnv(os.Getenv)
	if errors.Is(err, slurm.ErrNotAllocation) {
		return a, false
	}
	if err != nil {
		fmt.Fprintf(note, "shoal: %v; running as outside Slurm\n", err)
		return a, false
	}
	return a, true
}
