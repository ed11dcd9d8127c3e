package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"shoal/internal/agent"
	"shoal/internal/pki"
)

func init() {
	register("certs", command{summary: "write TLS certificates for calling the API with other tools (curl)", run: certsCmd})
}

const certsUsage = `Usage: shoal certs [flags] DIR

Writes into DIR, from the cluster secret:
  ca.pem    the cluster's certificate authority (the same on every node)
  cert.pem  a client certificate it issued, valid for 90 days
  key.pem   that certificate's private key (mode 0600)
so that other tools can call an agent's API, which is TLS 1.3 with client
certificates of the cluster only; for example
  curl --cacert DIR/ca.pem --cert DIR/cert.pem --key DIR/key.pem https://ADDR/v1/health
GET /metrics needs nothing more, so Prometheus can scrape with these files
(docs/metrics.md); other requests must also be signed (docs/api.md). Anyone
with these files can talk to the cluster's agents: keep them as the secret.

Flags:
`

func certsCmd(args []string, stdout, stderr io.Writer) int {
	var (
		dataDir, secretFile, name string
	)
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&dataDir, "data-dir", "", "data dir whose secret to use (default: $SHOAL_DATA_DIR, else /var/lib/shoal for root, ~/.shoal for others)")
	fs.StringVar(&secretFile, "secret-file", "", "cluster secret file (default: the copy in the data dir)")
	fs.StringVar(&name, "name", "client", "the certificate's common name")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, certsUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal certs: %v (see 'shoal certs --help')\n", err)
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "shoal certs: want one argument, the directory to write to (see 'shoal certs --help')")
		return exitUsage
	}
	dir := fs.Arg(0)
	if secretFile == "" {
		if dataDir == "" {
			dataDir = agent.DefaultDataDir()
		}
		secretFile = filepath.Join(dataDir, agent.SecretFile)
	}
	secret, err := agent.ReadSecret(secretFile)
	if err != nil {
		fmt.Fprintf(stderr, "shoal certs: %s\n", errorLine(err))
		return exitFailure
	}
	if err := writeCerts(dir, secret, name); err != nil {
		fmt.Fprintf(stderr, "shoal certs: %s\n", errorLine(err))
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %s, %s and %s\n", filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	return exitOK
}

// writeCerts writes the cluster's authority, and a certificate it issued to name
// with its key, into dir.
func writeCerts(dir string, secret []byte, name string) error {
	ca, err := pki.NewCA(secret)
	if err != nil {
		return err
	}
	cert, err := ca.Issue(name, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Now())
	if err != nil {
		return err
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"ca.pem", ca.CertPEM(), 0o644},
		{"cert.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o644},
		{"key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600},
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		os.Remove(path) // a key file of another mode is replaced, not rewritten in place
		if err := os.WriteFile(path, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}
