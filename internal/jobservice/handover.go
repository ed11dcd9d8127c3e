package jobservice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"shoal/internal/coord"
	"shoal/internal/job"
)

// ErrNotHeld says that a job a leaving leader handed over had no checkpoint
// taken for it in time: its next coordinator restarts it from its newest
// complete epoch, and the work since is lost.
var ErrNotHeld = errors.New("jobservice: no checkpoint to hand the job over at")

// handOverWait bounds how long a leader that leaves waits for the checkpoints
// of the jobs it hands over, all taken at once.
const handOverWait = time.Minute

// handOverStop bounds how long a leader that leaves waits for the launchers of
// the jobs it handed over to exit once stopped.
const handOverStop = 10 * time.Second

// HandOver, on the node that leads the job store when it leaves, stops every
// MPI job it coordinates at a checkpoint, so that the node it passes the lead
// to goes on from there with no work lost, as when any other node leaves: each
// job's ranks checkpoint and hold still (the request a leave or a rebalance
// makes), the job store records the held epoch (job.Job.Handover), and the
// job's launcher is stopped. Then this node drives none of its jobs any more;
// the next leader resumes them (takeOver). It waits up to handOverWait (and
// ctx) for the checkpoints; a job whose checkpoint is not complete by then is
// stopped all the same, the error (an ErrNotHeld) naming it. A task farm is
// not held: its next coordinator goes on from its stored results. A node that
// does not lead does nothing.
func (s *Service) HandOver(ctx context.Context) error {
	if s.cfg.Store == nil || !s.cfg.Store.IsLeader() {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, handOverWait)
	defer cancel()
	type asked struct {
		j  *clusterJob
		rc coord.Reconfig
	}
	var jobs []asked
	reason := fmt.Sprintf("node %s leaving, and it coordinates the job", s.cfg.Node)
	s.mu.Lock()
	for _, j := range s.jobs {
		j.mu.Lock()
		running, b := !j.done && j.backend != nil && j.info.Spec.Farm == nil, j.backend
		j.mu.Unlock()
		if !running {
			continue
		}
		rc := coord.Reconfig{Reason: reason, HandOver: &job.Handover{}, Done: make(chan struct{})}
		if b.Reconfigure(rc) {
			jobs = append(jobs, asked{j, rc})
		} // else full of moves asked for: none is held
	}
	s.mu.Unlock()
	var notHeld []string
	for _, a := range jobs {
		// done is closed without an epoch when the job ended, or when a loss
		// relaunched it before its checkpoint was complete.
		held := false
		select {
		case <-a.rc.Done:
			held = a.rc.HandOver.Epoch > 0
		case <-hctx.Done():
		}
		if !held {
			a.j.mu.Lock()
			ended := a.j.done
			a.j.mu.Unlock()
			if !ended {
				notHeld = append(notHeld, a.j.snapshot().ID)
			}
			continue
		}
		h := a.rc.HandOver
		h.From = s.cfg.Node
		a.j.mu.Lock()
		a.j.info.Handover = h
		a.j.mu.Unlock()
		a.j.write(true, job.NewEvent(job.EventCoordinator, fmt.Sprintf("epoch %d taken and the ranks held; %s hands the job over to the next coordinator", h.Epoch, s.cfg.Node), nil))
	}
	// As when the lead is lost, but while this node still leads: nothing the
	// stopped runs do from now on is written (clusterJob.current).
	s.mu.Lock()
	s.term++
	stopped := make([]*clusterJob, 0, len(s.jobs))
	for _, j := range s.jobs {
		j.cancel(coord.ErrHandedOver)
		stopped = append(stopped, j)
	}
	s.mu.Unlock()
	wait := time.After(handOverStop)
	for _, j := range stopped {
		select {
		case <-j.finished:
		case <-wait:
		}
	}
	if len(notHeld) > 0 {
		return fmt.Errorf("%w within %s: %s (restarted from their newest complete epoch)", ErrNotHeld, handOverWait, strings.Join(notHeld, ", "))
	}
	return nil
}
