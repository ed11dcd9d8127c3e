package main

import (
	"flag"
	"io"
)

func init() {
	register("logs", command{summary: "print a job's output from its start (--follow to keep printing)", run: logsCmd})
}

const logsUsage = `Usage: shoal logs [flags] JOB

Prints JOB's output from its start as 'shoal run --quiet' prints it: each rank's
lines prefixed "[rank] ", what the ranks wrote to stdout on stdout and to stderr
on stderr, and the "shoal: ..." lines saying where the job restarted (the output
after such a line repeats the work done since the checkpoint it restarted from).
Without --follow, it prints what the job has written so far and returns; with
--follow, it keeps printing until the job ends. How the job ended is for
'shoal wait JOB' to say.

If the agent loses contact with the job's coordinator, shoal logs says so on
stderr and re-attaches for up to 60 s, printing no line twice.

Exit codes: 0 printed (whatever the job's end); 1 shoal could not read the
output; 2 usage error; 4 the agent knows no job JOB.

Flags:
`

func logsCmd(args []string, stdout, stderr io.Writer) int {
	var follow bool
	c, rest, code := agentCommand("logs", logsUsage, 1, args, stdout, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&follow, "follow", false, "keep printing until the job ends")
	})
	if code >= 0 {
		return code
	}
	p := jobPrinter{stdout: stdout, stderr: stderr, v: showOutput}
	if _, err := newJobStream(c, rest[0], follow, stderr).each(p.print); err != nil {
		return followFailed("logs", rest[0], c, err, stderr)
	}
	return exitOK
}
