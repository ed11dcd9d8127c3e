package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/farm"
	"shoal/internal/results"
)

// resultService is the API's view of the node's task farm results: its own
// copies, and through the job store's ledger, the nodes holding the others.
type resultService struct {
	a     *Agent
	store results.Store
}

var _ api.ResultService = (*resultService)(nil)

func (s *resultService) PutResult(ctx context.Context, job string, task int, sum string, r io.Reader) error {
	err := s.store.Put(job, task, sum, r)
	if errors.Is(err, results.ErrMismatch) || errors.Is(err, results.ErrTooLarge) {
		return fmt.Errorf("%w: %v", errkind.BadRequest, err)
	}
	return err
}

// GetResult reads the node's own copy, or else asks the nodes the job's ledger
// names as holders, in turn.
func (s *resultService) GetResult(ctx context.Context, job string, task int) (io.ReadCloser, int64, string, error) {
	rc, size, sum, err := s.store.Open(job, task)
	switch {
	case err == nil:
		return rc, size, sum, nil
	case errors.Is(err, results.ErrCorrupt):
		s.a.log.Warn("stored result is corrupt; reading another copy", "job", job, "task", task)
	case !errors.Is(err, results.ErrNotFound):
		return nil, 0, "", err
	}
	r, ok := s.ledgerResult(job, task)
	if !ok {
		return nil, 0, "", fmt.Errorf("%w: task %d of job %s has no stored result", errkind.NotFound, task, job)
	}
	var errs []error
	for _, h := range r.Holders {
		if h == s.a.cfg.Name {
			continue
		}
		n, ok := s.a.members.Node(h)
		if !ok || n.Meta.API == "" {
			errs = append(errs, fmt.Errorf("%s: not a member", h))
			continue
		}
		rc, size, sum, err := s.a.peers.Get(n.Meta.API).GetResult(ctx, job, task)
		if err == nil {
			return rc, size, sum, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", h, err))
	}
	return nil, 0, "", fmt.Errorf("%w: no copy of the result of task %d of job %s could be read: %v",
		errkind.NotAvailable, task, job, errors.Join(errs...))
}

// ledgerResult looks task up in the job's ledger, as this node's replica of
// the job store holds it.
func (s *resultService) ledgerResult(job string, task int) (farm.Result, bool) {
	if s.a.store == nil {
		return farm.Result{}, false
	}
	info, book, err := s.a.store.Job(job)
	if err != nil || info.Spec.Farm == nil || len(book) == 0 {
		return farm.Result{}, false
	}
	var l farm.Ledger
	if json.Unmarshal(book, &l) != nil {
		return farm.Result{}, false
	}
	return l.Result(task)
}

func (s *resultService) Results(ctx context.Context, job string) ([]int, error) {
	return s.store.List(job)
}
