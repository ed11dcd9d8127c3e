package coord

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"shoal/internal/job"
	"shoal/internal/node"
)

// checkMembers reports the nodes of the run that membership, as nodes says it,
// declares left, or dead and silent for as long as giving up on them would cost
// (see Patience; the run waits for them until then). A node it doubts
// (suspect, or dead and waited for) is probed meanwhile, so that a verdict can
// be weighed against what the node's agent did last.
func (b *clusterBackend) checkMembers(ctx context.Context, nodes []node.Node) *nodeLoss {
	b.forgetGone(nodes)
	now := time.Now()
	var lost []string
	reason := ""
	left := true
	for _, n := range nodes {
		if _, ok := b.nodes[n.Name]; !ok {
			continue
		}
		if n.State == "alive" {
			delete(b.doubted, n.Name)
			if since, ok := b.waiting[n.Name]; ok {
				delete(b.waiting, n.Name)
				b.j.event(job.EventNodes, job.Event{Message: fmt.Sprintf("node %s is back after %s: the run goes on without a restart", n.Name, job.Seconds(now.Sub(since)))})
			}
			continue
		}
		if _, ok := b.doubted[n.Name]; !ok {
			b.doubted[n.Name] = now
		}
		if n.State == "suspect" {
			b.probe(n.Name)
		}
		if (n.State != "dead" && n.State != "left") || (b.pending != nil && n.Name == b.pending.without) {
			continue
		}
		if b.placement.Counts()[n.Name] == 0 {
			// A node that runs no rank only held copies: the run goes on, and the
			// shards it held are copied again to the nodes that remain.
			b.mu.Lock()
			delete(b.nodes, n.Name)
			b.mu.Unlock()
			delete(b.doubted, n.Name)
			b.j.event(job.EventNodes, job.Event{Message: fmt.Sprintf("node %s %s; it ran no rank of the job: its shard copies are made again elsewhere", n.Name, node.GoneWord(n.State))})
			continue
		}
		if n.State == "dead" && b.mayAnswer(n.Name) && b.answers(ctx, n.Name) {
			// A node no request has failed to reach since its last answer, and
			// that answers now, is not lost: a partition that heals gossips the
			// other side's verdicts, and the node refutes its "death" within a
			// probe period.
			continue
		}
		reason = n.State
		if n.State == "dead" {
			since := b.silentSince(n.Name)
			if since.IsZero() {
				since = now
			}
			wait, why := b.patience(since)
			if now.Sub(since) < wait {
				if _, ok := b.waiting[n.Name]; !ok {
					b.waiting[n.Name] = since
					b.j.event(job.EventNodes, job.Event{Message: fmt.Sprintf("node %s declared dead after %s of silence; waiting for it up to %s, what restarting would cost: %s",
						n.Name, job.Seconds(now.Sub(since)), job.Seconds(wait), why)})
				}
				b.probe(n.Name) // an answer ends the wait (see above)
				continue
			}
			reason = noAnswerSince(since)
			if _, ok := b.waiting[n.Name]; ok {
				delete(b.waiting, n.Name)
				reason += "; waiting longer would cost more than restarting: " + why
			}
		}
		lost = append(lost, n.Name)
		left = left && n.State == "left"
	}
	if len(lost) == 0 {
		return nil
	}
	sort.Strings(lost)
	return &nodeLoss{nodes: lost, reason: reason, at: time.Now(), left: left}
}

// checkRefused reports the nodes of the run whose agents refused a connection
// since their last answer and since the run's launch: their hosts are up and no
// agent listens. A run cannot go on there. Its daemons were started through that
// agent, and the end of the agent's launch connection makes mpirun give up on
// the node (shoal rsh exits 255), so the loss is certain before mpirun says so.
// Saying it at once is what makes a killed node known within a fraction of a
// second, rather than once mpirun has stopped and the survivors were asked
// (finish). A silent node (a cut link, a machine switched off) refuses nothing:
// membership decides on it (checkMembers). A node leaving politely is left to
// its move.
//
// nodes is membership's view (nil when it could not be had): a node that
// announced its leave is reported as left, not lost.
func (b *clusterBackend) checkRefused(nodes []node.Node) *nodeLoss {
	failed := map[string]time.Time{} // by refusing node: its first failed request
	b.mu.Lock()
	for name := range b.nodes {
		c := b.contacts[name]
		if c.refused.IsZero() || c.refused.Before(b.launchAt) || (b.pending != nil && name == b.pending.without) {
			continue
		}
		failed[name] = c.failed
	}
	b.mu.Unlock()
	if len(failed) == 0 { // the common case, at every poll: nothing more to look up
		return nil
	}
	counts := b.placement.Counts()
	var lost []string
	var at time.Time
	for name, first := range failed {
		if counts[name] == 0 {
			continue
		}
		lost = append(lost, name)
		// Its first failed request is when its long poll broke: the agent's end.
		if at.IsZero() || first.Before(at) {
			at = first
		}
	}
	if len(lost) == 0 {
		return nil
	}
	left := true
	for _, name := range lost {
		i := slices.IndexFunc(nodes, func(n node.Node) bool { return n.Name == name })
		left = left && i >= 0 && (nodes[i].Leaving || nodes[i].State == "left")
	}
	b.mu.Lock()
	for _, name := range lost {
		b.excluded[name] = true
	}
	b.mu.Unlock()
	b.recordAvoid()
	sort.Strings(lost)
	if left {
		return &nodeLoss{nodes: lost, reason: "left", at: at, left: true}
	}
	return &nodeLoss{nodes: lost, reason: agentGone, at: at}
}

