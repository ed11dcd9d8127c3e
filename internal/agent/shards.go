package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/engine"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/shard"
	"shoal/internal/shardstore"
	"shoal/internal/userdir"
)

// CkptDir is the node's checkpoint store in the data directory: the ranks'
// SHOAL_DIR (set by `shoal exec-rank`), and where other nodes' shards are copied.
const CkptDir = "ckpt"

// JobsDir holds one directory per job run on the node (work/, ranks/).
const JobsDir = "jobs"

// RanksDir is where the ranks of job on the node of data dir dataDir record
// their states (engine.WriteRankState, through `shoal exec-rank`).
func RanksDir(dataDir, job string) string {
	return filepath.Join(dataDir, JobsDir, job, "ranks")
}

// shardService is the API's view of the node's checkpoint store and rank states.
type shardService struct {
	store   *shardstore.Store
	dataDir string
	peers   *api.Clients // the agent's, to fetch shards from other nodes
}

var (
	_ api.ShardService       = (*shardService)(nil)
	_ api.ShardSender        = (*shardService)(nil)
	_ api.ShardChangesSender = (*shardService)(nil)
	_ api.ShardUploader      = (*shardService)(nil)
	_ api.ShardDownloader    = (*shardService)(nil)
)

func (s *shardService) GetShard(ctx context.Context, ref shard.Ref) (io.ReadCloser, int64, error) {
	f, info, err := s.store.Open(ref)
	if err != nil {
		return nil, 0, err
	}
	return f, info.Size, nil
}

func (s *shardService) OpenShardToSend(ctx context.Context, ref shard.Ref, link float64) (io.ReadCloser, int64, bool, error) {
	f, info, compress, err := s.store.OpenToSend(ref, link)
	if err != nil {
		return nil, 0, false, err
	}
	return f, info.Size, compress, nil
}

func (s *shardService) OpenShardChanges(ctx context.Context, ref shard.Ref, link float64, base []uint64) (io.ReadCloser, int64, int64, bool, error) {
	return s.store.OpenChanges(ref, link, base)
}

