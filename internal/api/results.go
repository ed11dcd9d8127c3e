package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"shoal/internal/job"
)

// ResultService is this node's store of task farm results (internal/results)
// and its way to the copies other nodes hold. Same concurrency and error
// contract as [JobService]; a result that fails its check wraps [ErrCorrupt].
// The server has validated job ids and task numbers before calling.
type ResultService interface {
	// PutResult stores task's result, read from r, which must hash to sum.
	PutResult(ctx context.Context, job string, task int, sum string, r io.Reader) error
	// GetResult opens task's result, checked against its hash, from this
	// node's store or else from a node that holds a copy; it returns the
	// result's size and hash. The caller closes it.
	GetResult(ctx context.Context, job string, task int) (r io.ReadCloser, size int64, sum string, err error)
	// Results lists the tasks of job whose results this node holds.
	Results(ctx context.Context, job string) ([]int, error)
}

// ResultList is the answer of GET /v1/results/{job}.
type ResultList struct {
	Tasks []int `json:"tasks"`
}

// SetResultService plugs in the result store; nil unplugs it.
func (s *Server) SetResultService(rs ResultService) {
	if rs == nil {
		rs = Unavailable{}
	}
	s.results.Store(&rs)
}

func (s *Server) resultService() ResultService { return *s.results.Load() }

var _ ResultService = Unavailable{}

func (Unavailable) PutResult(context.Context, string, int, string, io.Reader) error {
	return notAvailable("result store")
}
func (Unavailable) GetResult(context.Context, string, int) (io.ReadCloser, int64, string, error) {
	return nil, 0, "", notAvailable("result store")
}
func (Unavailable) Results(context.Context, string) ([]int, error) {
	return nil, notAvailable("result store")
}

// pathTask returns the {job} and {task} path values, checked.
func pathTask(r *http.Request) (string, int, error) {
	id, err := pathJob(r)
	if err != nil {
		return "", 0, err
	}
	t := r.PathValue("task")
	task, err := strconv.Atoi(t)
	if err != nil || task < 0 || task >= job.MaxTasks {
		return "", 0, fmt.Errorf("%w: task %q: want an integer from 0 to %d", ErrBadRequest, t, job.MaxTasks-1)
	}
	return id, task, nil
}

func (s *Server) putResult(w http.ResponseWriter, r *http.Request) error {
	id, task, err := pathTask(r)
	if err != nil {
		return err
	}
	sum := r.Header.Get(HeaderContentSHA256)
	if !job.ValidSHA256(sum) {
		return fmt.Errorf("%w: %s %q: want 64 lower-case hex digits", ErrBadRequest, HeaderContentSHA256, sum)
	}
	if err := s.resultService().PutResult(r.Context(), id, task, sum, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// getResult answers with the result, its hash in [HeaderContentSHA256]. A
// caller on the local socket must own the job.
func (s *Server) getResult(w http.ResponseWriter, r *http.Request) error {
	job, task, err := pathTask(r)
	if err != nil {
		return err
	}
	if CallerOf(r.Context()) != nil {
		if _, err := s.ownedJob(r, job); err != nil {
			return err
		}
	}
	rc, size, sum, err := s.resultService().GetResult(r.Context(), job, task)
	if err != nil {
		return err
	}
	w.Header().Set(HeaderContentSHA256, sum)
	return sendBytes(w, r, rc, size, fmt.Sprintf("result of task %d of job %s", task, job))
}

func (s *Server) listResults(w http.ResponseWriter, r *http.Request) error {
	job, err := pathJob(r)
	if err != nil {
		return err
	}
	tasks, err := s.resultService().Results(r.Context(), job)
	if err != nil {
		return err
	}
	if tasks == nil {
		tasks = []int{}
	}
	writeJSON(w, http.StatusOK, ResultList{Tasks: tasks})
	return nil
}

func resultPath(job string, task int) string {
	return fmt.Sprintf("/v1/results/%s/%d", url.PathEscape(job), task)
}

// PutResult calls PUT /v1/results/{job}/{task} with the result b, which the
// agent stores if it hashes to sum.
func (c *Client) PutResult(ctx context.Context, job string, task int, sum string, b []byte) error {
	resp, err := c.putOctets(ctx, resultPath(job, task), bytes.NewReader(b), sum, int64(len(b)))
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// GetResult calls GET /v1/results/{job}/{task}: the result, its size and the
// hash the agent checked it against; the caller closes it, and checks the
// hash of what it read.
func (c *Client) GetResult(ctx context.Context, job string, task int) (io.ReadCloser, int64, string, error) {
	req, err := c.request(ctx, "GET", resultPath(job, task), nil, "", 0)
	if err != nil {
		return nil, 0, "", err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, 0, "", err
	}
	return resp.Body, resp.ContentLength, resp.Header.Get(HeaderContentSHA256), nil
}

// Results calls GET /v1/results/{job}: the tasks whose results the node holds.
func (c *Client) Results(ctx context.Context, job string) ([]int, error) {
	var l ResultList
	err := c.call(ctx, "GET", "/v1/results/"+url.PathEscape(job), nil, &l)
	return l.Tasks, err
}
