// Package staging puts on a job's nodes what a launch needs before its ranks
// start: the job's files, granted and copied to each node of the run
// ([Files], [SetUp]) with a word on a copy that lasts ([Meter], [Note]); each
// rank's shard of the epoch a run restarts from, brought to the rank's node
// by a copy or a rebuild from its parity group, and those of a restart on
// another count ([Sources], [ResizeSources], [Shards]); and the files the
// launcher reads on the coordinator's node: hostfile, rankfile, the rsh node
// map ([LaunchFiles]), and the arguments that place the job's files in a
// node's job directory ([StageArgs]).
//
// The coordinator (internal/coord) calls it with what it needs: clients of
// the nodes' agents ([Peer]), the epoch book's view ([Book]) and a sink for
// the job's events. The rules of which shard comes from where are the
// [epochs.Book]'s.
package staging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/fanout"
	"shoal/internal/files"
	"shoal/internal/job"
	"shoal/internal/shard"
)

// Peer is what staging needs of a node's agent (the coordinator's own
// included). Methods must be safe for concurrent use.
type Peer interface {
	// Grant allows the node to start MPI daemons for a job (req.Job), which
	// runs req.Ranks of its ranks there (the node announces them), and
	// returns those of req.Files the node lacks.
	Grant(ctx context.Context, req api.GrantRequest) (missing []string, err error)
	PutFile(ctx context.Context, sum string, r io.Reader, size int64) error
	// Fetch makes the node copy a shard from the agent at API address from.
	Fetch(ctx context.Context, ref shard.Ref, from string) (api.Fetched, error)
	// Rebuild makes the node rebuild a shard from its parity group's pieces.
	Rebuild(ctx context.Context, ref shard.Ref, req api.RebuildRequest) error
}

// Origin is the node a job's files are sent from: the one that coordinates
// the job, whose cache the submitter uploaded them to.
type Origin struct {
	Node  string      // its name
	Cache files.Cache // its cache of job files
}

// Target is a node of a run as the staging of its files sees it.
type Target struct {
	Peer  Peer   // a client of its agent
	Arch  string // its instruction set: the build of the program it gets
	Ranks int    // how many of the job's ranks it runs
}

// Files grants job info to every node of nodes (by name) and copies each the
// job's files it lacks, in parallel, fanout.Limit nodes at a time (a launch
// over thousands of nodes opens no more connections at once), and returns
// once they are done,
// saying through say how far the copies have come when they last (Note). It
// returns the files copied to each node, the nodes that did not answer
// (ascending), and the first error.
func Files(ctx context.Context, from Origin, info job.Job, nodes map[string]Target, say func(string)) (map[string][]job.File, []string, error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	var down downNodes
	var copiedMu sync.Mutex
	copied := map[string][]job.File{} // by node
	var meter Meter
	names := slices.Sorted(maps.Keys(nodes))
	wg.Add(1)
	go func() {
		defer wg.Done()
		fanout.Each(len(names), fanout.Limit, func(i int) {
			name, t := names[i], nodes[names[i]]
			files, err := SetUp(ctx, from, t.Peer, name, t.Arch, info, t.Ranks, &meter)
			if err != nil {
				down.note(err, name)
				errs <- fmt.Errorf("stage job %s on %s: %w", info.ID, name, err)
				return
			}
			copiedMu.Lock()
			copied[name] = files
			copiedMu.Unlock()
		})
	}()
	wait(&wg, &meter, say)
	close(errs)
	return copied, down.list(), <-errs
}

// SetUp grants job info to node, which runs ranks of its ranks, through its
// agent peer, and copies it the job's files it lacks from from's cache (those
// of its instruction set, arch), returning those it copied; meter, when not
// nil, counts the bytes sent. The grant asks which files the node lacks: a
// node that has them all (the same content hashes) costs one request. The
// origin itself holds them already (the submitter uploaded them there).
func SetUp(ctx context.Context, from Origin, peer Peer, node, arch string, info job.Job, ranks int, meter *Meter) ([]job.File, error) {
	req := api.GrantRequest{Job: info.ID, Coordinator: from.Node, Ranks: ranks, TTL: job.Duration(24 * time.Hour), Owner: info.Spec.Owner}
	files := info.Spec.FilesFor(arch)
	if node != from.Node {
		for _, f := range files {
			req.Files = append(req.Files, f.SHA256)
		}
	}
	missing, err := peer.Grant(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	var copied []job.File
	for _, f := range files {
		if slices.Contains(missing, f.SHA256) {
			meter.Expect(node, f.Size)
		}
	}
	for _, f := range files {
		if !slices.Contains(missing, f.SHA256) {
			continue
		}
		r, err := os.Open(from.Cache.Path(f.SHA256))
		if err != nil {
			return copied, err
		}
		err = peer.PutFile(ctx, f.SHA256, meter.Reader(node, r), f.Size)
		r.Close()
		if err != nil {
			return copied, fmt.Errorf("file %s: %w", f.Name, err)
		}
		copied = append(copied, f)
	}
	return copied, nil
}

// downNodes collects the nodes that did not answer a call; safe for
// concurrent use.
type downNodes struct {
	mu    sync.Mutex
	nodes map[string]bool
}

// note records node when err says it did not answer.
func (d *downNodes) note(err error, node string) {
	if !errors.Is(err, errkind.Unreachable) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nodes == nil {
		d.nodes = map[string]bool{}
	}
	d.nodes[node] = true
}

func (d *downNodes) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.nodes))
	for n := range d.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
