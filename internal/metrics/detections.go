package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Detections counts what this node's failure detector did: suspicions, and
// the time from a node's first suspicion to its being declared dead. The agent
// feeds it membership's events in order; it is safe for concurrent use.
type Detections struct {
	suspicions prometheus.Counter
	detection  prometheus.Histogram

	mu      sync.Mutex
	doubted map[string]time.Time // node → its first suspicion not yet resolved
}

// NewDetections returns an empty count.
func NewDetections() *Detections {
	return &Detections{
		suspicions: prometheus.NewCounter(prometheus.CounterOpts{Name: famSuspicions.Name, Help: famSuspicions.Help}),
		detection: prometheus.NewHistogram(prometheus.HistogramOpts{Name: famDetection.Name, Help: famDetection.Help,
			Buckets: detectionBuckets}),
		doubted: map[string]time.Time{},
	}
}

// Suspected records that node became suspect at t.
func (d *Detections) Suspected(node string, t time.Time) {
	d.suspicions.Inc()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.doubted[node]; !ok {
		d.doubted[node] = t
	}
}

// Cleared records that node answered again, joined again or left: a later
// suspicion starts afresh.
func (d *Detections) Cleared(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.doubted, node)
}

// Failed records that membership declared node dead at t. A death this node
// never suspected itself (another node reported it) has no latency here.
func (d *Detections) Failed(node string, t time.Time) {
	d.mu.Lock()
	first, ok := d.doubted[node]
	delete(d.doubted, node)
	d.mu.Unlock()
	if ok {
		d.detection.Observe(max(t.Sub(first), 0).Seconds())
	}
}

func (d *Detections) Describe(ch chan<- *prometheus.Desc) {
	d.suspicions.Describe(ch)
	d.detection.Describe(ch)
}

func (d *Detections) Collect(ch chan<- prometheus.Metric) {
	d.suspicions.Collect(ch)
	d.detection.Collect(ch)
}
