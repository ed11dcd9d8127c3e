package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"strconv"

	"shoal/internal/api"
	"shoal/internal/job"
)

// Errors of --user.
var (
	errNoSuchUser = errors.New("no such user on this node")
	errUserRoot   = errors.New("a job without --user runs as the agents' user, root, already; --user names another user")
)

// jobOwner is the owner a job of --user name runs as: the user of that login
// name, or of that uid, in this node's user database, with its primary group.
// Root is refused: a job that names no owner runs as the agents' user already.
func jobOwner(name string) (*job.Owner, error) {
	u, err := user.Lookup(name)
	if _, isNumber := strconv.Atoi(name); err != nil && isNumber == nil {
		u, err = user.LookupId(name)
	}
	if err != nil {
		return nil, fmt.Errorf("--user %s: %w", name, errNoSuchUser)
	}
	uid, uerr := strconv.Atoi(u.Uid)
	gid, gerr := strconv.Atoi(u.Gid)
	if uerr != nil || gerr != nil {
		return nil, fmt.Errorf("--user %s: uid %q gid %q: %w", name, u.Uid, u.Gid, errNoSuchUser)
	}
	if uid == 0 {
		return nil, fmt.Errorf("--user %s: %w", name, errUserRoot)
	}
	return &job.Owner{UID: uid, GID: gid, Name: u.Username}, nil
}

// warnRoot prints rootNote's line for job, submitted through c, on stderr,
// unless quiet (--quiet: the output is the ranks' alone, as shoal logs prints it).
func warnRoot(ctx context.Context, c *api.Client, job job.Job, quiet bool, stderr io.Writer) {
	if quiet || job.Spec.Owner != nil {
		return // no need to ask the agent
	}
	h, err := c.Health(ctx)
	if note := rootNote(job, h.User); err == nil && note != "" {
		fmt.Fprintln(stderr, note)
	}
}

// rootNote is the line shoal run prints when job, submitted to an agent that
// runs as agent, runs as root on every node; "" otherwise (it has an owner, or
// the agents run as another user, or agent is unknown).
func rootNote(job job.Job, agent *job.Owner) string {
	if job.Spec.Owner != nil || agent == nil || agent.UID != 0 {
		return ""
	}
	return fmt.Sprintf("shoal: warning: job %s runs as root on every node (the agents' user): its program may do anything there; shoal run --user NAME runs a job as NAME", job.ID)
}
