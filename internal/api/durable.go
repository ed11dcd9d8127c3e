package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"shoal/internal/job"
	"shoal/internal/shard"
)

// UploadRequest is the body of POST /v1/shards/{job}/{epoch}/{rank}/upload: the
// node puts its copy of the shard into the object store at Location, as rank's
// shard of an epoch of Ranks shards, with its own credentials (the AWS_*
// settings of the agent's environment).
type UploadRequest struct {
	Location string `json:"location"`           // s3://BUCKET/PREFIX
	Endpoint string `json:"endpoint,omitempty"` // the server's URL (--durable-endpoint); "": the agent's AWS_ENDPOINT_URL_S3 …
	Ranks    int    `json:"ranks"`              // the epoch's shards
	// Rate bounds the bytes per second the upload may take (0: no bound): the
	// node's link is the job's too.
	Rate int64 `json:"rate,omitempty"`
}

// Uploaded is the answer of an upload: the shard's entry in the epoch's manifest.
type Uploaded struct {
	Size      int64  `json:"size"`
	Checksum  uint64 `json:"checksum"`
	CreatedNs uint64 `json:"created_ns"` // when the checkpoint was taken
}

// Validate checks an upload request, reporting every bad field in one error
// wrapping [ErrBadRequest].
func (u UploadRequest) Validate() error {
	var problems []string
	loc := u.Location
	switch {
	case !strings.HasPrefix(loc, "s3://") || len(loc) > maxLocation:
		problems = append(problems, fmt.Sprintf("location: want s3://BUCKET/PREFIX, at most %d bytes (a node uploads to and downloads from an object store only)", maxLocation))
	case strings.ContainsFunc(loc, func(r rune) bool { return r < ' ' || r == 0x7f }):
		problems = append(problems, fmt.Sprintf("location %q: control characters", loc))
	}
	if p := endpointProblem(u.Endpoint); p != "" {
		problems = append(problems, p)
	}
	if u.Ranks < 1 || u.Ranks > job.MaxRanks {
		problems = append(problems, fmt.Sprintf("ranks %d: want 1 to %d", u.Ranks, job.MaxRanks))
	}
	if u.Rate < 0 {
		problems = append(problems, fmt.Sprintf("rate %d: want bytes per second, 0 for no bound", u.Rate))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrBadRequest, strings.Join(problems, "; "))
	}
	return nil
}

// epochRequest is the body of a request about one rank's shard of an epoch of
// epochRanks shards, between a node and an object store.
type epochRequest interface {
	Validate() error
	epochRanks() int
}

func (u UploadRequest) epochRanks() int   { return u.Ranks }
func (d DownloadRequest) epochRanks() int { return d.Ranks }

// epochShardRequest reads the shard a request names and its body, checked: the
// rank within the epoch's.
func epochShardRequest[T epochRequest](r *http.Request) (shard.Ref, T, error) {
	var req T
	ref, err := shardRef(r)
	if err != nil {
		return ref, req, err
	}
	if err := decodeJSON(r, &req, false); err != nil {
		return ref, req, err
	}
	if err := req.Validate(); err != nil {
		return ref, req, err
	}
	if ref.Rank >= req.epochRanks() {
		return ref, req, fmt.Errorf("%w: rank %d of an epoch of %d shards", ErrBadRequest, ref.Rank, req.epochRanks())
	}
	return ref, req, nil
}

// ShardUploader is the optional part of a [ShardService] that puts a stored
// shard into an object store itself, so that each node uploads its own.
type ShardUploader interface {
	// UploadShard uploads the node's verified copy of ref into the store req
	// names, verifying it again as it passes. A node that cannot reach or
	// write the store (no credentials) answers an error wrapping
	// ErrNotAvailable; a missing shard wraps ErrNotFound.
	UploadShard(ctx context.Context, ref shard.Ref, req UploadRequest) (Uploaded, error)
}

