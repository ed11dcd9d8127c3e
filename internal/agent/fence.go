package agent

import (
	"context"
	"errors"
	"syscall"
	"time"

	"shoal/internal/job"
	"shoal/internal/membership"
)

// fence revokes the launch grants of jobs whose coordinator's node died or
// left: their daemons here must not run on beside a new run elsewhere. A node
// declared dead whose API still answers is not fenced: when a partition heals,
// the other side's verdicts are gossipped here, and the node refutes them.
//
// A coordinator declared dead may only be out of reach for a while (this node's
// link or its own is down), and its run waits for a silent node as long as
// giving up would cost (job.Patience). So does this node: a job's ranks here
// are stopped job.FenceAfter the first doubt of the coordinator, which is
// never later than the coordinator gives up on this node, unless the
// coordinator is back by then.
func (a *Agent) fence(sub *membership.Subscription) {
	doubt := map[string]time.Time{}          // first doubt of a node, until it is alive again
	waits := map[string]context.CancelFunc{} // fences put off, by coordinator node
	back := func(name string) {
		delete(doubt, name)
		if cancel, ok := waits[name]; ok {
			cancel()
			delete(waits, name)
		}
	}
	for ev := range sub.C {
		name := ev.Node.Name
		switch {
		case ev.Type == membership.EventSuspect:
			if _, ok := doubt[name]; !ok {
				doubt[name] = ev.Time
			}
			continue
		case ev.Type == membership.EventAlive || ev.Type == membership.EventJoin ||
			(ev.Type == membership.EventUpdate && ev.Node.State == membership.StateAlive):
			back(name)
			continue
		case ev.Type != membership.EventFailed && ev.Type != membership.EventLeave:
			continue
		}
		gone := ev.Type == membership.EventLeave
		if ev.Type == membership.EventFailed {
			switch answers, refused := a.answers(ev.Node); {
			case answers:
				a.log.Warn("a node reported dead still answers: not fencing its jobs", "node", name)
				continue
			case refused: // its host is up and its agent is not: no waiting for it
				gone = true
			}
		}
		if ev.Node.Meta.API != "" {
			a.peers.Forget(ev.Node.Meta.API) // its connections are dead or soon will be
		}
		since, ok := doubt[name]
		if !ok || ev.Type == membership.EventLeave {
			since = ev.Time
		}
		now := time.Now()
		later := map[string][2]time.Time{} // by job: its grant, when to fence
		for id, granted := range a.launch.Coordinated(name) {
			at := now
			if !gone {
				at = since.Add(job.FenceAfter(since, a.newestShard(id, granted)))
			}
			if at.After(now) {
				later[id] = [2]time.Time{granted, at}
				continue
			}
			a.launch.Revoke(id)
			a.log.Warn("coordinator gone: killed its job's processes on this node", "coordinator", name, "event", ev.Type.String(), "job", id)
		}
		if len(later) > 0 {
			if cancel, ok := waits[name]; ok {
				cancel()
			}
			ctx, cancel := context.WithCancel(context.Background())
			waits[name] = cancel
			for id, w := range later {
				a.log.Info("coordinator declared dead: its job's ranks here wait for it", "coordinator", name, "job", id, "until", w[1].Format(time.StampMilli))
				go a.fenceAt(ctx, ev.Node, id, w[0], w[1])
			}
		}
	}
}

// fenceAt revokes job's grant of granted at t unless ctx ends first (its
// coordinator is back), the agent stops, the coordinator's node is alive or
// answers by then, or the grant is another one by then (a new coordinator
// relaunched the job here).
func (a *Agent) fenceAt(ctx context.Context, coordinator membership.Node, job string, granted, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-a.quit:
		return
	case <-timer.C:
	}
	if n, ok := a.members.Node(coordinator.Name); ok && n.State == membership.StateAlive {
		return
	}
	if g, ok := a.launch.Coordinated(coordinator.Name)[job]; !ok || !g.Equal(granted) {
		return
	}
	if answers, _ := a.answers(coordinator); answers {
		return
	}
	a.launch.Revoke(job)
	a.log.Warn("coordinator still gone: killed its job's processes on this node", "coordinator", coordinator.Name, "job", job)
}

// answers says whether node's agent answers a health request within a second,
// and if not, whether its host refused the connection: no agent listens there.
func (a *Agent) answers(node membership.Node) (answers, refused bool) {
	if node.Meta.API == "" {
		return false, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := a.peers.Get(node.Meta.API).Health(ctx)
	return err == nil, errors.Is(err, syscall.ECONNREFUSED)
}

// newestShard returns when the newest checkpoint of job this node holds was
// taken, or since when the job has run here (its grant) if that is later.
func (a *Agent) newestShard(job string, granted time.Time) time.Time {
	newest := granted
	idx, err := a.shards.Index(job)
	if err != nil {
		return newest
	}
	for _, sh := range idx.Shards {
		if t := time.Unix(0, int64(sh.CreatedNs)); t.After(newest) {
			newest = t
		}
	}
	return newest
}
