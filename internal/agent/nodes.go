package agent

import (
	"context"

	"shoal/internal/node"
)

// Nodes returns every node this agent knows of, in membership's state (GET
// /v1/nodes also marks those whose agent refuses connections). Safe for
// concurrent use.
func (a *Agent) Nodes(ctx context.Context) ([]node.Node, error) {
	return a.memberNodes(), nil
}
