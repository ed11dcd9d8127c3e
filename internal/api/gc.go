package api

import (
	"context"
	"fmt"
	"net/http"

	"shoal/internal/job"
)

// GCRequest is the optional body of POST /v1/gc: collect job data now under the
// retention policy (docs/retention.md), as every agent also does by itself.
type GCRequest struct {
	// DryRun lists what would be removed, and what is kept and why, without
	// removing anything.
	DryRun bool `json:"dry_run,omitempty"`
	// Job limits the collection to one job, whose data goes now whatever its
	// grace period or Keep; refused (409) while the job has not ended. A job
	// the job store does not know may be named too.
	Job string `json:"job,omitempty"`
	// Node limits the collection to the node of that name; "" asks every live
	// node, through the agent that receives the request.
	Node string `json:"node,omitempty"`
}

// Validate reports what is wrong with the request, naming the field.
func (g GCRequest) Validate() error {
	if g.Job != "" && !job.ValidID(g.Job) {
		return fmt.Errorf("%w: job %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadRequest, g.Job)
	}
	if len(g.Node) > 255 {
		return fmt.Errorf("%w: node: longer than 255 bytes", ErrBadRequest)
	}
	return nil
}

// GCItem is one piece of job data on a node and what the collection did with it.
type GCItem struct {
	Job string `json:"job,omitempty"` // "" for a cached file
	// What is shards (the job's checkpoint directory), epoch (one epoch of
	// it), spares (its spares, Path ending in r*.spare), job-dir
	// (DATA/jobs/JOB), coord-dir (DATA/coord/JOB), results (DATA/results/JOB),
	// durable (the job's epochs in an object store, Path its s3://BUCKET/PREFIX:
	// `shoal gc --job` on the job store's leader) or file (a cached job file,
	// DATA/files/SHA256).
	What   string `json:"what"`
	Epoch  uint64 `json:"epoch,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	// Removed is set on what was removed (in a dry run: would be); the rest is kept.
	Removed bool   `json:"removed"`
	Reason  string `json:"reason"`
	// Error says why removing it failed; Removed is then false.
	Error string `json:"error,omitempty"`
}

// GCReport is what one node collected.
type GCReport struct {
	Node  string   `json:"node"`
	Items []GCItem `json:"items"`
	// Skipped says why the node was not asked: it is down (it collects by
	// itself when it comes back) or has left.
	Skipped string `json:"skipped,omitempty"`
	// Error says why asking the node failed, or why it refused.
	Error string `json:"error,omitempty"`
}

// GCResult is the answer of POST /v1/gc: one report per node asked, by name.
type GCResult struct {
	Nodes []GCReport `json:"nodes"`
}

// GCService collects job data on this node and, for a request naming no node,
// asks the other live nodes too. Same concurrency and error contract as
// [JobService]; a job that has not ended is refused with [ErrConflict].
type GCService interface {
	Collect(ctx context.Context, req GCRequest) (GCResult, error)
}

func (Unavailable) Collect(context.Context, GCRequest) (GCResult, error) {
	return GCResult{}, notAvailable("garbage collector")
}

// SetGCService plugs in the collector; nil unplugs it.
func (s *Server) SetGCService(g GCService) {
	if g == nil {
		g = Unavailable{}
	}
	s.gc.Store(&g)
}

func (s *Server) gcService() GCService { return *s.gc.Load() }

func (s *Server) collect(w http.ResponseWriter, r *http.Request) error {
	var req GCRequest
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	res, err := s.gcService().Collect(r.Context(), req)
	if err != nil {
		return err
	}
	if res.Nodes == nil {
		res.Nodes = []GCReport{}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// Collect calls POST /v1/gc.
func (c *Client) Collect(ctx context.Context, req GCRequest) (GCResult, error) {
	var out GCResult
	err := c.call(ctx, "POST", "/v1/gc", req, &out)
	return out, err
}
