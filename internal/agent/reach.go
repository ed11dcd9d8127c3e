package agent

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"shoal/internal/fanout"
	"shoal/internal/node"
)

// StateUnreachable is the state GET /v1/nodes gives a node that membership
// still holds alive or suspect but whose agent refuses connections: its
// machine answers and nothing listens on its API address, so its agent is gone
// (killed, crashed, stopped), seconds before membership's failure detector
// declares it dead.
const StateUnreachable = "unreachable"

// reachTimeout bounds the check of one node's API address. A node that does
// not answer within it is left to membership: a lost or slow network is not a
// refusal.
const reachTimeout = 250 * time.Millisecond

// Refused reports whether err, of a connection to a node's API address, says
// that nothing listens there: refused, or reset as it was made.
func Refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// reachMemo is how long the check of a node's API address stands: GET
// /v1/nodes asked many times a second (a dashboard, scripts, every local
// user) dials each node at most once in it.
const reachMemo = time.Second

// reachLimit is how many nodes one check dials at most, all at once: a check
// over thousands of nodes opens a bounded number of sockets and returns
// within reachTimeout even when many are silent. A node left undialled is
// left to membership, as one that did not answer in time is.
const reachLimit = 256

// reachCheck remembers since when each node has refused connections, so that
// SINCE counts from the first refusal seen, and each node's last check. Safe
// for concurrent use.
type reachCheck struct {
	// heard, when set, says when the agent at an API address last answered
	// a request of this agent's ([api.Clients.Answered]): a node heard from
	// within reachMemo is not dialled. GET /v1/nodes on the coordinator's
	// agent, while it talks to every node of a run, dials none of them.
	heard func(api string) time.Time

	mu      sync.Mutex
	since   map[string]time.Time
	checked map[string]reachResult
}

// reachResult is the check of one node's API address.
type reachResult struct {
	api     string
	at      time.Time
	refused bool
}

// mark dials, in parallel, the API address of the nodes of nodes that
// membership holds alive or suspect (this one aside) and that were neither
// checked nor heard from within reachMemo, at most reachLimit of them, and
// marks those that refuse [StateUnreachable], with no ranks (its agent and the
// ranks it ran are gone).
func (c *reachCheck) mark(ctx context.Context, nodes []node.Node, dial func(ctx context.Context, addr string) error) {
	refused := make([]bool, len(nodes))
	start := time.Now()
	c.mu.Lock()
	if c.checked == nil {
		c.checked = map[string]reachResult{}
	}
	memo := make([]bool, len(nodes))
	silent := make([]bool, len(nodes))  // no answer, or not dialled: nothing new
	skipped := make([]bool, len(nodes)) // not dialled this time
	for i, n := range nodes {
		r, ok := c.checked[n.Name]
		if c.heard != nil && n.API != "" {
			// An answer newer than the last check stands for one.
			if h := c.heard(n.API); !h.IsZero() && (!ok || r.api != n.API || h.After(r.at)) {
				r, ok = reachResult{api: n.API, at: h}, true
				c.checked[n.Name] = r
			}
		}
		if ok && r.api == n.API && start.Sub(r.at) < reachMemo {
			memo[i], refused[i] = true, r.refused
		}
	}
	var todo []int
	last := make([]time.Time, len(nodes)) // of each node's last check, zero if none
	for i, n := range nodes {
		if !memo[i] && !n.Local && n.API != "" && (n.State == "alive" || n.State == "suspect") {
			todo = append(todo, i)
			if r, ok := c.checked[n.Name]; ok && r.api == n.API {
				last[i] = r.at
			}
		}
	}
	c.mu.Unlock()
	// At most reachLimit dials a check, the nodes checked longest ago first:
	// past reachLimit nodes not heard from, a node is checked every
	// n/reachLimit checks rather than every check dialling all n.
	if len(todo) > reachLimit {
		slices.SortStableFunc(todo, func(x, y int) int { return last[x].Compare(last[y]) })
		for _, i := range todo[reachLimit:] {
			skipped[i], silent[i] = true, true
		}
		todo = todo[:reachLimit]
	}
	fanout.Each(len(todo), reachLimit, func(k int) {
		i := todo[k]
		dctx, cancel := context.WithTimeout(ctx, reachTimeout)
		defer cancel()
		err := dial(dctx, nodes[i].API)
		refused[i], silent[i] = Refused(err), err != nil && !Refused(err)
	})
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since == nil {
		c.since = map[string]time.Time{}
	}
	for i, n := range nodes {
		// No answer within reachTimeout (a slow network, or this agent not
		// scheduled in time on a busy machine) says nothing new: a node seen
		// refusing stays so until a connection to it is made.
		if _, was := c.since[n.Name]; silent[i] && was {
			refused[i] = true
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if !memo[i] && !skipped[i] && !n.Local && n.API != "" && (n.State == "alive" || n.State == "suspect") {
			// A check that began earlier and ended later (one of its dials
			// waited out reachTimeout) does not overwrite a newer one's
			// result: an answer from before a kill would hide the refusal
			// seen after it for a whole reachMemo.
			if r, ok := c.checked[n.Name]; ok && r.api == n.API && r.at.After(start) {
				refused[i] = r.refused
			} else {
				c.checked[n.Name] = reachResult{api: n.API, at: start, refused: refused[i]}
			}
		}
		if n.State != "alive" && n.State != "suspect" {
			refused[i] = false // membership knows it gone already
		}
		if !refused[i] {
			delete(c.since, n.Name)
			continue
		}
		since, ok := c.since[n.Name]
		if !ok || since.Before(n.Since) {
			since = now
			c.since[n.Name] = since
		}
		n.State, n.Since, n.Ranks = StateUnreachable, since, 0
	}
}

// dialTCP opens and closes a TCP connection to addr.
func dialTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}
