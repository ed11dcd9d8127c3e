// Package metrics exports an agent's state in the Prometheus text format
// (docs/metrics.md): collectors that read, at each scrape, the node's replica
// of the cluster's jobs, its membership, its replication and its checkpoint
// store ([Source]), and the few counters that exist nowhere else, fed by the
// agent as things happen ([Detections]).
//
// Series about the cluster (jobs, nodes) come from every agent, each from its
// own replica, so that any node shows the whole cluster and none is special:
// an operator takes the max over agents, not the sum. Series about the node
// itself (replication, shard store, failure detection, process) are the
// agent's own and may be summed.
package metrics

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"shoal/internal/job"
	"shoal/internal/jobstore"
	"shoal/internal/mtbf"
	"shoal/internal/node"
)

// ErrNoSource means [New] was given no source to read.
var ErrNoSource = errors.New("metrics: no source")

// Namespace prefixes every metric of Shoal's own.
const Namespace = "shoal"

// Source is the agent state the collectors read at each scrape. Its methods
// must be safe for concurrent use: two scrapes may run at once.
type Source interface {
	// Jobs returns the jobs in the node's replica of the job store.
	Jobs() []job.Job
	// Events returns job id's events numbered from on.
	Events(id string, from uint64) ([]job.Event, error)
	// Nodes returns the members the node knows, itself included; the
	// collectors read their State and Role.
	Nodes() []node.Node
	// Raft returns the node's view of the job store's replication.
	Raft() jobstore.Stats
	// ShardBytes returns the bytes of the files the node's checkpoint store
	// holds.
	ShardBytes() (int64, error)
	// Failures returns the node's record of node failures.
	Failures() mtbf.Estimate
	// Overlay returns the state of the node's overlay (docs/overlay.md).
	Overlay() Overlay
}

// Overlay is what a node's overlay holds: nothing when it is off.
type Overlay struct {
	On      bool // the agent carries the overlay (--overlay)
	Tunnels int  // tunnels open to other nodes' agents
	Relayed int  // peers reached through a relay
}

// Metrics is one agent's registry: its collectors, the Go runtime's and the
// process's.
type Metrics struct {
	// Registry holds every collector; [Metrics.Handler] serves it.
	Registry *prometheus.Registry
	// Detections counts what membership told this node; the agent feeds it.
	Detections *Detections
}

// New returns the registry of an agent reading src.
func New(src Source) (*Metrics, error) {
	if src == nil {
		return nil, ErrNoSource
	}
	reg := prometheus.NewRegistry()
	d := NewDetections()
	for _, c := range []prometheus.Collector{
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		newClusterCollector(src, time.Now),
		newNodeCollector(src),
		d,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return &Metrics{Registry: reg, Detections: d}, nil
}

// Handler serves the registry in the Prometheus text format. A collector
// that fails leaves its series out, and the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Names returns the name of every metric family the registry gathers now, for
// tests that check what a dashboard names.
func (m *Metrics) Names() (map[string]bool, error) {
	fams, err := m.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range fams {
		out[f.GetName()] = true
	}
	return out, nil
}
