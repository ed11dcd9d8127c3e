package shardstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// MaxProbe bounds the bytes one probe writes: enough for the shards of every
// rank a node runs in most jobs, little enough to take a second or so on a slow
// disk. A larger request writes MaxProbe.
const MaxProbe = 256 << 20

// Probe writes size bytes (at most MaxProbe) to a scratch file in the store's
// directory, makes them durable and removes the file: whether the ranks of a
// job could write their shards here now. It returns the reason they could not
// ("no space left on device", "input/output error"), or "" when they could; the
// error is for a probe that could not be made at all.
func (s *Store) Probe(size int64) (string, error) {
	if size <= 0 {
		return "", fmt.Errorf("probe of %d bytes: want at least 1", size)
	}
	size = min(size, MaxProbe)
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return reason(err), nil
	}
	var b [8]byte
	rand.Read(b[:])
	path := filepath.Join(s.Dir, ".probe-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return reason(err), nil
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, min(size, 1<<20))
	for left := size; left > 0; left -= int64(len(buf)) {
		if left < int64(len(buf)) {
			buf = buf[:left]
		}
		if _, err := f.Write(buf); err != nil {
			return reason(err), nil
		}
	}
	if err := f.Sync(); err != nil {
		return reason(err), nil
	}
	return "", nil
}

// reason is the system's words for why a write failed: "no space left on
// device" rather than the path and operation around it.
func reason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}