// agentGone is the reason a node whose agent refuses connections is lost.
const agentGone = "its agent is gone: connection refused"

// allRefused says whether every one of nodes refused a connection since its
// last answer.
func (b *clusterBackend) allRefused(nodes []string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range nodes {
		if b.contacts[n].refused.IsZero() {
			return false
		}
	}
	return true
}

// patience returns how long the run waits for a node silent since s (see
// [Patience]), and what giving up would cost, in words. The work at stake is
// the run's own since its newest complete epoch: a run relaunched from an
// older epoch began at its launch.
func (b *clusterBackend) patience(s time.Time) (time.Duration, string) {
	b.mu.Lock()
	epoch, from, relaunch := b.book.Newest(), b.launchAt, b.restartCost
	if created := time.Unix(0, int64(b.book.CreatedNs(epoch))); epoch > 0 && created.After(from) {
		from = created
	}
	b.mu.Unlock()
	return job.Patience(s, from, relaunch), job.PatienceNote(max(s.Sub(from), 0), epoch, relaunch)
}

// noAnswerSince is the reason a node silent since seen is taken as lost.
func noAnswerSince(seen time.Time) string {
	return "no answer for " + job.Seconds(time.Since(seen))
}

// mayAnswer says whether no request to node has failed since its last answer.
func (b *clusterBackend) mayAnswer(node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.contacts[node].failed.IsZero()
}

// silentSince estimates since when node has not answered (zero: unknown): its
// last answer, or if later, the first sign of silence since, the first failed
// request or membership's first doubt. A cut node's long poll just hangs,
// so its last answer may be long before it went silent.
func (b *clusterBackend) silentSince(node string) time.Time {
	b.mu.Lock()
	c := b.contacts[node]
	b.mu.Unlock()
	first := c.failed
	if d, ok := b.doubted[node]; ok && (first.IsZero() || d.Before(first)) {
		first = d
	}
	if first.After(c.seen) {
		return first
	}
	return c.seen
}

// probe asks node's agent, in the background, whether it answers, at most
// every probeEvery and once at a time, while the run is watched.
func (b *clusterBackend) probe(node string) {
	p, id := b.peer(node), b.rec.Job().ID
	b.mu.Lock()
	defer b.mu.Unlock()
	c, w := b.contacts[node], b.run
	if w == nil || c.probe || time.Since(c.probed) < probeEvery {
		return
	}
	c.probe, c.probed = true, time.Now()
	b.contacts[node] = c
	w.wg.Add(1) // the job's goroutine, which calls stop too: never during its Wait
	go func() {
		defer w.wg.Done()
		cctx, cancel := context.WithTimeout(w.ctx, time.Second)
		_, err := p.Shards(cctx, id, "", 0)
		cancel()
		if err == nil {
			b.answered(node, time.Now())
		} else if w.ctx.Err() == nil {
			b.noAnswer(node, time.Now(), err)
		}
		b.mu.Lock()
		c := b.contacts[node]
		c.probe = false
		b.contacts[node] = c
		b.mu.Unlock()
	}()
}

// probeEvery spaces the probes of a node membership suspects.
const probeEvery = 500 * time.Millisecond

// forgetGone ends the exclusion of the nodes membership declares dead or left, or
// no longer knows of: if one comes back alive, it is a join like any other (see
// liveNodes).
func (b *clusterBackend) forgetGone(nodes []node.Node) {
	known := make(map[string]string, len(nodes))
	for _, n := range nodes {
		known[n.Name] = n.State
	}
	b.mu.Lock()
	forgot := false
	for name := range b.excluded {
		if st, ok := known[name]; !ok || st == "dead" || st == "left" {
			delete(b.excluded, name)
			forgot = true
		}
	}
	b.mu.Unlock()
	if forgot {
		b.recordAvoid()
	}
}

// recordAvoid records the nodes the job is not placed on in its stored state
// (job.Job.Avoid), so that a coordinator taking the job over does not place it
// on a node this one found lost before membership says so.
func (b *clusterBackend) recordAvoid() {
	b.mu.Lock()
	avoid := make([]string, 0, len(b.excluded))
	for n := range b.excluded {
		avoid = append(avoid, n)
	}
	b.mu.Unlock()
	sort.Strings(avoid)
	b.rec.Decide(func(a *job.Job) bool {
		if slices.Equal(avoid, a.Avoid) {
			return false
		}
		a.Avoid = avoid
		return true
	})
}

// answers says whether node's agent answers now (within a second).
func (b *clusterBackend) answers(ctx context.Context, node string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := b.peer(node).Shards(cctx, b.rec.Job().ID, "", 0); err != nil {
		b.noAnswer(node, time.Now(), err)
		return false
	}
	b.answered(node, time.Now())
	return true
}
