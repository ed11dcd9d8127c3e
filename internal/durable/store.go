package durable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Store is where a job's durable epochs are kept: a directory of a shared file system
// ([DirStore]) or a bucket of an object store ([S3Store]). Every method may run while
// a job's ranks run; a Store is safe for concurrent use by readers, but one job has one
// saver at a time (Save, Clear): two savers of the same store would remove each
// other's epochs.
type Store interface {
	// Save keeps epoch m.Epoch of the job m describes, each rank's shard read from
	// src and verified as it passes, and makes it current only once every shard is
	// kept: a save that fails or stops midway leaves the previous epoch current. m's
	// Identity, Job, Epoch and SlurmJob are the caller's; Save fills in the shards'
	// sizes and checksums and CreatedNs. Saving an epoch already kept does nothing.
	Save(ctx context.Context, m Manifest, src Source) error
	// Newest returns the manifest of the newest complete epoch whose every shard
	// verifies and that want may resume: [ErrNoEpoch] when there is none,
	// [ErrCorrupt] or [ErrForeign] (wrapped, one line) when there is one that cannot
	// be resumed. It changes nothing.
	Newest(ctx context.Context, want Identity) (Manifest, error)
	// Peek is Newest without reading the shards: the newest complete epoch's
	// manifest, checked against want.
	Peek(ctx context.Context, want Identity) (Manifest, error)
	// OpenShard opens rank's shard of the epoch m describes (as Newest returned it)
	// and returns its size. The reader verifies what it reads: at the end of the
	// shard it returns an [ErrCorrupt] error instead of io.EOF when the bytes are
	// not the shard m lists.
	OpenShard(ctx context.Context, m Manifest, rank int) (io.ReadCloser, int64, error)
	// Clear removes every epoch the store keeps, complete or not, and nothing
	// else: the job finished, and a later run of it starts afresh.
	Clear(ctx context.Context) error
	// String is the store's location as the user gave it (DIR or s3://BUCKET/PREFIX),
	// for messages. It never holds a credential.
	String() string
}

// Source opens rank's shard of the epoch being saved and returns its size, or -1
// when it is not known before the end.
type Source func(rank int) (io.ReadCloser, int64, error)

var (
	_ Store = (*DirStore)(nil)
	_ Store = (*S3Store)(nil)
)

// Location is where --durable says epochs are kept: a directory (Dir, absolute) or
// an object store's bucket and key prefix.
type Location struct {
	Dir    string
	Bucket string
	Prefix string // without leading or trailing slashes; "" for the bucket's top
}

// String is the location as it is written: DIR or s3://BUCKET/PREFIX.
func (l Location) String() string {
	if l.Bucket == "" {
		return l.Dir
	}
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// ParseLocation parses --durable's value: an absolute directory, or s3://BUCKET/PREFIX
// with a valid bucket name (the prefix may be empty). Its errors are one line naming
// the value.
func ParseLocation(s string) (Location, error) {
	rest, isS3 := strings.CutPrefix(s, "s3://")
	if !isS3 {
		if strings.Contains(s, "://") {
			return Location{}, fmt.Errorf("durable: %q: neither an absolute directory nor s3://BUCKET/PREFIX", s)
		}
		if !filepath.IsAbs(s) {
			return Location{}, fmt.Errorf("durable: %q: a directory must be an absolute path (or give s3://BUCKET/PREFIX)", s)
		}
		return Location{Dir: filepath.Clean(s)}, nil
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("durable: %q: no bucket (want s3://BUCKET/PREFIX)", s)
	}
	if err := s3utils.CheckValidBucketNameStrict(bucket); err != nil {
		return Location{}, fmt.Errorf("durable: %q: bad bucket name %q: %v", s, bucket, err)
	}
	prefix = strings.Trim(prefix, "/")
	for _, part := range strings.Split(prefix, "/") {
		if prefix != "" && (part == "" || part == "." || part == "..") {
			return Location{}, fmt.Errorf("durable: %q: prefix %q has an empty, . or .. part", s, prefix)
		}
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

// Open returns the store at loc: a [DirStore] or an [S3Store] configured from the
// environment and opts.
func Open(loc Location, opts S3Options) (Store, error) {
	if loc.Bucket == "" {
		if loc.Dir == "" {
			return nil, errors.New("durable: no location")
		}
		return &DirStore{Dir: loc.Dir}, nil
	}
	return NewS3Store(loc, opts)
}

// DirStore keeps epochs in a directory of a shared file system: [Save], [Newest],
// [Peek] and [Clear] on Dir. It keeps one complete epoch.
type DirStore struct {
	Dir string
}

func (d *DirStore) String() string { return d.Dir }

func (d *DirStore) Save(_ context.Context, m Manifest, src Source) error {
	return Save(d.Dir, m, func(rank int) (io.ReadCloser, error) {
		rc, _, err := src(rank)
		return rc, err
	})
}

func (d *DirStore) Newest(_ context.Context, want Identity) (Manifest, error) {
	return Newest(d.Dir, want)
}

func (d *DirStore) Peek(_ context.Context, want Identity) (Manifest, error) {
	return Peek(d.Dir, want)
}

func (d *DirStore) OpenShard(_ context.Context, m Manifest, rank int) (io.ReadCloser, int64, error) {
	if rank < 0 || rank >= len(m.Shards) {
		return nil, 0, fmt.Errorf("durable: rank %d of an epoch of %d ranks", rank, len(m.Shards))
	}
	path := ShardPath(d.Dir, m, rank)
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	return newVerifyingReader(f, path, m, rank), m.Shards[rank].Size, nil
}

func (d *DirStore) Clear(context.Context) error { return Clear(d.Dir) }
