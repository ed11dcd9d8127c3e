package membership

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// gossipKeyInfo separates the gossip key from every other key derived from the
// cluster secret (the API's HMAC key uses another label), so that learning one
// reveals nothing about the others.
const gossipKeyInfo = "shoal gossip"

// DeriveGossipKey returns the 32-byte AES-256 key that encrypts gossip:
// HKDF-SHA256(secret, salt = none, info = "shoal gossip").
func DeriveGossipKey(secret []byte) ([]byte, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrSecretTooShort, len(secret), MinSecretLen)
	}
	return hkdf.Key(sha256.New, secret, nil, gossipKeyInfo, 32)
}

// keyring returns a memberlist keyring holding the gossip key of secret.
func keyring(secret []byte) (*memberlist.Keyring, error) {
	key, err := DeriveGossipKey(secret)
	if err != nil {
		return nil, err
	}
	return memberlist.NewKeyring(nil, key)
}
