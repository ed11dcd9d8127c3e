package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"shoal/internal/agent"
	"shoal/internal/api"
	"shoal/internal/coord"
	"shoal/internal/jobservice"
	"shoal/internal/node"
	"shoal/internal/shard"
)

// peer adapts an API client of another agent to what the coordinator needs.
type peer struct{ *api.Client }

var _ coord.Peer = peer{}

func (p peer) Grant(ctx context.Context, req api.GrantRequest) ([]string, error) {
	g, err := p.Client.Grant(ctx, req)
	return g.Missing, err
}

func (p peer) Revoke(ctx context.Context, job string) error {
	_, err := p.Client.Revoke(ctx, job)
	return err
}

func (p peer) Shards(ctx context.Context, job, known string, wait time.Duration) (shard.Index, error) {
	return p.Client.WaitShards(ctx, job, known, wait)
}

func (p peer) Fetch(ctx context.Context, ref shard.Ref, from string) (api.Fetched, error) {
	return p.Client.FetchShard(ctx, ref, from)
}

func (p peer) Encode(ctx context.Context, job string, epoch uint64, req api.EncodeRequest) (api.EncodeResult, error) {
	return p.Client.EncodeParity(ctx, job, epoch, req)
}

func (p peer) Rebuild(ctx context.Context, ref shard.Ref, req api.RebuildRequest) error {
	_, err := p.Client.RebuildShard(ctx, ref, req)
	return err
}

func (p peer) RemoveShardsBefore(ctx context.Context, job string, epoch uint64) error {
	_, err := p.Client.RemoveShardsBefore(ctx, job, epoch)
	return err
}

// plugCoordinator makes a's node able to coordinate jobs: the job routes of its API
// and its file store are served by a coordinator service, which launches with
// engine the jobs that name none, and encrypts the MPI of every job submitted
// here when mpiEncrypt is set (shoal agent --mpi-encrypt).
func plugCoordinator(a *agent.Agent, engine string, mpiEncrypt bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	svc := jobservice.New(jobservice.Config{
		Node:     a.Name(),
		DataDir:  a.DataDir(),
		ShoalBin: self,
		Nodes:    a.Nodes,
		// One client per node, shared with the agent's own calls, so that the
		// coordinator's calls (several per node at every launch and poll) reuse
		// kept-alive connections instead of each dialling anew.
		Peer:  func(n node.Node) coord.Peer { return peer{a.Peer(n.API)} },
		Agent: func(n node.Node) *api.Client { return a.Peer(n.API) },
		Store: a.Store(),
		Links: a.Links,
		// A new leader reads them as it takes the jobs over.
		WarmLinks: a.WarmLinks,
		WarmLink:  a.WarmLink,
		Engine:    engine,
		// The jobs submitted here carry it, whoever coordinates them.
		MPIEncrypt: mpiEncrypt,
		Failures:   a.Failures,
		NodeLost:   a.NodeLost,
	})
	a.SetJobService(svc)
	// Before this node, leading the job store, passes the lead on as it leaves,
	// the coordinator stops every job at a checkpoint for the next leader, so
	// that leaving costs no work here either.
	a.SetBeforeHandOver(svc.HandOver)
	// Before this node leaves (and after it has passed on the lead of the job
	// store, if it had it), the coordinator moves every job with ranks here away
	// from a fresh checkpoint, so the leave costs no work.
	a.SetBeforeLeave(func(ctx context.Context) error {
		if len(a.Launcher().Coordinators()) == 0 {
			return nil
		}
		if err := svc.Evacuate(ctx, a.Name()); err != nil {
			return fmt.Errorf("move jobs off %s: %w", a.Name(), err)
		}
		return nil
	})
	a.SetDataService(svc)
	return nil
}
