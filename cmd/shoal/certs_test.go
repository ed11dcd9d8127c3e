package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"shoal/internal/pki"
)

// shoal certs writes the cluster's authority and a client certificate that an
// agent of the cluster accepts, the key readable by its owner only.
func TestCertsCommand(t *testing.T) {
	secret := writeSecret(t)
	dir := filepath.Join(t.TempDir(), "tls")
	runCLI(t, exitOK, "certs", "--secret-file", secret, dir)
	if fi, err := os.Stat(filepath.Join(dir, "key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key.pem: %v, %v; want mode 0600", fi, err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA(fakeSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Verify([]*x509.Certificate{leaf}, x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("the written certificate: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(got) != string(ca.CertPEM()) {
		t.Error("ca.pem is not the cluster's authority")
	}
	if code, _, stderr := runOut("certs", "--secret-file", secret); code != exitUsage || stderr != "shoal certs: want one argument, the directory to write to (see 'shoal certs --help')\n" {
		t.Errorf("shoal certs with no directory: exit %d, stderr %q; want %d and one line", code, stderr, exitUsage)
	}
	runCLIError(t, "shoal certs: no cluster secret", "certs", "--secret-file", filepath.Join(t.TempDir(), "none"), dir)
}
