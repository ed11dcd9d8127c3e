package api

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"shoal/internal/pki"
)

// TestMetricsNeedClusterCertificate: GET /metrics answers a connection that
// shows a certificate of the cluster, unsigned, as a Prometheus server sends
// it; it is refused without one, with another cluster's, and over plain HTTP;
// the other routes still need their signature.
func TestMetricsNeedClusterCertificate(t *testing.T) {
	id, err := pki.NewIdentity(testSecret, "n1", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "shoal_up 1\n") })
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, TLS: id.ServerConfig(), Metrics: metrics})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(t.Context()) })
	base := "https://" + ln.Addr().String()

	clusterCA, err := pki.NewCA(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := pki.NewCA([]byte("another cluster's secret, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	client := func(ca *pki.CA) *http.Client {
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
		if ca != nil {
			cert, err := ca.Issue("prometheus", nil, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	}
	plain := httptest.NewServer(NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, Metrics: metrics}))
	t.Cleanup(plain.Close)

	tests := []struct {
		name       string
		client     *http.Client
		url        string
		wantStatus int // 0: the connection fails
	}{
		{"cluster certificate", client(clusterCA), base + "/metrics", 200},
		{"cluster certificate, another route unsigned", client(clusterCA), base + "/v1/nodes", 401},
		{"no certificate", client(nil), base + "/metrics", 0},
		{"another cluster's certificate", client(otherCA), base + "/metrics", 0},
		{"plain HTTP", plain.Client(), plain.URL + "/metrics", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tt.client.Get(tt.url)
			if tt.wantStatus == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got status %d, want the connection refused", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got status %d (%s), want %d", resp.StatusCode, b, tt.wantStatus)
			}
			if tt.wantStatus == 200 && string(b) != "shoal_up 1\n" {
				t.Errorf("got body %q, want the metrics handler's", b)
			}
		})
	}
}

func TestClusterCertificate(t *testing.T) {
	r := httptest.NewRequest("GET", "/metrics", nil)
	if err := clusterCertificate(r); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("plain request: got %v, want %v", err, ErrUnauthorized)
	}
}

// TestMetricsOnTheSocket: on the local socket the metrics are root's, as
// every route not open to users.
func TestMetricsOnTheSocket(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "shoal_up 1\n") })
	s := NewServer(ServerConfig{Node: &fakeNode{}, Secret: testSecret, Metrics: metrics})
	tests := []struct {
		caller *Caller
		want   int
	}{
		{&Caller{UID: 0, GID: 0, Name: "root"}, 200},
		{&Caller{UID: 1001, GID: 1001, Name: "alice"}, 403},
		{&Caller{UID: -1, GID: -1}, 403},
	}
	for _, tt := range tests {
		if got, body := asCaller(t, s, tt.caller, "GET", "/metrics", ""); got != tt.want {
			t.Errorf("%s: got %d (%s), want %d", tt.caller, got, body, tt.want)
		}
	}
}
