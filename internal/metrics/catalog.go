package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Family is one metric of Shoal's own: docs/metrics.md lists each, and tests
// check a dashboard's expressions against them.
type Family struct {
	Name   string
	Type   prometheus.ValueType // GaugeValue or CounterValue; histogramType for a histogram
	Labels []string
	Help   string
}

// histogramType marks a histogram's [Family]: client_golang has no value
// type for one.
const histogramType = prometheus.UntypedValue

// Histogram buckets, in seconds.
var (
	// recoveryBuckets: a relaunch takes a second or two on a LAN, a minute
	// when a silent node is waited for (job.MaxPatience).
	recoveryBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}
	// detectionBuckets: membership declares a silent node dead 4 to 6 s after
	// its first doubt on a LAN preset, up to tens of seconds on a WAN one.
	detectionBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 60}
	// completionBuckets: an epoch of a few MB a rank completes in tenths of
	// a second on a LAN, one of GBs over a slow link in minutes.
	completionBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
)

// The families, in the order docs/metrics.md lists them.
var (
	famJobs = Family{"shoal_jobs", prometheus.GaugeValue, []string{"state"},
		"Jobs in the job store by state: every state, 0 included (cluster-wide)."}
	famRestarts = Family{"shoal_restarts_total", prometheus.CounterValue, []string{"reason"},
		"Relaunches of jobs after their runs were interrupted, by what interrupted them, over every job in the store (cluster-wide)."}
	famJobState = Family{"shoal_job_state", prometheus.GaugeValue, []string{"job_id", "state"},
		"1 for each job running, or ended less than an hour ago, labelled with its state (cluster-wide)."}
	famJobProgress = Family{"shoal_job_progress_ratio", prometheus.GaugeValue, []string{"job_id"},
		"How far each job is, 0 to 1, as its program last reported (cluster-wide)."}
	famJobRanks = Family{"shoal_job_ranks", prometheus.GaugeValue, []string{"job_id"},
		"Ranks of each job's current run; 0 before its first launch (cluster-wide)."}
	famJobEpoch = Family{"shoal_job_epoch", prometheus.GaugeValue, []string{"job_id"},
		"Each job's newest complete checkpoint epoch; 0 for none (cluster-wide)."}
	famJobRestarts = Family{"shoal_job_restarts_total", prometheus.CounterValue, []string{"job_id", "reason"},
		"Each job's relaunches after its run was interrupted, by what interrupted it (cluster-wide)."}
	famJobInterval = Family{"shoal_job_checkpoint_interval_seconds", prometheus.GaugeValue, []string{"job_id"},
		"Time between each job's checkpoints as its rank 0 last reported; 0 for none (cluster-wide)."}
	famJobBlocking = Family{"shoal_job_checkpoint_blocking_seconds", prometheus.GaugeValue, []string{"job_id"},
		"What a checkpoint blocks each job's rank 0, a weighted mean of its run's checkpoints (cluster-wide)."}
	famJobMTBF = Family{"shoal_job_mtbf_seconds", prometheus.GaugeValue, []string{"job_id"},
		"The job's mean time between failures its automatic interval was chosen for (cluster-wide)."}
	famRecovery = Family{"shoal_job_recovery_seconds", histogramType, nil,
		"Time from a job's transition into restarting to the first sign of its relaunched ranks (an output line, a progress report or an epoch), over every job in the store (cluster-wide)."}
	famCompletion = Family{"shoal_epoch_completion_seconds", histogramType, nil,
		"Time from a checkpoint being taken (its newest shard written) to its epoch complete, every shard copied and verified as the job's redundancy asks, over every job in the store (cluster-wide)."}
	famWritten = Family{"shoal_checkpoint_written_bytes_total", prometheus.CounterValue, nil,
		"Bytes of the shards of the epochs complete, one copy each: what the ranks wrote, over every job in the store (cluster-wide)."}
	famCopied = Family{"shoal_checkpoint_copied_bytes_total", prometheus.CounterValue, nil,
		"Bytes of the copies of shards made between nodes for the epochs complete, over every job in the store (cluster-wide)."}
	famCopySent = Family{"shoal_checkpoint_copy_sent_bytes_total", prometheus.CounterValue, nil,
		"What the senders of those copies sent: less than copied when some went as their changes since an earlier epoch (cluster-wide)."}
	famCopyWire = Family{"shoal_checkpoint_copy_network_bytes_total", prometheus.CounterValue, nil,
		"What crossed the network for those copies: less than sent when compressed (cluster-wide)."}
	famStaged = Family{"shoal_staged_file_bytes_total", prometheus.CounterValue, nil,
		"Bytes of job files (the program, --file inputs) copied to the nodes of launches that lacked them, over every job in the store (cluster-wide)."}
	famNodes = Family{"shoal_nodes", prometheus.GaugeValue, []string{"state", "role"},
		"Nodes by membership state and part in the job store (cluster-wide, as this node sees them)."}

	famRaftLeader = Family{"shoal_raft_leader", prometheus.GaugeValue, nil,
		"1 when this node leads the job store, else 0."}
	famRaftTerm = Family{"shoal_raft_term", prometheus.GaugeValue, nil,
		"The job store's Raft term as this node knows it."}
	famRaftCommit = Family{"shoal_raft_commit_index", prometheus.GaugeValue, nil,
		"The newest job store entry this node knows committed."}
	famRaftApplied = Family{"shoal_raft_applied_index", prometheus.GaugeValue, nil,
		"The newest job store entry applied to this node's replica."}
	famRaftLag = Family{"shoal_raft_apply_lag_entries", prometheus.GaugeValue, nil,
		"Entries committed but not yet applied to this node's replica."}
	famShardBytes = Family{"shoal_shard_store_bytes", prometheus.GaugeValue, nil,
		"Bytes of the files in this node's checkpoint store (shards, parity rows, spares)."}
	famFailures = Family{"shoal_node_failures_total", prometheus.CounterValue, nil,
		"Node failures in this node's record since the agent started: membership's declarations and the losses of nodes its jobs' runs found, each node once per 10 s."}
	famNodeMTBF = Family{"shoal_node_mtbf_seconds", prometheus.GaugeValue, nil,
		"One node's mean time between failures estimated from this node's record; the automatic checkpoint interval rests on it."}
	famTunnels = Family{"shoal_overlay_tunnels", prometheus.GaugeValue, nil,
		"Tunnels this node's overlay holds open to other nodes' agents: the pairs its jobs' ranks talk over, the relays its packets go through and the nodes it relays for, each closed after a minute idle (absent without --overlay)."}
	famRelayed = Family{"shoal_overlay_relayed_peers", prometheus.GaugeValue, nil,
		"Nodes this node's overlay reaches through a relay, the pair connecting in neither direction (absent without --overlay)."}
	famSuspicions = Family{"shoal_membership_suspicions_total", prometheus.CounterValue, nil,
		"Times a node stopped answering this node's probes and became suspect."}
	famDetection = Family{"shoal_failure_detection_seconds", histogramType, nil,
		"Time from a node's first suspicion to membership declaring it dead, as this node saw it."}
)

// Families lists every metric of Shoal's own.
func Families() []Family {
	return []Family{famJobs, famRestarts, famJobState, famJobProgress, famJobRanks, famJobEpoch, famJobRestarts,
		famJobInterval, famJobBlocking, famJobMTBF, famRecovery,
		famCompletion, famWritten, famCopied, famCopySent, famCopyWire, famStaged, famNodes,
		famRaftLeader, famRaftTerm, famRaftCommit, famRaftApplied, famRaftLag, famShardBytes,
		famFailures, famNodeMTBF, famTunnels, famRelayed, famSuspicions, famDetection}
}

// Kind is the family's Prometheus type: gauge, counter or histogram.
func (f Family) Kind() string {
	switch f.Type {
	case histogramType:
		return "histogram"
	case prometheus.CounterValue:
		return "counter"
	}
	return "gauge"
}

func (f Family) desc() *prometheus.Desc {
	return prometheus.NewDesc(f.Name, f.Help, f.Labels, nil)
}
