package coord

import (
	"context"
	"fmt"
	"sort"
	"time"

	"shoal/internal/api"
)

// checkMembers reports the nodes of the run that membership declares dead or left.
func (b *clusterBackend) checkMembers(ctx context.Context) *nodeLoss {
	nodes, err := b.s.cfg.Nodes(ctx)
	if err != nil {
		return nil
	}
	b.forgetGone(nodes)
	var lost []string
	reason := ""
	for _, n := range nodes {
		if _, ok := b.nodes[n.Name]; !ok || (n.State != "dead" && n.State != "left") {
			continue
		}
		if b.pending != nil && n.Name == b.pending.without {
			continue
		}
		if b.placement.Counts()[n.Name] == 0 {
			// A node that runs no rank only held copies: the run goes on, and the
			// shards it held are copied again to the nodes that remain.
			b.mu.Lock()
			delete(b.nodes, n.Name)
			b.mu.Unlock()
			b.j.event(EventNodes, Event{Message: fmt.Sprintf("node %s %s; it ran no rank of the job: its shard copies are made again elsewhere", n.Name, goneWord(n.State))})
			continue
		}
		b.mu.Lock()
		seen := b.lastSeen[n.Name]
		b.mu.Unlock()
		if n.State == "dead" && time.Since(seen) < 2*time.Second && b.answers(ctx, n.Name) {
			// A node that answered a moment ago and still answers is not lost: a
			// partition that heals gossips the other side's verdicts, and the node
			// refutes its "death" within a probe period.
			continue
		}
		lost = append(lost, n.Name)
		reason = n.State
		if n.State == "dead" && !seen.IsZero() {
			reason = noAnswerSince(seen)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	sort.Strings(lost)
	return &nodeLoss{nodes: lost, reason: reason, at: time.Now()}
}

// noAnswerSince is the reason a node last seen at seen is taken as lost.
func noAnswerSince(seen time.Time) string {
	return "no answer for " + seconds(time.Since(seen))
}

// forgetGone ends the exclusion of the nodes membership declares dead or left: if
// one comes back alive, it is a join like any other (see liveNodes).
func (b *clusterBackend) forgetGone(nodes []api.Node) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range nodes {
		if n.State == "dead" || n.State == "left" {
			delete(b.excluded, n.Name)
		}
	}
}

// answers says whether node's agent answers now (within a second).
func (b *clusterBackend) answers(ctx context.Context, node string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, _, err := b.peer(node).Shards(cctx, b.cj.snapshot().ID); err != nil {
		return false
	}
	b.mu.Lock()
	b.lastSeen[node] = time.Now()
	b.mu.Unlock()
	return true
}

// goneWord says how membership saw a node go: "left", or "lost" for dead.
func goneWord(state string) string {
	if state == "left" {
		return "left"
	}
	return "lost"
}
