package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/coord"
	"shoal/internal/engine"
)

// peer adapts an API client of another agent to what the coordinator needs.
type peer struct{ *api.Client }

var _ coord.Peer = peer{}

func (p peer) Grant(ctx context.Context, job, coordinator string, ranks int, ttl time.Duration) error {
	_, err := p.Client.Grant(ctx, job, coordinator, ranks, ttl)
	return err
}

func (p peer) Revoke(ctx context.Context, job string) error {
	_, err := p.Client.Revoke(ctx, job)
	return err
}

func (p peer) Shards(ctx context.Context, job string) ([]coord.ShardInfo, *api.Progress, error) {
	idx, err := p.Client.Shards(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	out := make([]coord.ShardInfo, len(idx.Shards))
	for i, s := range idx.Shards {
		out[i] = coord.ShardInfo{Epoch: s.Epoch, Rank: s.Rank, CreatedNs: s.CreatedNs, Checksum: s.Checksum}
	}
	return out, idx.Progress, nil
}

func (p peer) Fetch(ctx context.Context, ref api.ShardRef, from string) error {
	_, err := p.Client.FetchShard(ctx, ref, from)
	return err
}

func (p peer) RankStates(ctx context.Context, job string) ([]engine.RankState, error) {
	states, err := p.Client.RankStates(ctx, job)
	if err != nil {
		return nil, err
	}
	out := make([]engine.RankState, len(states))
	for i, s := range states {
		out[i] = engine.RankState{Rank: s.Rank, PID: s.PID, State: s.State, Code: s.Code, Signal: s.Signal, TimeNs: s.TimeNs}
	}
	return out, nil
}

func (p peer) RemoveShardsBefore(ctx context.Context, job string, epoch uint64) error {
	_, err := p.Client.RemoveShardsBefore(ctx, job, epoch)
	return err
}

// plugCoordinator makes a's node able to coordinate jobs: the job routes of its API
// and its file store are served by a coordinator service.
func plugCoordinator(a *agent.Agent) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	svc := coord.NewService(coord.ServiceConfig{
		Node:       a.Name(),
		DataDir:    a.DataDir(),
		SecretFile: filepath.Join(a.DataDir(), agent.SecretFile),
		ShoalBin:   self,
		Nodes:      a.Nodes,
		// One client per node, shared with the agent's own calls, so that the
		// coordinator's calls (several per node at every launch and poll) reuse
		// kept-alive connections instead of each dialling anew.
		Peer: func(n api.Node) coord.Peer { return peer{a.Peer(n.API)} },
	})
	a.SetJobService(svc)
	// Before this node leaves, every coordinator with ranks here moves its job away
	// from a fresh checkpoint, so the leave costs no work.
	a.SetBeforeLeave(func(ctx context.Context) error {
		var firstErr error
		for _, name := range a.Launcher().Coordinators() {
			if name == a.Name() {
				continue // a job's coordinator leaving ends the job: nothing to move it to
			}
			var err error
			if n, ok := nodeByName(ctx, a, name); ok {
				err = a.Peer(n.API).Evacuate(ctx, a.Name())
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("move jobs of %s off %s: %w", name, a.Name(), err)
			}
		}
		return firstErr
	})
	a.SetDataService(svc)
	return nil
}

func nodeByName(ctx context.Context, a *agent.Agent, name string) (api.Node, bool) {
	nodes, _ := a.Nodes(ctx)
	for _, n := range nodes {
		if n.Name == name && n.State == "alive" {
			return n, true
		}
	}
	return api.Node{}, false
}
