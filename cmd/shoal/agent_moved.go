package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"

	"shoal/internal/agent"
)

// restartMoved answers [agent.Agent.Moved]: the agent's sockets are bound to an address
// its host no longer has (or announce one), so it stops without leaving and executes
// itself again, same pid, name and data dir, bound to bind and joining the nodes it
// knew alive (the new agent rejoins under the node's name: see agent.MovedFile). It
// returns only if the execution failed.
func restartMoved(a *agent.Agent, bind string, log *slog.Logger) error {
	old, _, _ := net.SplitHostPort(a.GossipAddr())
	peers := a.LivePeers()
	a.Shutdown()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	argv := movedArgs(os.Args, old, bind, peers)
	log.Info("starting again at the host's new address", "argv", strings.Join(argv, " "))
	return fmt.Errorf("execute %s again: %w", exe, syscall.Exec(exe, argv, os.Environ()))
}

// movedArgs is the command line of an agent whose host moved from the address old:
// --bind is bind, --api moves with it when it named old; with peers, --join names
// them instead of what it joined, and --init goes (the cluster exists: the node
// rejoins it). A --bind or --join missing from args (given by --config) is added.
func movedArgs(args []string, old, bind string, peers []string) []string {
	out := []string{args[0]}
	hasBind, hasJoin := false, false
	for i := 1; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || !strings.HasPrefix(arg, "-") {
			out = append(out, arg)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		switch name {
		case "bind", "api", "join":
			if !hasVal && i+1 < len(args) {
				i++
				val = args[i]
			}
		}
		switch {
		case name == "bind":
			hasBind = true
			out = append(out, "--bind", bind)
		case name == "api":
			if h, p, err := net.SplitHostPort(val); err == nil && h == old {
				nh, _, _ := net.SplitHostPort(bind)
				val = net.JoinHostPort(nh, p)
			}
			out = append(out, "--api", val)
		case name == "join":
			hasJoin = true
			if len(peers) > 0 {
				val = strings.Join(peers, ",")
			}
			out = append(out, "--join", val)
		case name == "init" && len(peers) > 0:
		default:
			out = append(out, arg)
		}
	}
	if !hasBind {
		out = append(out, "--bind", bind)
	}
	if !hasJoin && len(peers) > 0 {
		out = append(out, "--join", strings.Join(peers, ","))
	}
	return out
}
