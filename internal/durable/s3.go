package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"shoal/internal/shard"
)

// S3Options configure an [S3Store] beyond what the environment gives it.
type S3Options struct {
	// Endpoint is the server's URL, http(s)://HOST[:PORT] (--durable-endpoint); ""
	// takes AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then AWS S3 itself.
	Endpoint string
	// Logf, when set, is told of what the store does that no error reports: an epoch
	// refused for a corrupt object in favour of the one before, orphans removed.
	Logf func(format string, args ...any)
}

// partSize is the part of a multipart upload, and what minio-go buffers of a shard of
// unknown size: a shard of at most this is one PUT.
const partSize = 16 << 20

// maxManifest bounds a manifest read: a million ranks' entries fit.
const maxManifest = 64 << 20

// S3Store keeps epochs in a bucket of an S3-compatible object store, under a key
// prefix (see the package doc for the layout and what is kept). Its endpoint, region
// and credentials come from the standard AWS environment variables, the shared
// credentials file (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE) and, on EC2, the
// instance's role; [S3Options.Endpoint] overrides the endpoint.
type S3Store struct {
	loc   Location
	c     *minio.Client
	creds *credentials.Credentials
	logf  func(format string, args ...any)
}

// NewS3Store returns the store at loc, which names a bucket. It does not reach the
// server: a bad endpoint or credential shows in the first call.
func NewS3Store(loc Location, opts S3Options) (*S3Store, error) {
	endpoint := opts.Endpoint
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if endpoint == "" {
			endpoint = os.Getenv(v)
		}
	}
	host, secure := "s3.amazonaws.com", true
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || strings.Trim(u.Path, "/") != "" || u.User != nil || u.RawQuery != "" {
			// The value is not echoed: it may hold a user and password.
			return nil, errors.New("durable: the S3 endpoint is not http(s)://HOST[:PORT]")
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
	})
	c, err := minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region})
	if err != nil {
		return nil, fmt.Errorf("durable: %s: %v", loc, err)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &S3Store{loc: loc, c: c, creds: creds, logf: logf}, nil
}

func (s *S3Store) String() string { return s.loc.String() }

// key is the object key of name (epoch-N/...) under the store's prefix.
func (s *S3Store) key(name string) string {
	if s.loc.Prefix == "" {
		return name
	}
	return s.loc.Prefix + "/" + name
}

// where is a key as a user reads it, s3://BUCKET/KEY.
func (s *S3Store) where(key string) string { return "s3://" + s.loc.Bucket + "/" + key }

// fail wraps err from the server with what was done, in one line, with any
// credential the message might repeat taken out.
func (s *S3Store) fail(what string, err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrForeign) || errors.Is(err, ErrNoEpoch) {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.Code != "" && !strings.Contains(msg, resp.Code) {
		msg = resp.Code + ": " + msg
	}
	if v, cerr := s.creds.GetWithContext(nil); cerr == nil {
		for _, secret := range []string{v.SecretAccessKey, v.SessionToken} {
			if secret != "" {
				msg = strings.ReplaceAll(msg, secret, "[redacted]")
			}
		}
	}
	return &serverError{msg: fmt.Sprintf("durable: %s: %s: %s", s.loc, what, msg), err: err}
}

// serverError is an error from the object store, its message cleaned of credentials.
type serverError struct {
	msg string
	err error
}

func (e *serverError) Error() string { return e.msg }
func (e *serverError) Unwrap() error { return e.err }

// gone reports whether err says the object does not exist.
func gone(err error) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && (resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound)
}

// epochObjects are the objects of one epoch under the prefix.
type epochObjects struct {
	keys     []string
	manifest bool
}