func (s *Server) uploadShard(w http.ResponseWriter, r *http.Request) error {
	ref, req, err := epochShardRequest[UploadRequest](r)
	if err != nil {
		return err
	}
	up, ok := s.shardService().(ShardUploader)
	if !ok {
		return fmt.Errorf("%w: this node does not upload shards", ErrNotAvailable)
	}
	res, err := up.UploadShard(r.Context(), ref, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// UploadShard calls POST /v1/shards/{job}/{epoch}/{rank}/upload: the node puts
// its copy of ref into the object store req names.
func (c *Client) UploadShard(ctx context.Context, ref shard.Ref, req UploadRequest) (Uploaded, error) {
	var u Uploaded
	err := c.call(ctx, "POST", shardPath(ref)+"/upload", req, &u)
	return u, err
}

// DownloadRequest is the body of POST /v1/shards/{job}/{epoch}/{rank}/download:
// the node reads the shard from the object store at Location with its own
// credentials (the AWS_* settings of the agent's environment), verifies it
// against the epoch's manifest entry (Size, Checksum) and its own checksum, and
// keeps it in its shard store, as a shard put there.
type DownloadRequest struct {
	Location string `json:"location"`           // s3://BUCKET/PREFIX
	Endpoint string `json:"endpoint,omitempty"` // the server's URL (--durable-endpoint); "": the agent's AWS_ENDPOINT_URL_S3 …
	Ranks    int    `json:"ranks"`              // the epoch's shards
	// Size and Checksum are the shard's, as the epoch's manifest lists them.
	Size     int64  `json:"size"`
	Checksum uint64 `json:"checksum"`
	// Rate bounds the bytes per second the download may take (0: no bound).
	Rate int64 `json:"rate,omitempty"`
}

// Validate checks a download request, reporting every bad field in one error
// wrapping [ErrBadRequest].
func (d DownloadRequest) Validate() error {
	var problems []string
	if err := (UploadRequest{Location: d.Location, Endpoint: d.Endpoint, Ranks: d.Ranks, Rate: d.Rate}).Validate(); err != nil {
		problems = append(problems, strings.TrimPrefix(err.Error(), ErrBadRequest.Error()+": "))
	}
	if least := int64(shard.HeaderSize + shard.TrailerSize); d.Size < least {
		problems = append(problems, fmt.Sprintf("size %d: want at least %d bytes (a shard's header and trailer)", d.Size, least))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrBadRequest, strings.Join(problems, "; "))
	}
	return nil
}

// ShardDownloader is the optional part of a [ShardService] that takes a shard
// from an object store itself, so that each node reads its own when a job
// resumes from the store.
type ShardDownloader interface {
	// DownloadShard reads ref from the store req names, verifies it and keeps
	// it in the node's shard store. A node that cannot reach or read the store
	// (no credentials) answers an error wrapping ErrNotAvailable; an object that
	// is missing or fails verification wraps ErrCorrupt.
	DownloadShard(ctx context.Context, ref shard.Ref, req DownloadRequest) (Fetched, error)
}

func (s *Server) downloadShard(w http.ResponseWriter, r *http.Request) error {
	ref, req, err := epochShardRequest[DownloadRequest](r)
	if err != nil {
		return err
	}
	down, ok := s.shardService().(ShardDownloader)
	if !ok {
		return fmt.Errorf("%w: this node does not download shards", ErrNotAvailable)
	}
	res, err := down.DownloadShard(r.Context(), ref, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// DownloadShard calls POST /v1/shards/{job}/{epoch}/{rank}/download: the node
// reads ref from the object store req names and keeps it.
func (c *Client) DownloadShard(ctx context.Context, ref shard.Ref, req DownloadRequest) (Fetched, error) {
	var f Fetched
	err := c.call(ctx, "POST", shardPath(ref)+"/download", req, &f)
	return f, err
}

// endpointProblem says what is wrong with an object store's endpoint, or "": it
// is "" or http(s)://HOST[:PORT], printable, with no credentials in it.
func endpointProblem(e string) string {
	switch {
	case e == "":
		return ""
	case len(e) > maxLocation || !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://"),
		strings.ContainsFunc(e, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "endpoint: want http(s)://HOST[:PORT]"
	case strings.Contains(e, "@"):
		return "endpoint: http(s)://HOST[:PORT], with no credentials in it"
	}
	return ""
}
