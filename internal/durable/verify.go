package durable

import (
	"errors"
	"fmt"
	"io"

	"shoal/internal/shard"
)

// verifyingReader passes a shard through, verifying it as it is read: at its end it
// returns an [ErrCorrupt] error instead of io.EOF when the bytes are not the shard of
// job, epoch and rank that the manifest lists, with that size and checksum.
type verifyingReader struct {
	rc    io.ReadCloser
	name  string // the shard's path or key, for errors
	v     *shard.Verifier
	want  shard.Header
	entry ShardEntry
	err   error // the verdict, once given
}

func newVerifyingReader(rc io.ReadCloser, name string, m Manifest, rank int) *verifyingReader {
	return newEntryReader(rc, name, shard.Header{Job: m.Job, Epoch: m.Epoch, Rank: uint32(rank), NRanks: uint32(m.Ranks)}, m.Shards[rank])
}

// newEntryReader is a verifyingReader of the shard want names, which its
// manifest lists as e.
func newEntryReader(rc io.ReadCloser, name string, want shard.Header, e ShardEntry) *verifyingReader {
	return &verifyingReader{rc: rc, name: name, v: shard.NewVerifier(e.Size), want: want, entry: e}
}

func (r *verifyingReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.rc.Read(p)
	r.v.Write(p[:n])
	if errors.Is(err, io.EOF) {
		r.err = r.verdict()
		return n, r.err
	}
	return n, err
}

// verdict checks the whole shard read, once it has ended: io.EOF when it is the one
// wanted.
func (r *verifyingReader) verdict() error {
	h, sum, err := r.v.Sum()
	if err == nil {
		err = h.Check(r.want)
	}
	if err == nil && sum != r.entry.Checksum {
		err = fmt.Errorf("checksum %#016x, manifest says %#016x", sum, r.entry.Checksum)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, r.name, err)
	}
	return io.EOF
}

func (r *verifyingReader) Close() error { return r.rc.Close() }