// list returns the objects under the prefix by epoch; objects of other names are
// not the store's and are left out.
func (s *S3Store) list(ctx context.Context) (map[uint64]*epochObjects, error) {
	prefix := ""
	if s.loc.Prefix != "" {
		prefix = s.loc.Prefix + "/"
	}
	out := map[uint64]*epochObjects{}
	for obj := range s.c.ListObjects(ctx, s.loc.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, s.fail("listing", obj.Err)
		}
		dir, name, ok := strings.Cut(strings.TrimPrefix(obj.Key, prefix), "/")
		e, isEpoch := parseEpochDir(dir)
		if !ok || !isEpoch || name == "" {
			continue
		}
		eo := out[e]
		if eo == nil {
			eo = &epochObjects{}
			out[e] = eo
		}
		eo.keys = append(eo.keys, obj.Key)
		eo.manifest = eo.manifest || name == ManifestName
	}
	return out, nil
}

// complete returns the epochs with a manifest, newest first.
func complete(epochs map[uint64]*epochObjects) []uint64 {
	var out []uint64
	for e, eo := range epochs {
		if eo.manifest {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// remove deletes keys, one at a time (every S3-compatible server has DeleteObject).
func (s *S3Store) remove(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := s.c.RemoveObject(ctx, s.loc.Bucket, k, minio.RemoveObjectOptions{}); err != nil && !gone(err) {
			return s.fail("removing "+s.where(k), err)
		}
	}
	return nil
}

// Save uploads every rank's shard under epoch-N/, verified as it passes, then the
// manifest, which makes the epoch current: [S3Store.Begin], [S3Store.PutShard] for
// each rank, then [S3Store.Commit], all from this process.
func (s *S3Store) Save(ctx context.Context, m Manifest, src Source) error {
	saved, err := s.Begin(ctx, m)
	if err != nil || saved {
		return err
	}
	m.Shards = make([]ShardEntry, m.Ranks)
	for r := range m.Ranks {
		h, created, err := s.putFrom(ctx, m, r, src)
		if err != nil {
			// What was uploaded of this epoch has no manifest: the next save removes it,
			// and this one tries to now.
			s.Abort(ctx, m.Epoch)
			return err
		}
		m.Shards[r] = h
		if r == 0 {
			m.CreatedNs = created
		}
	}
	return s.Commit(ctx, m)
}

// Begin readies the store for the shards of epoch m.Epoch, which any process may
// then upload with [S3Store.PutShard] (each node its own) before one commits them.
// It removes the objects of every epoch without a manifest (a save that stopped
// before its manifest), and reports saved when the epoch is kept already.
func (s *S3Store) Begin(ctx context.Context, m Manifest) (saved bool, err error) {
	epochs, err := s.list(ctx)
	if err != nil {
		return false, err
	}
	if eo := epochs[m.Epoch]; eo != nil && eo.manifest {
		return true, nil
	}
	var orphans []string
	for e, eo := range epochs {
		if !eo.manifest {
			orphans = append(orphans, eo.keys...)
			s.logf("removing %d objects of epoch %d, which has no manifest", len(eo.keys), e)
		}
	}
	return false, s.remove(ctx, orphans)
}

// Commit writes the manifest of epoch m.Epoch, whose every shard is uploaded and
// listed in m.Shards with m.CreatedNs (rank 0's), which makes it current; then every
// complete epoch but it and the one before goes.
func (s *S3Store) Commit(ctx context.Context, m Manifest) error {
	m.Format = Format
	if err := m.Validate(); err != nil {
		return fmt.Errorf("durable: %s: manifest: %v", s.loc, err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	key := s.key(path.Join(epochDir(m.Epoch), ManifestName))
	if _, err := s.c.PutObject(ctx, s.loc.Bucket, key, strings.NewReader(string(b)), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/json"}); err != nil {
		return s.fail("writing "+s.where(key), err)
	}
	epochs, err := s.list(ctx)
	if err != nil {
		return err
	}
	var old []string
	done := complete(epochs)
	for _, e := range done[min(2, len(done)):] {
		old = append(old, epochs[e].keys...)
	}
	return s.remove(ctx, old)
}

// Abort removes what there is of epoch e, as far as it can: an upload that will not
// be committed. The next Begin removes what it leaves.
func (s *S3Store) Abort(ctx context.Context, e uint64) {
	epochs, err := s.list(ctx)
	if err == nil && epochs[e] != nil && !epochs[e].manifest {
		s.remove(ctx, epochs[e].keys)
	}
}

// putFrom uploads rank's shard from src ([S3Store.PutShard]).
func (s *S3Store) putFrom(ctx context.Context, m Manifest, rank int, src Source) (ShardEntry, uint64, error) {
	rc, size, err := src(rank)
	if err != nil {
		return ShardEntry{}, 0, fmt.Errorf("epoch %d rank %d: %w", m.Epoch, rank, err)
	}
	defer rc.Close()
	return s.PutShard(ctx, m, rank, rc, size)
}

// PutShard uploads rank's shard of epoch m.Epoch (of m.Job's m.Ranks) from r, size
// bytes or -1 when not known, verifying it as it passes, and returns its entry for
// the manifest and when the checkpoint was taken. A shard that fails verification
// is an error: it was uploaded, but no manifest will name it.
func (s *S3Store) PutShard(ctx context.Context, m Manifest, rank int, r io.Reader, size int64) (ShardEntry, uint64, error) {
	key := s.key(path.Join(epochDir(m.Epoch), shardName(rank)))
	v := shard.NewVerifier(size)
	info, err := s.c.PutObject(ctx, s.loc.Bucket, key, io.TeeReader(r, v), max(size, -1),
		minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: partSize})
	if err != nil {
		return ShardEntry{}, 0, s.fail(fmt.Sprintf("uploading epoch %d rank %d to %s", m.Epoch, rank, s.where(key)), err)
	}
	h, sum, err := v.Sum()
	if err == nil {
		err = h.Check(shard.Header{Job: m.Job, Epoch: m.Epoch, Rank: uint32(rank), NRanks: uint32(m.Ranks)})
	}
	if err != nil {
		return ShardEntry{}, 0, fmt.Errorf("epoch %d rank %d: %w", m.Epoch, rank, err)
	}
	return ShardEntry{Size: info.Size, Checksum: sum}, h.CreatedNs, nil
}

func (s *S3Store) Newest(ctx context.Context, want Identity) (Manifest, error) {
	return s.newest(ctx, want, true)
}

func (s *S3Store) Peek(ctx context.Context, want Identity) (Manifest, error) {
	return s.newest(ctx, want, false)
}

// newest returns the newest complete epoch that is whole (its manifest, and with
// verify every shard): a corrupt one is refused, said through Logf, and the one
// before it tried. An epoch of another job ends the search: the store is not this
// job's.
func (s *S3Store) newest(ctx context.Context, want Identity, verify bool) (Manifest, error) {
	epochs, err := s.list(ctx)
	if err != nil {
		return Manifest{}, err
	}
	var refused error
	for _, e := range complete(epochs) {
		m, err := s.manifest(ctx, e)
		if err == nil && !m.Writer().ResumedBy(want) {
			return m, fmt.Errorf("%w: %s holds epoch %d of %s (job %s), not of %s", ErrForeign, s.loc, m.Epoch, m.Writer(), m.Job, want)
		}
		if err == nil && verify {
			for r := range m.Ranks {
				if err = s.verifyShard(ctx, m, r); err != nil {
					break
				}
			}
		}
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return Manifest{}, err
		}
		s.logf("refusing epoch %d: %v", e, err)
		if refused == nil {
			refused = err
		}
	}
	if refused != nil {
		return Manifest{}, refused
	}
	return Manifest{}, ErrNoEpoch
}

// EpochManifest reads and checks epoch e's manifest, and nothing of its
// shards: what a coordinator restarting the job from e reads, whose nodes then
// read and verify the shards themselves.
func (s *S3Store) EpochManifest(ctx context.Context, e uint64) (Manifest, error) {
	return s.manifest(ctx, e)
}

// ReadKept reads the manifest of epoch e kept at location, an object store's
// s3://BUCKET/PREFIX reached at endpoint ("": the environment's), with this
// process's credentials: [ErrNoCredentials] when it has none.
func ReadKept(ctx context.Context, location, endpoint string, e uint64) (Manifest, error) {
	loc, err := ParseLocation(location)
	if err != nil {
		return Manifest{}, err
	}
	if loc.Bucket == "" {
		return Manifest{}, fmt.Errorf("durable: %s: not an object store", location)
	}
	if !HasCredentials() {
		return Manifest{}, fmt.Errorf("%w at %s (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials)", ErrNoCredentials, loc)
	}
	s, err := NewS3Store(loc, S3Options{Endpoint: endpoint})
	if err != nil {
		return Manifest{}, err
	}
	return s.EpochManifest(ctx, e)
}

// manifest reads and checks epoch e's manifest.
func (s *S3Store) manifest(ctx context.Context, e uint64) (Manifest, error) {
	key := s.key(path.Join(epochDir(e), ManifestName))
	var m Manifest
	obj, err := s.c.GetObject(ctx, s.loc.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return m, s.fail("reading "+s.where(key), err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, maxManifest))
	if err != nil && !gone(err) {
		return m, s.fail("reading "+s.where(key), err)
	}
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil {
		err = m.Validate()
	}
	if err == nil && m.Epoch != e {
		err = fmt.Errorf("manifest says epoch %d", m.Epoch)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, s.where(key), err)
	}
	return m, nil
}

// verifyShard reads rank's shard of the epoch m describes through, verifying it.
func (s *S3Store) verifyShard(ctx context.Context, m Manifest, rank int) error {
	rc, _, err := s.OpenShard(ctx, m, rank)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.CopyBuffer(io.Discard, rc, make([]byte, copyBuf))
	if err != nil {
		return s.fail("reading rank "+fmt.Sprint(rank)+"'s shard", err)
	}
	return nil
}

func (s *S3Store) OpenShard(ctx context.Context, m Manifest, rank int) (io.ReadCloser, int64, error) {
	if rank < 0 || rank >= len(m.Shards) {
		return nil, 0, fmt.Errorf("durable: rank %d of an epoch of %d ranks", rank, len(m.Shards))
	}
	rc, err := s.OpenEntry(ctx, shard.Ref{Job: m.Job, Epoch: m.Epoch, Rank: rank}, m.Ranks, m.Shards[rank])
	return rc, m.Shards[rank].Size, err
}

// OpenEntry opens the shard ref of an epoch of ranks shards, which the epoch's
// manifest lists as e: what a node reads of an epoch whose manifest shoal run read.
// The reader verifies what it reads, as [S3Store.OpenShard]'s does: at the end of
// the shard it returns an [ErrCorrupt] error instead of io.EOF when the bytes are
// not that shard, of e's size and checksum.
func (s *S3Store) OpenEntry(ctx context.Context, ref shard.Ref, ranks int, e ShardEntry) (io.ReadCloser, error) {
	if ref.Rank < 0 || ref.Rank >= ranks {
		return nil, fmt.Errorf("durable: rank %d of an epoch of %d ranks", ref.Rank, ranks)
	}
	key := s.key(path.Join(epochDir(ref.Epoch), shardName(ref.Rank)))
	obj, err := s.c.GetObject(ctx, s.loc.Bucket, key, minio.GetObjectOptions{})
	if err == nil {
		var st minio.ObjectInfo
		if st, err = obj.Stat(); err == nil && st.Size != e.Size {
			obj.Close()
			return nil, fmt.Errorf("%w: %s: %d bytes, manifest says %d", ErrCorrupt, s.where(key), st.Size, e.Size)
		}
	}
	if gone(err) {
		return nil, fmt.Errorf("%w: %s: missing", ErrCorrupt, s.where(key))
	}
	if err != nil {
		return nil, s.fail("reading "+s.where(key), err)
	}
	want := shard.Header{Job: ref.Job, Epoch: ref.Epoch, Rank: uint32(ref.Rank), NRanks: uint32(ranks)}
	return newEntryReader(obj, s.where(key), want, e), nil
}

// Clear removes every object of an epoch under the prefix, complete or not.
func (s *S3Store) Clear(ctx context.Context) error {
	epochs, err := s.list(ctx)
	if err != nil {
		return err
	}
	var keys []string
	for _, eo := range epochs {
		keys = append(keys, eo.keys...)
	}
	return s.remove(ctx, keys)
}

// RemoveJob removes what the prefix keeps of job id, for the retention of the
// job's data (the agent's collector, with the agent's own credentials, on a
// location the job's user named): the epochs whose manifest names the job, and,
// when no manifest under the prefix names another job, the rest under it too
// (epochs whose save stopped before their manifest). An epoch whose manifest
// names another job, or is corrupt, is left alone. It returns how many epochs
// it removed.
func (s *S3Store) RemoveJob(ctx context.Context, id string) (int, error) {
	epochs, err := s.list(ctx)
	if err != nil {
		return 0, err
	}
	var mine, others []uint64
	for _, e := range complete(epochs) {
		m, err := s.manifest(ctx, e)
		switch {
		case errors.Is(err, ErrCorrupt):
			others = append(others, e) // unreadable: not known to be this job's
		case err != nil:
			return 0, err
		case m.Job == id:
			mine = append(mine, e)
		default:
			others = append(others, e)
		}
	}
	var keys []string
	n := 0
	for e, eo := range epochs {
		switch {
		case slices.Contains(mine, e), !eo.manifest && len(others) == 0:
			keys = append(keys, eo.keys...)
			n++
		}
	}
	return n, s.remove(ctx, keys)
}

// DropAfter removes the epochs of job id numbered after e: a run of the job
// that resumes from epoch e writes its next epochs under those numbers, and an
// epoch kept already under a number is one [S3Store.Begin] reports saved. They
// are epochs the resume did not take (refused as damaged), and epochs whose
// manifest is corrupt; another job's are left alone. It returns how many it
// removed.
func (s *S3Store) DropAfter(ctx context.Context, id string, e uint64) (int, error) {
	epochs, err := s.list(ctx)
	if err != nil {
		return 0, err
	}
	var keys []string
	n := 0
	for _, ep := range complete(epochs) {
		if ep <= e {
			continue
		}
		m, err := s.manifest(ctx, ep)
		switch {
		case err != nil && !errors.Is(err, ErrCorrupt):
			return 0, err
		case err == nil && m.Job != id:
			continue
		}
		keys = append(keys, epochs[ep].keys...)
		n++
	}
	return n, s.remove(ctx, keys)
}

// HasCredentials reports whether this process's environment gives the object store
// credentials without asking a cloud's instance metadata: the AWS_* variables or a
// shared credentials file. An agent without them leaves the upload to shoal run.
func HasCredentials() bool {
	if os.Getenv("AWS_ACCESS_KEY_ID") != "" && os.Getenv("AWS_SECRET_ACCESS_KEY") != "" {
		return true
	}
	file := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return false
		}
		file = filepath.Join(home, ".aws", "credentials")
	}
	_, err := os.Stat(file)
	return err == nil
}

// Paced is r read at no more than rate bytes per second (rate ≤ 0: as fast as it
// comes): an upload that must leave the job most of its node's link.
func Paced(ctx context.Context, r io.Reader, rate int64) io.Reader {
	if rate <= 0 {
		return r
	}
	return &pacedReader{ctx: ctx, r: r, rate: rate, start: time.Now()}
}

type pacedReader struct {
	ctx   context.Context
	r     io.Reader
	rate  int64
	start time.Time
	n     int64
}

func (p *pacedReader) Read(b []byte) (int, error) {
	// Reads of at most a tenth of a second's worth keep the pace smooth.
	if most := max(p.rate/10, 4096); int64(len(b)) > most {
		b = b[:most]
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	due := p.start.Add(time.Duration(float64(p.n) / float64(p.rate) * float64(time.Second)))
	if wait := time.Until(due); wait > 0 {
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			return n, p.ctx.Err()
		}
	}
	return n, err
}
