package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// nodeCollector reports the agent's own state: its replica's replication, its
// checkpoint store, its record of failures.
type nodeCollector struct {
	src   Source
	descs map[string]*prometheus.Desc
}

var nodeFamilies = []Family{famRaftLeader, famRaftTerm, famRaftCommit, famRaftApplied, famRaftLag,
	famShardBytes, famFailures, famNodeMTBF, famTunnels, famRelayed}

func newNodeCollector(src Source) *nodeCollector {
	c := &nodeCollector{src: src, descs: map[string]*prometheus.Desc{}}
	for _, f := range nodeFamilies {
		c.descs[f.Name] = f.desc()
	}
	return c
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.samples() {
		ch <- prometheus.MustNewConstMetric(c.descs[s.family.Name], s.family.Type, s.value)
	}
	if b, err := c.src.ShardBytes(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.descs[famShardBytes.Name], err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.descs[famShardBytes.Name], prometheus.GaugeValue, float64(b))
	}
}

// samples returns the node's series but the shard store's.
func (c *nodeCollector) samples() []sample {
	r := c.src.Raft()
	leader := 0.0
	if r.Leader {
		leader = 1
	}
	var lag uint64
	if r.CommitIndex > r.AppliedIndex {
		lag = r.CommitIndex - r.AppliedIndex
	}
	f := c.src.Failures()
	out := []sample{
		{famRaftLeader, nil, leader},
		{famRaftTerm, nil, float64(r.Term)},
		{famRaftCommit, nil, float64(r.CommitIndex)},
		{famRaftApplied, nil, float64(r.AppliedIndex)},
		{famRaftLag, nil, float64(lag)},
		{famFailures, nil, float64(f.Failures)},
		{famNodeMTBF, nil, f.NodeMTBF().Seconds()},
	}
	if o := c.src.Overlay(); o.On {
		out = append(out, sample{famTunnels, nil, float64(o.Tunnels)}, sample{famRelayed, nil, float64(o.Relayed)})
	}
	return out
}
