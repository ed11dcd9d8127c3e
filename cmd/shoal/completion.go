package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"shoal/internal/job"
)

func init() {
	register("completion", command{summary: "print a bash or zsh script that completes shoal's commands, flags and job ids", run: completionCmd})
}

const completionUsage = `Usage: shoal completion bash|zsh

Prints a script that completes shoal's commands, their flags, and the ids of
the jobs the local agent knows for the commands that take one (asked with a
1 s timeout; nothing when no agent answers). It is made from the commands'
own flags, so it is as new as this shoal. To use it:

  bash:  source <(shoal completion bash)     # in ~/.bashrc
  zsh:   source <(shoal completion zsh)      # in ~/.zshrc, after compinit
         or: shoal completion zsh > "${fpath[1]}/_shoal"

shoal completion job-ids prints those ids, newest first: the scripts call it.
`

func completionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		if len(args) == 0 {
			fmt.Fprint(stderr, completionUsage)
			return exitUsage
		}
		fmt.Fprintf(stderr, "shoal completion: want one of bash, zsh, got %q (see 'shoal completion --help')\n", args)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, completionUsage)
		return exitOK
	case "bash":
		fmt.Fprint(stdout, bashCompletion(commandSpecs()))
		return exitOK
	case "zsh":
		fmt.Fprint(stdout, zshCompletion(commandSpecs()))
		return exitOK
	case "job-ids":
		return completeJobIDs(stdout)
	}
	fmt.Fprintf(stderr, "shoal completion: unknown shell %q: want bash or zsh (see 'shoal completion --help')\n", args[0])
	return exitUsage
}

// completeJobIDs prints the ids of the jobs the local agent knows, newest
// first, one a line; nothing, and no error, when none answers within a second.
func completeJobIDs(stdout io.Writer) int {
	var af localAgentFlags
	c, err := af.client()
	if err != nil {
		return exitFailure
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l, err := c.ListJobs(ctx, job.Query{Limit: 500})
	if err != nil {
		return exitFailure
	}
	for _, j := range l.Jobs {
		fmt.Fprintln(stdout, j.ID)
	}
	return exitOK
}

// compSpec is what completion knows of a command: its flags, its operand, and
// its subcommands (shoal testbed up, …).
type compSpec struct {
	name    string // "run", "testbed up"
	summary string
	flags   []compFlag
	operand string // "job": a job's id; "file": a file or program; "": nothing to offer
	subs    []compSpec
}

// compFlag is a flag as completion offers it and its value.
type compFlag struct {
	name  string
	value string // "": a bool flag; else what its value is: "file", "job", "state" or "other"
}

// commandSpecs is what completion knows of every command --help lists, and of
// completion itself: each command's flags are read from what its --help
// prints of its flag set, so that a flag added to a command is completed
// without anyone telling completion.
func commandSpecs() []compSpec {
	var specs []compSpec
	for _, name := range commandNames() {
		c := commands[name]
		var s compSpec
		switch name {
		case "completion":
			s = compSpec{subs: []compSpec{{name: "bash"}, {name: "zsh"}}}
		case "testbed":
			for _, sub := range testbedSubcommands() {
				ss := helpSpec(func(args []string, stdout, stderr io.Writer) int {
					return c.run(append([]string{sub}, args...), stdout, stderr)
				})
				ss.name = sub
				s.subs = append(s.subs, ss)
			}
		default:
			s = helpSpec(c.run)
		}
		s.name, s.summary = name, c.summary
		specs = append(specs, s)
	}
	return specs
}

// helpSpec runs a command with --help and reads what it prints.
func helpSpec(run func(args []string, stdout, stderr io.Writer) int) compSpec {
	var out strings.Builder
	run([]string{"--help"}, &out, io.Discard)
	flags, operand := parseHelp(out.String())
	return compSpec{flags: flags, operand: operand}
}

var (
	// flagLine is a line of flag.PrintDefaults naming a flag: "  -name TYPE"
	// (its usage on the next line) or "  -x\tusage" (a one-letter bool flag).
	flagLine = regexp.MustCompile(`^  -([A-Za-z0-9][-A-Za-z0-9_.]*)(?: (\S+))?$`)
	boolLine = regexp.MustCompile(`^  -([A-Za-z0-9])\t`)
)

// parseHelp reads a command's --help: the flags flag.PrintDefaults lists, and
// what its usage line says it takes after them.
func parseHelp(help string) (flags []compFlag, operand string) {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i, l := range lines {
		if m := boolLine.FindStringSubmatch(l); m != nil {
			flags = append(flags, compFlag{name: m[1]})
			continue
		}
		m := flagLine.FindStringSubmatch(l)
		if m == nil || i+1 == len(lines) || !strings.HasPrefix(lines[i+1], "    \t") {
			continue
		}
		f := compFlag{name: m[1]}
		if m[2] != "" {
			f.value = flagValueKind(m[1], m[2])
		}
		flags = append(flags, f)
	}
	if len(lines) > 0 && strings.HasPrefix(lines[0], "Usage: ") {
		for _, w := range strings.Fields(lines[0])[2:] {
			switch strings.Trim(w, "[].") {
			case "JOB":
				return flags, "job"
			case "PROGRAM", "DIR", "FILE":
				return flags, "file"
			}
		}
	}
	return flags, ""
}

// flagValueKind says what completes the value of flag name, whose --help
// names its value typ.
func flagValueKind(name, typ string) string {
	switch {
	case typ == "FILE" || typ == "DIR" || strings.HasSuffix(name, "-dir") || strings.HasSuffix(name, "-file"):
		return "file"
	case name == "job":
		return "job"
	case name == "state":
		return "state"
	}
	return "other"
}

// testbedSubcommands are the subcommands of shoal testbed, sorted.
func testbedSubcommands() []string {
	names := make([]string, 0, len(testbedSubs))
	for n := range testbedSubs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// flagWord is how a flag is typed: -n, --ckpt-interval.
func flagWord(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// stateWords are the job states, for --state.
func stateWords() string {
	w := make([]string, len(job.States))
	for i, s := range job.States {
		w[i] = string(s)
	}
	return strings.Join(w, " ")
}

// compTables writes the shell functions both scripts share: prefix_subs CMD,
// prefix_flags CMD (each flag as name, or name=KIND when it takes a value) and
// prefix_operand CMD, for every command and subcommand.
func compTables(b *strings.Builder, specs []compSpec, prefix, echo string) {
	var all []compSpec
	for _, s := range specs {
		all = append(all, s)
		for _, sub := range s.subs {
			sub.name = s.name + " " + sub.name
			all = append(all, sub)
		}
	}
	table := func(fn string, value func(compSpec) string) {
		fmt.Fprintf(b, "%s_%s() {\n    case $1 in\n", prefix, fn)
		for _, s := range all {
			if v := value(s); v != "" {
				fmt.Fprintf(b, "    '%s') %s '%s' ;;\n", s.name, echo, v)
			}
		}
		b.WriteString("    esac\n}\n\n")
	}
	table("subs", func(s compSpec) string {
		var w []string
		for _, sub := range s.subs {
			w = append(w, sub.name)
		}
		return strings.Join(w, " ")
	})
	table("flags", func(s compSpec) string {
		var w []string
		for _, f := range s.flags {
			if f.value != "" {
				w = append(w, f.name+"="+f.value)
			} else {
				w = append(w, f.name)
			}
		}
		return strings.Join(w, " ")
	})
	table("operand", func(s compSpec) string { return s.operand })
}
