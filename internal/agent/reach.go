package agent

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"shoal/internal/api"
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

// reachCheck remembers since when each node has refused connections, so that
// SINCE counts from the first refusal seen. Safe for concurrent use.
type reachCheck struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// mark dials, in parallel, the API address of every node of nodes that
// membership holds alive or suspect (this one aside) and marks those that
// refuse [StateUnreachable], with no ranks (its agent and the ranks it ran
// are gone).
func (c *reachCheck) mark(ctx context.Context, nodes []api.Node, dial func(ctx context.Context, addr string) error) {
	refused := make([]bool, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.Local || n.API == "" || (n.State != "alive" && n.State != "suspect") {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, reachTimeout)
			defer cancel()
			refused[i] = Refused(dial(dctx, n.API))
		}()
	}
	wg.Wait()
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since == nil {
		c.since = map[string]time.Time{}
	}
	for i := range nodes {
		n := &nodes[i]
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
