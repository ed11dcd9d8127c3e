package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"shoal/internal/jobstore"
)

// MaxFollowWait bounds the wait of GET /v1/store/follow.
const MaxFollowWait = time.Minute

// StoreService is this node's replica of the job store as other nodes follow
// it (internal/agent). Same contract as [JobService].
type StoreService interface {
	// Follow is jobstore.Store.Follow: a node that is not a server of the job
	// store refuses with errkind.NotAvailable, so that the follower asks
	// another.
	Follow(ctx context.Context, after uint64, wait time.Duration) (jobstore.FollowReply, error)
}

// SetStoreService plugs in the job store; nil unplugs it.
func (s *Server) SetStoreService(st StoreService) {
	if st == nil {
		st = Unavailable{}
	}
	s.store.Store(&st)
}

func (s *Server) storeService() StoreService { return *s.store.Load() }

var _ StoreService = Unavailable{}

func (Unavailable) Follow(context.Context, uint64, time.Duration) (jobstore.FollowReply, error) {
	return jobstore.FollowReply{}, notAvailable("job store")
}

// followStore answers GET /v1/store/follow?after=I&wait=D: a long poll of a
// node that follows the job store from this one.
func (s *Server) followStore(w http.ResponseWriter, r *http.Request) error {
	if err := noQuery(r, "after", "wait"); err != nil {
		return err
	}
	q := r.URL.Query()
	after, err := strconv.ParseUint(q.Get("after"), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: after=%q: want the index the follower holds", ErrBadRequest, q.Get("after"))
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 || wait > MaxFollowWait {
			return fmt.Errorf("%w: wait=%q: want a duration from 0s to %v (such as 10s)", ErrBadRequest, v, MaxFollowWait)
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// A server shutting down answers at once: its Shutdown waits for requests
	// in progress, and a wait would hold it up to its end.
	defer context.AfterFunc(s.closing, cancel)()
	reply, err := s.storeService().Follow(ctx, after, wait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

// FollowStore calls GET /v1/store/follow: the commands of the job store
// applied after index after, once there are some or wait has passed.
func (c *Client) FollowStore(ctx context.Context, after uint64, wait time.Duration) (jobstore.FollowReply, error) {
	var out jobstore.FollowReply
	q := url.Values{"after": {strconv.FormatUint(after, 10)}, "wait": {wait.String()}}
	err := c.call(ctx, "GET", "/v1/store/follow?"+q.Encode(), nil, &out)
	return out, err
}
