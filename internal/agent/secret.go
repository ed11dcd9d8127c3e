package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"shoal/internal/membership"
)

// NewSecret returns a fresh random cluster secret: 32 random bytes, hex encoded.
func NewSecret() []byte {
	var b [32]byte
	rand.Read(b[:])
	return []byte(hex.EncodeToString(b[:]))
}

// CreateSecret writes a new secret to path, mode 0600, and returns it. It fails
// with an error wrapping os.ErrExist if the file exists.
func CreateSecret(path string) ([]byte, error) {
	s := NewSecret()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create secret: %w", err)
	}
	_, err = f.Write(append(s, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("create secret: %w", err)
	}
	return s, nil
}

// ReadSecret reads a secret file. The secret is the file's content without
// leading and trailing white space; any text of at least
// membership.MinSecretLen bytes will do. Like ssh with its keys, it refuses a
// file that group or others may read.
func ReadSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoSecret, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoSecret, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by others (mode %#o); run: chmod 600 %s", ErrBadSecret, path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoSecret, err)
	}
	s := bytes.TrimSpace(b)
	if len(s) < membership.MinSecretLen {
		return nil, fmt.Errorf("%w: %s holds %d bytes, want at least %d", ErrBadSecret, path, len(s), membership.MinSecretLen)
	}
	return s, nil
}
