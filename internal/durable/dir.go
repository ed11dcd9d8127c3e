package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"shoal/internal/dirsync"
	"shoal/internal/shard"
)

// Save writes epoch m.Epoch of the job m describes into dir as its one complete
// epoch, the shards read from open(rank), and removes every other epoch dir holds.
// m's Identity, Job, Epoch and SlurmJob are the caller's; Save fills in the shards'
// sizes and checksums, and CreatedNs from rank 0's shard. Each shard is written into
// the epoch's temporary directory and verified as it was written: one that fails (or
// the wrong job's, epoch or rank) fails the save, and dir keeps what it had. Save is
// not safe for concurrent use on one dir.
func Save(dir string, m Manifest, open func(rank int) (io.ReadCloser, error)) error {
	m.Format = Format
	m.Shards = make([]ShardEntry, m.Ranks)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	final := filepath.Join(dir, epochDir(m.Epoch))
	if _, err := os.Stat(final); err == nil {
		return nil // saved already
	}
	tmp := filepath.Join(dir, tmpDir(m.Epoch))
	os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	fail := func(err error) error {
		os.RemoveAll(tmp)
		return err
	}
	for r := range m.Ranks {
		h, created, err := saveShard(filepath.Join(tmp, shardName(r)), open, r, m)
		if err != nil {
			return fail(fmt.Errorf("epoch %d rank %d: %w", m.Epoch, r, err))
		}
		m.Shards[r] = h
		if r == 0 {
			m.CreatedNs = created
		}
	}
	if err := m.Validate(); err != nil {
		return fail(fmt.Errorf("manifest: %v", err))
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := writeSync(filepath.Join(tmp, ManifestName), b); err != nil {
		return fail(err)
	}
	if err := dirsync.Sync(tmp); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	if err := dirsync.Sync(dir); err != nil {
		return err
	}
	// The new epoch is complete on disk: only now may the older one go.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if n == epochDir(m.Epoch) {
			continue
		}
		if isEpochEntry(n) {
			os.RemoveAll(filepath.Join(dir, n))
		}
	}
	return dirsync.Sync(dir)
}

// saveShard copies rank's shard to path, fsynced, then verifies what path holds as the
// shard of m's job, epoch and rank. It returns when the checkpoint was taken. The shard
// passes through a buffer of 1 MiB at most, however large it is (a rank's shard may be
// gigabytes): shoal run saves every rank's.
func saveShard(path string, open func(rank int) (io.ReadCloser, error), rank int, m Manifest) (ShardEntry, uint64, error) {
	rc, err := open(rank)
	if err != nil {
		return ShardEntry{}, 0, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		rc.Close()
		return ShardEntry{}, 0, err
	}
	_, err = io.CopyBuffer(f, rc, make([]byte, copyBuf))
	rc.Close()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ShardEntry{}, 0, err
	}
	h, sum, size, err := verifyFile(path, shard.Header{Job: m.Job, Epoch: m.Epoch, Rank: uint32(rank), NRanks: uint32(m.Ranks)})
	if err != nil {
		return ShardEntry{}, 0, err
	}
	return ShardEntry{Size: size, Checksum: sum}, h.CreatedNs, nil
}

// copyBuf is the buffer a shard is copied through.
const copyBuf = 1 << 20

// verifyFile verifies the shard in path as [ckpt.Verify] does, reading it in pieces,
// and checks that it is want's job, epoch and rank. It returns the shard's header,
// checksum and size.
func verifyFile(path string, want shard.Header) (shard.Header, uint64, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return shard.Header{}, 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return shard.Header{}, 0, 0, err
	}
	h, sum, err := shard.Verify(f, st.Size())
	if err == nil {
		err = h.Check(want)
	}
	return h, sum, st.Size(), err
}

// isEpochEntry reports whether name is an epoch's directory, complete or being
// written: what Save replaces and Clear removes.
func isEpochEntry(name string) bool {
	if _, ok := parseEpochDir(name); ok {
		return true
	}
	var e uint64
	_, err := fmt.Sscanf(name, ".epoch-%d.tmp", &e)
	return err == nil && tmpDir(e) == name
}

// Newest returns the manifest of dir's newest complete epoch, once every shard of
// it has been read and verified against it and want: [ErrNoEpoch] when dir holds
// none (or does not exist), [ErrCorrupt] or [ErrForeign], wrapped with the path and
// the reason in one line, otherwise. It changes nothing in dir.
func Newest(dir string, want Identity) (Manifest, error) {
	m, err := Peek(dir, want)
	if err != nil {
		return m, err
	}
	for r := range m.Ranks {
		if err := verifyShard(dir, m, r); err != nil {
			return m, err
		}
	}
	return m, nil
}

// Peek is [Newest] without reading the shards: the manifest of dir's newest complete
// epoch, checked against want. It costs a directory listing and one small file, so a
// foreign or corrupt manifest is found before anything else is started.
func Peek(dir string, want Identity) (Manifest, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, ErrNoEpoch
	}
	if err != nil {
		return Manifest{}, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	complete := Complete(names)
	if len(complete) == 0 {
		return Manifest{}, ErrNoEpoch
	}
	edir := filepath.Join(dir, epochDir(complete[0]))
	var m Manifest
	b, err := os.ReadFile(filepath.Join(edir, ManifestName))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil {
		err = m.Validate()
	}
	if err == nil && m.Epoch != complete[0] {
		err = fmt.Errorf("manifest says epoch %d", m.Epoch)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %s: %v", ErrCorrupt, edir, ManifestName, err)
	}
	if !m.Writer().ResumedBy(want) {
		return m, fmt.Errorf("%w: %s holds epoch %d of %s (job %s), not of %s", ErrForeign, dir, m.Epoch, m.Writer(), m.Job, want)
	}
	return m, nil
}

// ShardPath is the file of rank's shard of the epoch m describes in dir.
func ShardPath(dir string, m Manifest, rank int) string {
	return filepath.Join(dir, epochDir(m.Epoch), shardName(rank))
}

// verifyShard verifies rank's shard of the epoch m describes in dir against m, reading
// it in pieces: an [ErrCorrupt] when it fails.
func verifyShard(dir string, m Manifest, rank int) error {
	path := ShardPath(dir, m, rank)
	_, sum, size, err := verifyFile(path, shard.Header{Job: m.Job, Epoch: m.Epoch, Rank: uint32(rank), NRanks: uint32(m.Ranks)})
	if err == nil && (sum != m.Shards[rank].Checksum || size != m.Shards[rank].Size) {
		err = fmt.Errorf("checksum %#016x and size %d, manifest says %#016x and %d", sum, size, m.Shards[rank].Checksum, m.Shards[rank].Size)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return nil
}

// writeSync writes b to path and fsyncs it.
func writeSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Clear removes every epoch dir holds, complete or being written, and nothing
// else: the job finished, and a later run of it starts afresh.
func Clear(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n := e.Name(); isEpochEntry(n) {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return dirsync.Sync(dir)
}
