package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"shoal/internal/job"
	"shoal/internal/jobstore"
	"shoal/internal/membership"
	"shoal/internal/metrics"
	"shoal/internal/mtbf"
	"shoal/internal/node"
)

// CheckMetricsListen refuses a --metrics-listen address that is not IP:PORT,
// or not a loopback address unless public says the operator means it: the
// plain port asks for no certificate. The errors wrap [ErrMetricsListen].
func CheckMetricsListen(addr string, public bool) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return fmt.Errorf("%w: want IP:PORT, such as 127.0.0.1:9108", ErrMetricsListen)
	}
	if !ip.IsLoopback() && !public {
		return fmt.Errorf("%w: not a loopback address, and its plain HTTP asks for no certificate: anyone who reaches it would read the cluster's jobs and nodes; scrape the API port with a certificate of the cluster (shoal certs), or add --metrics-listen-public", ErrMetricsListen)
	}
	return nil
}

// startMetrics makes the agent's metrics registry and feeds it membership's
// events.
func (a *Agent) startMetrics() error {
	m, err := metrics.New((*metricsSource)(a))
	if err != nil {
		return err
	}
	a.metrics = m
	return nil
}

// countDetections feeds the failure detector's doings to the metrics.
func (a *Agent) countDetections(sub *membership.Subscription) {
	d := a.metrics.Detections
	for ev := range sub.C {
		switch ev.Type {
		case membership.EventSuspect:
			d.Suspected(ev.Node.Name, ev.Time)
		case membership.EventFailed:
			d.Failed(ev.Node.Name, ev.Time)
		case membership.EventAlive, membership.EventJoin, membership.EventLeave:
			d.Cleared(ev.Node.Name)
		}
	}
}

// listenMetrics serves the metrics alone, in plain HTTP, on
// cfg.MetricsListen, for a scraper on the node itself.
func (a *Agent) listenMetrics() error {
	if a.cfg.MetricsListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler())
	a.metricsHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.metricsLn = ln
	a.serve("metrics server", func() error {
		if err := a.metricsHTTP.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return nil
}

// MetricsAddr is the address --metrics-listen serves on ("" when not).
func (a *Agent) MetricsAddr() string {
	if a.metricsLn == nil {
		return ""
	}
	return a.metricsLn.Addr().String()
}

// metricsSource is the agent as its metrics read it.
type metricsSource Agent

var _ metrics.Source = (*metricsSource)(nil)

func (s *metricsSource) Jobs() []job.Job { return s.store.Jobs() }

func (s *metricsSource) Events(id string, from uint64) ([]job.Event, error) {
	events, _, _, _, err := s.store.Events(id, from)
	return events, err
}

func (s *metricsSource) Nodes() []node.Node {
	roles := (*Agent)(s).roles()
	var out []node.Node
	for _, m := range s.members.Nodes() {
		out = append(out, node.Node{State: m.State.String(), Role: roles[m.Name]})
	}
	return out
}

func (s *metricsSource) Raft() jobstore.Stats { return s.store.Stats() }

func (s *metricsSource) Failures() mtbf.Estimate { return (*Agent)(s).Failures() }

func (s *metricsSource) Overlay() metrics.Overlay {
	if s.overlay == nil {
		return metrics.Overlay{}
	}
	return s.overlay.stats()
}

// ShardBytes sums the sizes of the regular files under the checkpoint store.
func (s *metricsSource) ShardBytes() (int64, error) {
	var n int64
	err := filepath.WalkDir(filepath.Join(s.cfg.DataDir, CkptDir), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walked
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, err
}
