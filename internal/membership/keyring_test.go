package membership

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestDeriveGossipKey(t *testing.T) {
	// Vector computed independently (Python hmac/hashlib, RFC 5869 HKDF).
	secret := []byte("0123456789abcdef0123456789abcdef")
	want, _ := hex.DecodeString("cac386e28d34da1d02ba2cc4595f0e12c82a9597373986d24507e1a11ff62a97")
	got, err := DeriveGossipKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("DeriveGossipKey = %x, want %x", got, want)
	}
	other, _ := DeriveGossipKey([]byte("0123456789abcdef0123456789abcdeF"))
	if bytes.Equal(got, other) {
		t.Errorf("secrets differing in one byte gave the same key")
	}
	if _, err := DeriveGossipKey([]byte("short")); !errors.Is(err, ErrSecretTooShort) {
		t.Errorf("DeriveGossipKey(short) error = %v, want ErrSecretTooShort", err)
	}
	kr, err := keyring(secret)
	if err != nil {
		t.Fatal(err)
	}
	if pk := kr.GetPrimaryKey(); !bytes.Equal(pk, want) {
		t.Errorf("keyring primary key = %x, want %x", pk, want)
	}
}
