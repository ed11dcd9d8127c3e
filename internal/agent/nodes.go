package agent

import (
	"context"

	"shoal/internal/api"
)

// Nodes returns every node this agent knows of, as GET /v1/nodes reports them.
// Safe for concurrent use.
func (a *Agent) Nodes(ctx context.Context) ([]api.Node, error) {
	return (*localNode)(a).Nodes(ctx)
}
