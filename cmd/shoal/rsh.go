package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/job"
	"shoal/internal/launch"
)

func init() {
	register("rsh", command{
		summary: "the launcher hook MPI runs instead of ssh (not for people)",
		run:     rshCmd,
		hidden:  true,
	})
}

// exitRsh is what shoal rsh exits with when it fails itself: 255, as ssh does,
// so that mpirun reports a launch failure rather than a daemon's exit code.
const exitRsh = 255

const rshUsage = `Usage: shoal rsh [-x] [-q] [-T] [-n] NODE WORDS...

What Open MPI runs instead of ssh to start its daemon on NODE:
    mpirun --mca plm_rsh_agent "/path/to/shoal rsh" ...
The coordinator of a job sets this up; people do not run it by hand.

WORDS are joined with spaces into one command line, as ssh does. NODE's
agent runs it only if it is exactly one MPI daemon of the node's own MPI
installation (orted, prted, hydra_pmi_proxy: the file, not just the name)
with literal arguments (in Open MPI's subshell that sources ./.profile for a
user whose login shell is sh, dash or ksh: the daemon alone is run, and no
.profile), and executes the daemon itself, without a shell, for
a job its coordinator has granted on NODE (POST /v1/grants). shoal rsh relays its own stdin, stdout and stderr, forwards
SIGINT, SIGTERM and SIGHUP, and exits with the daemon's exit code (128 + N
when signal N ended it). If shoal rsh dies, the agent kills the daemon and
everything it started.

Environment:
  SHOAL_RSH_NODES    JSON file: an object mapping each node name and node IP
                     to the API address "IP:PORT" of its agent (the
                     coordinator writes it)
  SHOAL_AGENT_SOCKET the local agent's socket: the launch goes through that
                     agent, which checks that this process's user owns the job
                     (the coordinator sets it; no secret is needed)
  SHOAL_SECRET_FILE  else, the cluster secret file: the launch goes to NODE's
                     agent directly
  SHOAL_JOB          the job the daemon belongs to

The ssh options -x, -q and -T are accepted and ignored; -n sends no stdin.
Exit status 255: shoal rsh itself failed (unknown node, missing environment,
agent unreachable, launch refused); the one-line reason is on stderr.

shoal-rsh, installed next to shoal, is this hook without the Go runtime's
start-up; the coordinator uses it when it is there.
`

func rshCmd(args []string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shoal rsh: "+format+"\n", a...)
		return exitRsh
	}
	// A killed mpirun must not leave this relay behind: one waiting on a cut node's
	// connection would hold the launcher's output pipe open for minutes.
	if code, ok := dieWithParent(stderr); !ok {
		return code
	}
	noStdin := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-h", "-help", "--help":
			fmt.Fprint(stdout, rshUsage)
			return exitOK
		case "-x", "-q", "-T":
		case "-n":
			noStdin = true
		default:
			return fail("unknown option %q (see 'shoal rsh --help')", args[0])
		}
		args = args[1:]
	}
	if len(args) < 2 {
		return fail("want NODE and a command (see 'shoal rsh --help')")
	}
	node, words := args[0], args[1:]
	if i := strings.LastIndexByte(node, '@'); i >= 0 { // user@node, as for ssh
		node = node[i+1:]
	}
	addr, err := rshNodeAddr(node)
	if err != nil {
		return fail("%v", err)
	}
	// Through the local agent's socket, as this process's user (the job's
	// owner): that agent checks the job is theirs and passes the launch on.
	// With a secret file instead, straight to the node's agent.
	var client *api.Client
	to := addr
	if sock := os.Getenv("SHOAL_AGENT_SOCKET"); sock != "" {
		client = api.NewLocalClient(sock)
	} else if secretFile := os.Getenv("SHOAL_SECRET_FILE"); secretFile != "" {
		secret, err := agent.ReadSecret(secretFile)
		if err != nil {
			return fail("%s", errorLine(err))
		}
		client, to = api.NewClient(addr, secret), ""
	} else {
		return fail("neither $SHOAL_AGENT_SOCKET nor $SHOAL_SECRET_FILE is set: the coordinator sets the first")
	}
	jobID := os.Getenv("SHOAL_JOB")
	if !job.ValidID(jobID) {
		return fail("$SHOAL_JOB %q: want the job id, 1 to 63 bytes of [A-Za-z0-9._-]", jobID)
	}

	// Signals are caught from here on, so that none is lost between the
	// launch and the relay: they are forwarded once the daemon runs.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type launched struct {
		conn io.ReadWriteCloser
		err  error
	}
	res := make(chan launched, 1)
	go func() {
		conn, err := client.Launch(ctx, api.LaunchRequest{Job: jobID, Argv: words, To: to})
		res <- launched{conn, err}
	}()
	var conn io.ReadWriteCloser
	select {
	case r := <-res:
		if r.err != nil {
			return fail("node %s: %s", node, errorLine(r.err))
		}
		conn = r.conn
	case s := <-sigs: // killed before the daemon started: nothing to forward to
		cancel()
		if r := <-res; r.conn != nil {
			r.conn.Close()
		}
		return 128 + int(s.(syscall.Signal))
	}
	relay := launch.Relay{Stdout: stdout, Stderr: stderr, Signals: sigs}
	if !noStdin {
		relay.Stdin = os.Stdin
	}
	exit, err := relay.Run(conn)
	if err != nil {
		return fail("node %s: %v", node, err)
	}
	return exit.ExitCode()
}

// rshNodeAddr looks node up in the $SHOAL_RSH_NODES file.
func rshNodeAddr(node string) (string, error) {
	file := os.Getenv("SHOAL_RSH_NODES")
	if file == "" {
		return "", errors.New("$SHOAL_RSH_NODES is not set: the coordinator sets it to a JSON file mapping node names and IPs to agent API addresses")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("$SHOAL_RSH_NODES: %v", err)
	}
	var nodes map[string]string
	if err := json.Unmarshal(b, &nodes); err != nil {
		return "", fmt.Errorf("$SHOAL_RSH_NODES %s: want a JSON object of node → \"IP:PORT\": %v", file, err)
	}
	addr, ok := nodes[node]
	if !ok || addr == "" {
		return "", fmt.Errorf("node %q is not in $SHOAL_RSH_NODES (%s)", node, file)
	}
	return addr, nil
}
