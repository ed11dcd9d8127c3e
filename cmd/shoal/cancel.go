package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
)

func init() {
	register("cancel", command{summary: "cancel a job: its ranks or tasks are stopped", run: cancelCmd})
}

const cancelUsage = `Usage: shoal cancel [flags] JOB

Cancels JOB: its ranks (or a farm's tasks) are stopped on every node, and the job
ends as cancelled (shoal run and shoal wait following it exit 130). Its data
stays on the nodes under the retention policy for a cancelled job
(docs/retention.md). A user other than root cancels only their own jobs.

Exit codes: 0 the cancellation is under way; 1 it could not be (the agent did
not answer); 2 usage error; 4 the agent knows no job JOB; 5 JOB has ended
already (the line says how: succeeded, failed or cancelled).

Flags:
`

func cancelCmd(args []string, stdout, stderr io.Writer) int {
	c, rest, code := agentCommand("cancel", cancelUsage, 1, args, stdout, stderr, nil)
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Cancel(ctx, rest[0]); err != nil {
		return jobRefused(ctx, c, "cancel", rest[0], err, stderr)
	}
	fmt.Fprintf(stdout, "shoal: job %s is being cancelled (shoal wait %s follows it to its end)\n", rest[0], rest[0])
	return exitOK
}

// jobRefused prints why the agent refused command cmd on job id with err, and
// returns the exit code that says it. A conflict may be the job's end: the
// job is read again to tell.
func jobRefused(ctx context.Context, c *api.Client, cmd, id string, err error, stderr io.Writer) int {
	var now *job.Job
	if errors.Is(err, errkind.Conflict) {
		if j, jerr := c.Job(ctx, id); jerr == nil {
			now = &j
		}
	}
	line, code := refusal(cmd, id, c.Addr(), err, now)
	fmt.Fprintln(stderr, line)
	return code
}

// refusal is the line and exit code of a refused command cmd on job id: err
// is the agent's answer, now the job as read after it (nil if not read).
func refusal(cmd, id, addr string, err error, now *job.Job) (string, int) {
	switch {
	case errors.Is(err, errkind.NotFound):
		return fmt.Sprintf("shoal %s: no job %q known to the agent at %s", cmd, id, addr), exitNoJob
	case errors.Is(err, errkind.Conflict) && now != nil && !now.Ended.IsZero():
		return fmt.Sprintf("shoal %s: job %s has already ended: %s", cmd, id, now.State), exitEnded
	}
	return fmt.Sprintf("shoal %s: %s", cmd, errorLine(err)), exitFailure
}
