package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"shoal/internal/agent"
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
// file of mode 0600 in the node's agent data dir, removes Slurm's variables from the
// environment, and runs `shoal agent` there: --init on the first node, --join it on the
// others. The data dir goes when the agent ends.
func slurmAgentCmd(args []string, stdout, stderr io.Writer) int {
	var job, first, firstAddr string
	var port int
	fs := flag.NewFlagSet("slurm-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&job, "job", "", "Slurm job id")
	fs.StringVar(&first, "first", "", "the node whose agent starts the cluster")
	fs.StringVar(&firstAddr, "first-addr", "", "its gossip address HOST:PORT")
	fs.IntVar(&port, "port", 0, "gossip port (API: +1, job store: +2)")
	if err := fs.Parse(args); err != nil || job == "" || first == "" || firstAddr == "" || port <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "shoal slurm-agent: want --job ID --first NODE --first-addr HOST:PORT --port P (shoal run starts it)")
		return exitUsage
	}
	name := os.Getenv("SLURMD_NODENAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	cores := os.Getenv("SLURM_CPUS_ON_NODE")
	dir := slurm.AgentDir(os.Getenv, job)
	secret := slurm.ScrubEnv()
	if len(secret) == 0 {
		fmt.Fprintf(stderr, "shoal slurm-agent: %s: no %s in the environment\n", name, slurm.SecretEnv)
		return exitFailure
	}
	// What a killed run of the same job left (a requeued job has the same id) is of
	// no use: the new cluster starts afresh.
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "shoal slurm-agent: %s: %v\n", name, err)
		return exitFailure
	}
	defer os.RemoveAll(dir)
	secretFile := filepath.Join(dir, agent.SecretFile)
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		fmt.Fprintf(stderr, "shoal slurm-agent: %s: %v\n", name, err)
		return exitFailure
	}
	argv := []string{"--data-dir", dir, "--name", name, "--secret-file", secretFile,
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
	return agentCmd(argv, stdout, stderr)
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
