package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"shoal/internal/results"
)

// storeResults is a ResultService over a results.Store, as an agent's is
// without the copies of other nodes.
type storeResults struct{ s results.Store }

func (r storeResults) PutResult(_ context.Context, job string, task int, sum string, rd io.Reader) error {
	if err := r.s.Put(job, task, sum, rd); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

func (r storeResults) GetResult(_ context.Context, job string, task int) (io.ReadCloser, int64, string, error) {
	rc, size, sum, err := r.s.Open(job, task)
	if errors.Is(err, results.ErrNotFound) {
		err = fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return rc, size, sum, err
}

func (r storeResults) Results(_ context.Context, job string) ([]int, error) { return r.s.List(job) }

func TestResultRoutes(t *testing.T) {
	s, ts, _ := newTestServer(t, true)
	s.SetResultService(storeResults{results.Store{Dir: t.TempDir()}})
	c := NewClient(ts.URL, testSecret)
	ctx := context.Background()
	body := []byte("tile 3\n")
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	if err := c.PutResult(ctx, "farm-1", 3, sum, body); err != nil {
		t.Fatalf("PutResult: %v", err)
	}
	rc, size, got, err := c.GetResult(ctx, "farm-1", 3)
	if err != nil {
		t.Fatalf("GetResult: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != string(body) || size != int64(len(body)) || got != sum {
		t.Errorf("GetResult = %q, %d, %s; want %q, %d, %s", b, size, got, body, len(body), sum)
	}
	if tasks, err := c.Results(ctx, "farm-1"); err != nil || !reflect.DeepEqual(tasks, []int{3}) {
		t.Errorf("Results = %v, %v; want [3]", tasks, err)
	}
	if tasks, err := c.Results(ctx, "other"); err != nil || len(tasks) != 0 {
		t.Errorf("Results(other) = %v, %v; want none", tasks, err)
	}
	if _, _, _, err := c.GetResult(ctx, "farm-1", 4); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetResult of a task without a result: %v, want ErrNotFound", err)
	}
	// A body that is not what its hash says is not stored.
	other := sha256.Sum256([]byte("something else"))
	if err := c.PutResult(ctx, "farm-1", 5, hex.EncodeToString(other[:]), body); err == nil {
		t.Error("PutResult with the hash of another body: stored, want refused")
	}
	if _, _, _, err := c.GetResult(ctx, "farm-1", 5); !errors.Is(err, ErrNotFound) {
		t.Errorf("after a refused PutResult: GetResult err = %v, want ErrNotFound", err)
	}
	for _, path := range []string{"/v1/results/farm-1/x", "/v1/results/farm-1/-1", "/v1/results/..%2Fx/1"} {
		req, err := c.request(ctx, "GET", path, nil, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.send(req)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrNotFound) {
			t.Errorf("GET %s: err = %v, want a 400 or 404", path, err)
		}
	}
}
