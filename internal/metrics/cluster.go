package metrics

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shoal/internal/job"
	"shoal/internal/node"
)

// clusterCollector reports the cluster as the node's replica of the job store
// and its membership see it.
type clusterCollector struct {
	src   Source
	now   func() time.Time
	hist  histories
	descs map[string]*prometheus.Desc
}

var clusterFamilies = []Family{famJobs, famRestarts, famJobState, famJobProgress, famJobRanks, famJobEpoch,
	famJobRestarts, famJobInterval, famJobBlocking, famJobMTBF, famRecovery,
	famCompletion, famWritten, famCopied, famCopySent, famCopyWire, famStaged, famNodes}

func newClusterCollector(src Source, now func() time.Time) *clusterCollector {
	c := &clusterCollector{src: src, now: now, descs: map[string]*prometheus.Desc{}}
	for _, f := range clusterFamilies {
		c.descs[f.Name] = f.desc()
	}
	return c
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	jobs := c.src.Jobs()
	t := c.hist.update(c.src, jobs)
	for _, s := range jobSamples(jobs, t.restarts, c.now()) {
		ch <- prometheus.MustNewConstMetric(c.descs[s.family.Name], s.family.Type, s.value, s.labels...)
	}
	ch <- prometheus.MustNewConstHistogram(c.descs[famRecovery.Name], t.recovery.n, t.recovery.sum, t.recovery.cumulative(recoveryBuckets))
	ch <- prometheus.MustNewConstHistogram(c.descs[famCompletion.Name], t.completion.n, t.completion.sum, t.completion.cumulative(completionBuckets))
	for _, s := range []sample{{famWritten, nil, float64(t.ckpt.Bytes)}, {famCopied, nil, float64(t.ckpt.Copied)},
		{famCopySent, nil, float64(t.ckpt.Sent)}, {famCopyWire, nil, float64(t.ckpt.Wire)}, {famStaged, nil, float64(t.staged)}} {
		ch <- prometheus.MustNewConstMetric(c.descs[s.family.Name], s.family.Type, s.value)
	}
	for _, s := range nodeSamples(c.src.Nodes()) {
		ch <- prometheus.MustNewConstMetric(c.descs[s.family.Name], s.family.Type, s.value, s.labels...)
	}
}

// sample is one series' value at a scrape.
type sample struct {
	family Family
	labels []string // values, in the family's label order
	value  float64
}

// EndedShown is how long after its end a job keeps its own series: the job
// store keeps every job's record, and a series per job ever run would grow
// without bound.
const EndedShown = time.Hour

// jobSamples returns the series of jobs at now: a count per state and
// relaunches by cause over every job in the store (every state, 0 included,
// so that a line does not vanish when its last job leaves it), and the
// series of each job running or ended less than [EndedShown] ago, with its
// relaunches by cause from restarts.
func jobSamples(jobs []job.Job, restarts map[string]map[string]uint64, now time.Time) []sample {
	byState := map[job.State]int{}
	byCause := map[string]uint64{}
	var out []sample
	for _, j := range jobs {
		byState[j.State]++
		for cause, n := range restarts[j.ID] {
			byCause[cause] += n
		}
		if !j.Ended.IsZero() && now.Sub(j.Ended) >= EndedShown {
			continue
		}
		out = append(out,
			sample{famJobState, []string{j.ID, string(j.State)}, 1},
			sample{famJobProgress, []string{j.ID}, j.Progress},
			sample{famJobRanks, []string{j.ID}, float64(j.Ranks)},
			sample{famJobEpoch, []string{j.ID}, float64(j.Epoch)},
		)
		if iv := j.Interval; iv != nil {
			out = append(out, sample{famJobInterval, []string{j.ID}, time.Duration(iv.Every).Seconds()})
			if iv.Cost > 0 {
				out = append(out, sample{famJobBlocking, []string{j.ID}, time.Duration(iv.Cost).Seconds()})
			}
			if iv.Auto && iv.MTBF > 0 {
				out = append(out, sample{famJobMTBF, []string{j.ID}, time.Duration(iv.MTBF).Seconds()})
			}
		}
		for _, cause := range slices.Sorted(maps.Keys(restarts[j.ID])) {
			out = append(out, sample{famJobRestarts, []string{j.ID, cause}, float64(restarts[j.ID][cause])})
		}
	}
	head := make([]sample, 0, len(job.States))
	for _, s := range job.States {
		head = append(head, sample{famJobs, []string{string(s)}, float64(byState[s])})
	}
	for _, cause := range append(job.Causes(), causeUnknown) {
		head = append(head, sample{famRestarts, []string{cause}, float64(byCause[cause])})
	}
	return append(head, out...)
}

// nodeStates and nodeRoles are the label values of shoal_nodes: every
// combination is reported, 0 included.
var (
	nodeStates = []string{"alive", "suspect", "dead", "left"}
	nodeRoles  = []string{"leader", "voter", "follower", "client", "none"}
)

// nodeSamples returns the count of nodes by state and role.
func nodeSamples(nodes []node.Node) []sample {
	count := map[[2]string]int{}
	for _, n := range nodes {
		role := n.Role
		if role == "" {
			role = "none"
		}
		count[[2]string{n.State, role}]++
	}
	var out []sample
	for _, s := range nodeStates {
		for _, r := range nodeRoles {
			out = append(out, sample{famNodes, []string{s, r}, float64(count[[2]string{s, r}])})
		}
	}
	return out
}