// UploadShard puts the node's verified copy of ref into the object store req names,
// with the credentials of the agent's environment, at no more than req.Rate bytes
// a second; the store verifies it again as it passes.
func (s *shardService) UploadShard(ctx context.Context, ref shard.Ref, req api.UploadRequest) (api.Uploaded, error) {
	loc, err := durable.ParseLocation(req.Location)
	if err != nil || loc.Bucket == "" {
		return api.Uploaded{}, fmt.Errorf("%w: location %q: want s3://BUCKET/PREFIX", errkind.BadRequest, req.Location)
	}
	if !durable.HasCredentials() {
		return api.Uploaded{}, fmt.Errorf("%w: its agent has no credentials for %s (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials)", errkind.NotAvailable, loc)
	}
	store, err := durable.NewS3Store(loc, durable.S3Options{Endpoint: req.Endpoint})
	if err != nil {
		return api.Uploaded{}, fmt.Errorf("%w: %v", errkind.BadRequest, err)
	}
	f, _, err := s.store.Open(ref)
	if err != nil {
		return api.Uploaded{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return api.Uploaded{}, err
	}
	m := durable.Manifest{Identity: durable.Identity{Ranks: req.Ranks}, Job: ref.Job, Epoch: ref.Epoch}
	e, created, err := store.PutShard(ctx, m, ref.Rank, durable.Paced(ctx, f, req.Rate), st.Size())
	if err != nil {
		return api.Uploaded{}, err
	}
	return api.Uploaded{Size: e.Size, Checksum: e.Checksum, CreatedNs: created}, nil
}

// DownloadShard reads ref from the object store req names, with the credentials
// of the agent's environment, at no more than req.Rate bytes a second, and keeps
// it in the node's shard store as [shardService.PutShard] would: verified as it
// is written, against its manifest entry and its own checksum. The request names
// a store to read, never a place on the node: the shard goes where ref says.
func (s *shardService) DownloadShard(ctx context.Context, ref shard.Ref, req api.DownloadRequest) (api.Fetched, error) {
	loc, err := durable.ParseLocation(req.Location)
	if err != nil || loc.Bucket == "" {
		return api.Fetched{}, fmt.Errorf("%w: location %q: want s3://BUCKET/PREFIX", errkind.BadRequest, req.Location)
	}
	if !durable.HasCredentials() {
		return api.Fetched{}, fmt.Errorf("%w: its agent has no credentials for %s (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials)", errkind.NotAvailable, loc)
	}
	store, err := durable.NewS3Store(loc, durable.S3Options{Endpoint: req.Endpoint})
	if err != nil {
		return api.Fetched{}, fmt.Errorf("%w: %v", errkind.BadRequest, err)
	}
	rc, err := store.OpenEntry(ctx, ref, req.Ranks, durable.ShardEntry{Size: req.Size, Checksum: req.Checksum})
	if err != nil {
		return api.Fetched{}, storeError(err)
	}
	defer rc.Close()
	src := &sourceReader{r: durable.Paced(ctx, rc, req.Rate)}
	info, err := s.store.Put(ref, src, req.Size)
	if src.err != nil {
		// What the store gave, not what the node did with it, is the failure.
		return api.Fetched{}, storeError(src.err)
	}
	if err != nil {
		return api.Fetched{}, err
	}
	return api.Fetched{Shard: info, Copied: true, Wire: req.Size}, nil
}

// storeError is err from reading the object store, as the API answers it: an
// object missing or failing verification is corrupt, anything else the store's
// failure (502), neither the request's nor the node's.
func storeError(err error) error {
	if errors.Is(err, durable.ErrCorrupt) {
		return fmt.Errorf("%w: %v", errkind.Corrupt, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %v", errkind.BadGateway, err)
}

// sourceReader passes r through and keeps the first error it gave other than
// io.EOF.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

func (s *shardService) PutShard(ctx context.Context, ref shard.Ref, size int64, r io.Reader) error {
	_, err := s.store.Put(ref, r, size)
	return err
}

func (s *shardService) Shards(ctx context.Context, job, known string) (shard.Index, error) {
	return s.store.WaitIndex(ctx, job, known)
}

func (s *shardService) FetchShard(ctx context.Context, ref shard.Ref, from string) (api.Fetched, error) {
	return s.store.Fetch(ctx, ref, s.peers.Get(from))
}

func (s *shardService) GetParity(ctx context.Context, ref shard.ParityRef) (io.ReadCloser, int64, error) {
	return s.store.OpenParity(ref)
}

func (s *shardService) PutParity(ctx context.Context, ref shard.ParityRef, size int64, r io.Reader) (shard.ParityInfo, error) {
	return s.store.PutParity(ref, r)
}

func (s *shardService) EncodeParity(ctx context.Context, job string, epoch uint64, req api.EncodeRequest) (api.EncodeResult, error) {
	return s.store.EncodeParity(ctx, job, epoch, req, s.source)
}

func (s *shardService) RebuildShard(ctx context.Context, ref shard.Ref, req api.RebuildRequest) (api.Fetched, error) {
	return s.store.RebuildShard(ctx, ref, req, s.source)
}

// source is the node at API address addr, as a holder of pieces.
func (s *shardService) source(addr string) shardstore.PieceSource { return s.peers.Get(addr) }

func (s *shardService) RemoveShards(ctx context.Context, job string, before uint64) ([]uint64, error) {
	if before == 0 {
		return s.store.RemoveJob(job)
	}
	return s.store.RemoveBefore(job, before)
}

func (s *shardService) RequestHold(ctx context.Context, job string) error {
	return s.store.RequestHold(job)
}

func (s *shardService) RequestCheckpoint(ctx context.Context, job string) error {
	return s.store.RequestCheckpoint(job)
}

func (s *shardService) Probe(ctx context.Context, job string, bytes int64) (api.Probe, error) {
	why, err := s.store.Probe(bytes)
	if err != nil {
		return api.Probe{}, fmt.Errorf("%w: %v", errkind.BadRequest, err)
	}
	return api.Probe{Bytes: min(bytes, shardstore.MaxProbe), Error: why}, nil
}

func (s *shardService) RankStates(ctx context.Context, jobID string) ([]job.RankState, error) {
	if !job.ValidID(jobID) { // the path below is built from it
		return nil, fmt.Errorf("%w: job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", errkind.BadRequest, jobID)
	}
	return engine.ReadRankStates(userdir.Tree{Base: filepath.Join(s.dataDir, JobsDir)}, RanksDir(s.dataDir, jobID))
}
