package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes of the shoal command. A job's own exit code passes through unchanged
// when the program ran and exited by itself.
const (
	exitOK       = 0
	exitFailure  = 1 // shoal could not do what was asked; the message says why
	exitUsage    = 2 // bad flags or arguments
	exitRestarts = 3 // the job kept losing ranks: --max-restarts exhausted
	exitNoJob    = 4 // the agent knows no job of that id
	exitEnded    = 5 // cancel, rebalance: the job has ended already
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
	switch {
	case len(args) == 0:
		usage(stdout)
		return exitUsage
	case args[0] == "--version":
		return versionCmd(args[1:], stdout, stderr)
	case args[0] == "help" && len(args) == 2 && !strings.HasPrefix(args[1], "-"):
		// shoal help CMD is shoal CMD --help.
		args = []string{args[1], "--help"}
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		usage(stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "shoal: unknown command %q%s (see 'shoal --help')\n", args[0], didYouMean(args[0], commandNames()))
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

// commandNames is the commands shoal --help lists, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// didYouMean is "; did you mean \"jobs\"?" for the name of names nearest to
// typed, within two edits (a letter added, dropped, changed, or two swapped)
// and fewer edits than typed has letters; "" when none is that near.
func didYouMean(typed string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(typed, n); d < bestD && d < len(typed) {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the optimal string alignment distance between a and b: the
// fewest insertions, deletions, substitutions and swaps of adjacent bytes that
// turn a into b.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: shoal COMMAND [ARGS]\n       shoal --version")
	fmt.Fprintln(w, "\nShoal runs MPI jobs that survive ranks and nodes coming and going.")
	fmt.Fprintln(w, "\nCommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'shoal COMMAND --help' (or 'shoal help COMMAND') for a command's flags.")
	fmt.Fprintln(w, "\nExit codes: 0 success; 1 failure (one line says why); 2 usage error;")
	fmt.Fprintln(w, "4 no such job (jobs, wait, logs, events, cancel, rebalance); 5 the job has")
	fmt.Fprintln(w, "ended already (cancel, rebalance). run and wait give the job's end: the")
	fmt.Fprintln(w, "program's own code when it failed by itself; 3 restarts exhausted; 130 cancelled.")
}
