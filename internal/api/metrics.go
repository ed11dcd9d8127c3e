package api

import (
	"fmt"
	"net/http"
)

// clusterCertificate returns nil if r came over TLS with a client certificate
// the cluster's authority issued: what a metrics scrape needs instead of a
// signature. The listener's TLS configuration (pki.Identity.ServerConfig)
// refuses every other certificate in the handshake; a server without TLS
// (tests of the handlers) serves no metrics to anyone.
func clusterCertificate(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return fmt.Errorf("%w: %s needs a TLS connection with a certificate of the cluster (shoal certs)", ErrUnauthorized, r.URL.Path)
	}
	return nil
}

// metrics answers GET /metrics with the agent's metrics.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Metrics == nil {
		return fmt.Errorf("%w: this agent serves no metrics", ErrNotFound)
	}
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil
}
