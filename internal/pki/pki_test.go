package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	other  = []byte("another cluster's secret, 0123456789")
)

// The authority is a function of the secret: the same certificate, byte for
// byte, on every node of a cluster, and another one for another secret.
func TestCADerivedFromSecret(t *testing.T) {
	a, err := NewCA(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewCA(append([]byte(nil), secret...))
	c, _ := NewCA(other)
	if !bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Error("two authorities from one secret differ")
	}
	if bytes.Equal(a.CertPEM(), c.CertPEM()) {
		t.Error("two secrets give the same authority")
	}
	if !a.cert.IsCA || a.cert.Subject.CommonName != CAName {
		t.Errorf("authority certificate: IsCA %v, CN %q", a.cert.IsCA, a.cert.Subject.CommonName)
	}
	if _, err := NewCA(nil); err == nil {
		t.Error("an authority from an empty secret")
	}
}

// Issued certificates name the node, carry its addresses, serve both ends, and
// verify against their own authority only.
func TestIssue(t *testing.T) {
	ca, _ := NewCA(secret)
	otherCA, _ := NewCA(other)
	ip := net.ParseIP("10.0.0.7")
	c, err := ca.Issue("n1", []net.IP{ip}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c.Leaf.Subject.CommonName != "n1" || len(c.Leaf.DNSNames) != 1 || !c.Leaf.IPAddresses[0].Equal(ip) {
		t.Errorf("leaf: CN %q, DNS %v, IPs %v", c.Leaf.Subject.CommonName, c.Leaf.DNSNames, c.Leaf.IPAddresses)
	}
	chain := []*x509.Certificate{c.Leaf}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := ca.Verify(chain, use); err != nil {
			t.Errorf("verify for use %d: %v", use, err)
		}
		if err := otherCA.Verify(chain, use); !errors.Is(err, ErrUntrusted) {
			t.Errorf("another cluster's authority verifies it: %v", err)
		}
	}
	if err := ca.Verify(nil, x509.ExtKeyUsageServerAuth); !errors.Is(err, ErrUntrusted) {
		t.Errorf("verify no certificate: %v", err)
	}
	old, _ := ca.Issue("n1", nil, time.Now().Add(-2*leafLifetime))
	if err := ca.Verify([]*x509.Certificate{old.Leaf}, x509.ExtKeyUsageServerAuth); !errors.Is(err, ErrUntrusted) {
		t.Errorf("verify an expired certificate: %v", err)
	}
	for name, want := range map[string]bool{"n1": true, "lab-pc.local": true, "": false, "10.0.0.1": false, "a b": false, "ü": false} {
		if got := hostName(name); got != want {
			t.Errorf("hostName(%q) = %v, want %v", name, got, want)
		}
	}
}

// handshake runs a TLS handshake between client and server configurations over
// a pipe-like TCP pair, and a byte each way; it returns the two ends' errors.
func handshake(t *testing.T, client, server *tls.Config) (cerr, serr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		s := tls.Server(c, server)
		s.SetDeadline(time.Now().Add(5 * time.Second))
		if err := s.Handshake(); err != nil {
			done <- err
			return
		}
		var b [1]byte
		if _, err := io.ReadFull(s, b[:]); err != nil {
			done <- err
			return
		}
		_, err = s.Write(b[:])
		done <- err
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), client)
	if err == nil {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err = c.Write([]byte{7}); err == nil {
			var b [1]byte
			_, err = io.ReadFull(c, b[:])
		}
	}
	return err, <-done
}

func TestMutualTLS(t *testing.T) {
	n1, err := NewIdentity(secret, "n1")
	if err != nil {
		t.Fatal(err)
	}
	n2, _ := NewIdentity(secret, "n2")
	intruder, _ := NewIdentity(other, "n1")
	noCert := n2.ClientConfig()
	noCert.GetClientCertificate = nil
	tls12 := n2.ClientConfig()
	tls12.MinVersion, tls12.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	tests := []struct {
		name           string
		client, server *tls.Config
		ok             bool
		clientSays     string // in the client's error
	}{
		{"two nodes of a cluster", n2.ClientConfig(), n1.ServerConfig(), true, ""},
		{"a client of another cluster", intruder.ClientConfig(), n1.ServerConfig(), false, "another cluster"},
		{"a server of another cluster", n2.ClientConfig(), intruder.ServerConfig(), false, "another cluster"},
		{"a client with no certificate", noCert, n1.ServerConfig(), false, "certificate required"},
		{"TLS 1.2", tls12, n1.ServerConfig(), false, "protocol version"},
	}
	for _, tt := range tests {
		cerr, serr := handshake(t, tt.client, tt.server)
		if tt.ok {
			if cerr != nil || serr != nil {
				t.Errorf("%s: client %v, server %v; want a connection", tt.name, cerr, serr)
			}
			continue
		}
		if cerr == nil || serr == nil {
			t.Errorf("%s: client %v, server %v; want both to fail", tt.name, cerr, serr)
			continue
		}
		if !strings.Contains(cerr.Error(), tt.clientSays) {
			t.Errorf("%s: client error %q, want it to say %q", tt.name, cerr, tt.clientSays)
		}
	}
}

// One identity per secret in a process, whatever name later callers give.
func TestClientIdentityCached(t *testing.T) {
	a, err := ClientIdentity(secret, "x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ClientIdentity(secret, "y")
	c, _ := ClientIdentity(other, "x")
	if a != b || a == c {
		t.Errorf("identities: same secret %p %p, other secret %p", a, b, c)
	}
}
