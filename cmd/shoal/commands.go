package main

import (
	"fmt"
	"io"
	"sort"
)

// Exit codes of the shoal command. A job's own exit code passes through unchanged
// when the program ran and exited by itself.
const (
	exitOK       = 0
	exitFailure  = 1 // shoal could not do what was asked; the message says why
	exitUsage    = 2 // bad flags or arguments
	exitRestarts = 3 // the job kept losing ranks: --max-restarts exhausted
	exitNoJob    = 4 // shoal wait, logs, events: the agent knows no job of that id
	// exitCancelled is a job cancelled (shoal run interrupted), as a shell
	// reports a command ended by SIGINT.
	exitCancelled = 130
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
	hidden  bool
}

var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "shoal: unknown command %q (see 'shoal --help')\n", args[0])
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: shoal COMMAND [ARGS]")
	fmt.Fprintln(w, "\nShoal runs MPI jobs that survive ranks and nodes coming and going.")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'shoal COMMAND --help' for a command's flags.")
	fmt.Fprintln(w, "\nExit codes: 0 success; 1 failure (one line says why); 2 usage error;")
	fmt.Fprintln(w, "4 no such job (wait, logs, events). run and wait give the job's end: the")
	fmt.Fprintln(w, "program's own code when it failed by itself; 3 restarts exhausted; 130 cancelled.")
}
