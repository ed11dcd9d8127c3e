package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"shoal/internal/api"
)

func init() {
	register("cancel", command{summary: "cancel a job: its ranks or tasks are stopped", run: cancelCmd})
}

const cancelUsage = `Usage: shoal cancel [flags] JOB

Cancels JOB: its ranks (or a farm's tasks) are stopped on every node, and the job
ends as cancelled (shoal run and shoal wait following it exit 130). Its data
stays on the nodes under the retention policy for a cancelled job
(docs/retention.md). A user other than root cancels only their own jobs.

Exit codes: 0 the cancellation is under way; 1 it could not be (it has ended already, or the agent
did not answer); 2 usage error; 4 the agent knows no job JOB.

Flags:
`

func cancelCmd(args []string, stdout, stderr io.Writer) int {
	c, rest, code := agentCommand("cancel", cancelUsage, 1, args, stdout, stderr, nil)
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Cancel(ctx, rest[0])
	switch {
	case errors.Is(err, api.ErrNotFound):
		fmt.Fprintf(stderr, "shoal cancel: no job %q known to the agent at %s\n", rest[0], c.Addr())
		return exitNoJob
	case err != nil:
		fmt.Fprintf(stderr, "shoal cancel: %s\n", errorLine(err))
		return exitFailure
	}
	fmt.Fprintf(stdout, "shoal: job %s is being cancelled (shoal wait %s follows it to its end)\n", rest[0], rest[0])
	return exitOK
}
