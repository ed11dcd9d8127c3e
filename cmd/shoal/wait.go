package main

import (
	"io"
)

func init() {
	register("wait", command{summary: "wait for a job to end; exit as shoal run would have", run: waitCmd})
}

const waitUsage = `Usage: shoal wait [flags] JOB

Waits for JOB to end, printing nothing, and exits with the code 'shoal run'
would have given. A job that did not succeed gets one line on stderr saying why
("shoal wait: job heat-3f9a2c failed: ..."). A job that has already ended answers
at once; its output is in 'shoal logs JOB'.

If the agent loses contact with the job's coordinator, shoal wait says so and
re-attaches for up to 60 s; if the agent itself stops answering, it says so and
exits 1.

Exit codes:
  0    the job succeeded
  N    the program's own exit code N, when a rank exited non-zero by itself
  1    the job failed otherwise, or shoal could not follow it
  2    usage error
  3    ranks kept dying and --max-restarts was used up
  4    the agent knows no job JOB
  130  the job was cancelled

Flags:
`

func waitCmd(args []string, stdout, stderr io.Writer) int {
	c, rest, code := agentCommand("wait", waitUsage, 1, args, stdout, stderr, nil)
	if code >= 0 {
		return code
	}
	return awaitJob("wait", c, rest[0], jobPrinter{v: showNone}, stderr)
}
