// Package pki gives the agents of a cluster their TLS identities: a cluster
// certificate authority and, per process, a certificate it issued, so that every
// stream between agents (the API, launches, shard copies, the job store's Raft
// traffic) is TLS 1.3 with both ends authenticated.
//
// The authority's key is derived from the cluster secret (HKDF-SHA256, its own
// label, as the API and gossip keys are), so every holder of the secret can issue
// certificates and no node is the one the others depend on to join: in a cluster
// whose nodes come and go, the node holding a lone authority key could be the
// one that left. This grants nothing the secret did not grant already: whoever
// holds it can sign any API request and read any gossip. What the certificates
// add is what the shared key could not give: confidentiality and integrity of the
// traffic (shards, command lines, job output), answers authenticated to the
// caller, and a handshake that fails for anyone without the secret before a
// single byte of the API is read.
//
// The authority's certificate is the same bytes on every node (Ed25519 signatures
// are deterministic and its fields are fixed), so an operator can pin it
// (`shoal certs`). The leaf key of each process is random and lives in memory
// only.
package pki

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// caKeyInfo separates the authority's key from every other key derived from the
// cluster secret.
const caKeyInfo = "shoal cluster ca"

// CAName is the authority's common name.
const CAName = "shoal cluster CA"

// leafLifetime is how long a process's certificate is valid. A process that
// runs longer gets a new one (Identity renews it on use).
const leafLifetime = 90 * 24 * time.Hour

// ErrUntrusted means the other end's certificate was not issued by this
// cluster's authority: it holds another secret, or none.
var ErrUntrusted = errors.New("pki: certificate not issued by this cluster's CA (another cluster secret?)")

// CA is the cluster's certificate authority, derived from the secret.
type CA struct {
	key  ed25519.PrivateKey
	cert *x509.Certificate
	der  []byte
	pool *x509.CertPool
}

// NewCA derives the cluster's authority from its secret.
func NewCA(secret []byte) (*CA, error) {
	if len(secret) == 0 {
		return nil, errors.New("pki: empty cluster secret")
	}
	seed, err := hkdf.Key(sha256.New, secret, nil, caKeyInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("pki: derive CA key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: CAName, Organization: []string{"shoal"}},
		NotBefore:             time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2125, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{key: key, cert: cert, der: der, pool: pool}, nil
}

// CertPEM returns the authority's certificate, PEM encoded.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Issue returns a certificate for name, valid for both ends of a connection,
// on a new random key, with ips (and name, when it is a host name) as its
// subject alternative names so that tools that check them (curl) can.
func (ca *CA) Issue(name string, ips []net.IP, now time.Time) (tls.Certificate, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"shoal"}},
		NotBefore:    now.Add(-time.Hour), // a peer whose clock is a little behind
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
	}
	if hostName(name) {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: issue certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Verify checks that chain's first certificate was issued by the authority for
// use (server or client authentication) and is valid now. Host names are not
// checked: nodes move between addresses, and which node a request is for is
// bound by its signature (the X-Shoal-Node header), not by the address.
func (ca *CA) Verify(chain []*x509.Certificate, use x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: none given", ErrUntrusted)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: ca.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUntrusted, chain[0].Subject.CommonName, err)
	}
	return nil
}

// hostName reports whether name can be a DNS name in a certificate.
func hostName(name string) bool {
	if name == "" || len(name) > 253 || net.ParseIP(name) != nil {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Identity is one process's TLS identity in the cluster: its certificate, issued
// by the authority, renewed before it expires.
type Identity struct {
	ca   *CA
	name string
	ips  []net.IP
	mu   sync.Mutex
	cert tls.Certificate
}

// NewIdentity derives the cluster's authority from secret and issues name a
// certificate (see [CA.Issue]).
func NewIdentity(secret []byte, name string, ips ...net.IP) (*Identity, error) {
	ca, err := NewCA(secret)
	if err != nil {
		return nil, err
	}
	id := &Identity{ca: ca, name: name, ips: ips}
	if _, err := id.certificate(); err != nil {
		return nil, err
	}
	return id, nil
}

// CA returns the authority that issued the identity.
func (id *Identity) CA() *CA { return id.ca }

// certificate returns the identity's certificate, issuing a new one when the
// current one has less than a tenth of its lifetime left.
func (id *Identity) certificate() (*tls.Certificate, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	now := time.Now()
	if id.cert.Leaf == nil || now.After(id.cert.Leaf.NotAfter.Add(-leafLifetime/10)) {
		c, err := id.ca.Issue(id.name, id.ips, now)
		if err != nil {
			return nil, err
		}
		id.cert = c
	}
	c := id.cert
	return &c, nil
}

// ServerConfig is the TLS configuration of a listener of the cluster: TLS 1.3
// only, and a client must show a certificate the authority issued.
func (id *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return id.certificate()
		},
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  id.ca.pool,
		NextProtos: []string{"http/1.1"},
	}
}

// ClientConfig is the TLS configuration of a connection to a node of the
// cluster: TLS 1.3 only, this identity's certificate shown, and the server's
// verified as issued by the authority (not its host name: see [CA.Verify]).
func (id *Identity) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return id.certificate()
		},
		// Verified below, against the authority, without a host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return id.ca.Verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
		},
		NextProtos: []string{"http/1.1"},
		// A launch takes a connection of its own (it is switched to the launch
		// protocol): resuming a session saves the signatures of a full handshake.
		ClientSessionCache: tls.NewLRUClientSessionCache(64),
	}
}

// identities caches one client identity per secret in this process: every
// client of a process shows the same certificate, issued once.
var identities sync.Map // sha256(secret) → *Identity

// ClientIdentity returns this process's identity as a client of the cluster
// whose secret is given, named name on first use.
func ClientIdentity(secret []byte, name string) (*Identity, error) {
	k := sha256.Sum256(secret)
	if id, ok := identities.Load(k); ok {
		return id.(*Identity), nil
	}
	id, err := NewIdentity(secret, name)
	if err != nil {
		return nil, err
	}
	got, _ := identities.LoadOrStore(k, id)
	return got.(*Identity), nil
}
