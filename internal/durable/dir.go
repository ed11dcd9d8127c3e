package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"shoal/internal/ckpt"
	"shoal/internal/dirsync"
)

// Save writes epoch m.Epoch of the job m describes into dir as its one complete
// epoch, the shards read from shard(rank), and removes every other epoch dir holds.
// m's Identity, Job, Epoch and SlurmJob are the caller's; Save fills in the shards'
// sizes and checksums, and CreatedNs from rank 0's shard. Each shard is verified
// before it is written: one that fails (or the wrong job's, epoch or rank) fails the
// save, and dir keeps what it had. Save is not safe for concurrent use on one dir.
func Save(dir string, m Manifest, shard func(rank int) (io.ReadCloser, error)) error {
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
		h, created, err := saveShard(filepath.Join(tmp, shardName(r)), shard, r, m)
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

// saveShard reads rank's shard, verifies it as the shard of m's job, epoch and rank,
// and writes it to path, fsynced. It returns when the checkpoint was taken.
func saveShard(path string, shard func(rank int) (io.ReadCloser, error), rank int, m Manifest) (ShardEntry, uint64, error) {
	rc, err := shard(rank)
	if err != nil {
		return ShardEntry{}, 0, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return ShardEntry{}, 0, err
	}
	s, err := ckpt.Parse(b)
	if err != nil {
		return ShardEntry{}, 0, err
	}
	if err := s.Check(ckpt.Header{Job: m.Job, Epoch: m.Epoch, Rank: uint32(rank), NRanks: uint32(m.Ranks)}); err != nil {
		return ShardEntry{}, 0, err
	}
	if err := writeSync(path, b); err != nil {
		return ShardEntry{}, 0, err
	}
	return ShardEntry{Size: int64(len(b)), Checksum: s.Checksum}, s.CreatedNs, nil
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
		if _, err := ReadShard(dir, m, r); err != nil {
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
	if !m.Identity.Equal(want) {
		return m, fmt.Errorf("%w: %s holds epoch %d of %s (job %s), not of %s", ErrForeign, dir, m.Epoch, m.Identity, m.Job, want)
	}
	return m, nil
}

// ShardPath is the file of rank's shard of the epoch m describes in dir.
func ShardPath(dir string, m Manifest, rank int) string {
	return filepath.Join(dir, epochDir(m.Epoch), shardName(rank))
}

// ReadShard reads rank's shard of the epoch m describes in dir and verifies it
// against m: an [ErrCorrupt] when it fails.
func ReadShard(dir string, m Manifest, rank int) ([]byte, error) {
	path := ShardPath(dir, m, rank)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	s, err := ckpt.Parse(b)
	if err == nil {
		err = s.Check(ckpt.Header{Job: m.Job, Epoch: m.Epoch, Rank: uint32(rank), NRanks: uint32(m.Ranks)})
	}
	if err == nil && (s.Checksum != m.Shards[rank].Checksum || int64(len(b)) != m.Shards[rank].Size) {
		err = fmt.Errorf("checksum %#016x and size %d, manifest says %#016x and %d", s.Checksum, len(b), m.Shards[rank].Checksum, m.Shards[rank].Size)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return b, nil
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
