package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"shoal/internal/api"
	"shoal/internal/slurm"
)

// Exit code of `shoal run` in a Slurm allocation that held its job on SIGTERM
// (Slurm's warning signal): the job's newest epoch is kept in the --durable store,
// and a requeued or new run with the same store resumes from it (EX_TEMPFAIL: try
// again).
const exitHeld = 75

// Bounds of the hold on SIGTERM: both well inside a --signal=B:TERM@60 warning,
// leaving time to stop the agents and requeue.
const (
	// holdTimeout bounds the wait for the checkpoint asked for to be complete.
	holdTimeout = 30 * time.Second
	// holdSaveTimeout bounds the wait for it to be kept in the store, after that.
	holdSaveTimeout = 15 * time.Second
)

// allocRun is what shoal run adds, in a Slurm allocation, to a job with --durable:
// SIGTERM, Slurm's warning signal, holds the job at an epoch kept in the store, for
// a requeue to resume from.
type allocRun struct {
	alloc   slurm.Allocation
	durable *durableRun
	// held is the epoch the store kept when the job was held on SIGTERM (0: not
	// held); holding is closed once hold has returned, nil when it never ran.
	held    uint64
	holding chan struct{}
}

// hold answers SIGTERM in the allocation: it asks the job's rank 0 for a checkpoint
// after which the ranks hold still, waits until that epoch is complete and kept in
// the store (bounded by holdTimeout and holdSaveTimeout), then cancels the job, whose
// ranks have done nothing since. r.held is then the epoch the store keeps. A job that
// ends by itself meanwhile is left to end.
func (r *allocRun) hold(c *api.Client, id string, stderr io.Writer) {
	defer close(r.holding)
	d := r.durable
	s := d.saver
	fmt.Fprintf(d.stdout, "shoal: SIGTERM in Slurm job %s: checkpointing job %s and holding it for a requeue\n", r.alloc.JobID, id)
	ctx, cancel := context.WithTimeout(context.Background(), holdTimeout)
	defer cancel()
	epoch, ended, err := r.requestHold(ctx, c, id)
	if ended {
		return
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal: warning: no checkpoint for the hold: %s\n", errorLine(err))
	}
	if epoch > 0 {
		sctx, scancel := context.WithTimeout(context.Background(), holdSaveTimeout)
		if !s.waitSaved(sctx, epoch) {
			fmt.Fprintf(stderr, "shoal: warning: epoch %d was not kept in %s within %v\n", epoch, d.loc, holdSaveTimeout)
		}
		scancel()
	}
	r.held = s.savedEpoch()
	if r.held == 0 {
		fmt.Fprintf(stderr, "shoal: no epoch of job %s is kept in %s: a requeued run starts from the beginning\n", id, d.loc)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	c.Cancel(cctx, id)
}

// requestHold asks rank 0's node of job id for a checkpoint and a hold, and waits
// until an epoch newer than every one the nodes held at the request is complete:
// an epoch under way then completes first, and would lose the work since. It
// returns that epoch, or ended when the job ended by itself.
func (r *allocRun) requestHold(ctx context.Context, c *api.Client, id string) (epoch uint64, ended bool, err error) {
	job, err := c.Job(ctx, id)
	if err != nil {
		return 0, false, err
	}
	_, highest, err := r.durable.saver.index(ctx, 0)
	if err != nil {
		return 0, false, err
	}
	after := max(highest, job.Epoch)
	rank0 := ""
	for node, ranks := range job.Placement {
		if slices.Contains(ranks, 0) {
			rank0 = node
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return 0, false, err
	}
	addr := ""
	for _, n := range nodes {
		if n.Name == rank0 {
			addr = n.API
		}
	}
	if addr == "" {
		return 0, false, fmt.Errorf("rank 0's node %q does not answer", rank0)
	}
	if err := api.NewClient(addr, r.durable.secret).RequestHold(ctx, id); err != nil {
		return 0, false, err
	}
	for {
		job, err := c.Job(ctx, id)
		if err == nil && !job.Ended.IsZero() {
			return 0, true, nil
		}
		if err == nil && job.Epoch > after {
			return job.Epoch, false, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("no epoch after %d complete within %v", after, holdTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
