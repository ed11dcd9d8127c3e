// Package mtbf keeps a cluster's record of node failures and estimates from
// it how long a job's nodes run, together, between two losses: the job's mean
// time between failures, which libshoal weighs against the cost of a
// checkpoint to choose the interval between checkpoints (Young/Daly's
// optimum; `--ckpt-interval auto`, docs/libshoal.md).
//
// # The estimate
//
// A node fails at a rate of (failures + 1) / (node time + [PriorNodeTime]):
// the failures the record holds over the time its nodes were watched alive,
// with the prior of one failure in PriorNodeTime added, so that a cluster
// watched for a minute without a failure is not taken for one that never
// fails. A job over n nodes loses one n times as often.
//
// A failure is a node the failure detector declared dead, or one whose ranks a
// job lost (its agent stopped answering): a node restarted within seconds is
// never declared dead, yet its jobs lost their work. Both reports of one loss
// count once ([SameFailure]).
package mtbf

import (
	"fmt"
	"sync"
	"time"
)

// PriorNodeTime is the node time taken to hold one failure before the record
// holds any. An hour is what the machines Shoal is for (phones that leave a
// Wi-Fi, lab PCs switched off, spot VMs) may run between losses; erring short
// costs checkpoints, which are cheap (at the optimum their share of the run is
// about √(2·cost/MTBF)), while erring long costs lost work. A day's record of
// a few nodes outweighs it.
const PriorNodeTime = time.Hour

// Estimate is what the record says, at a moment.
type Estimate struct {
	Failures int           // nodes declared failed
	NodeTime time.Duration // the live nodes' time watched, summed over nodes
}

// NodeMTBF is one node's mean time between failures, by the package doc.
func (e Estimate) NodeMTBF() time.Duration {
	return (e.NodeTime + PriorNodeTime) / time.Duration(e.Failures+1)
}

// Job is the mean time between failures of a job over nodes nodes (at least 1).
func (e Estimate) Job(nodes int) time.Duration {
	return e.NodeMTBF() / time.Duration(max(nodes, 1))
}

// String says what the estimate rests on: "2 nodes failed in 5h0m0s of node time".
func (e Estimate) String() string {
	what := "no node failed"
	switch {
	case e.Failures == 1:
		what = "1 node failed"
	case e.Failures > 1:
		what = fmt.Sprintf("%d nodes failed", e.Failures)
	}
	return fmt.Sprintf("%s in %s of node time", what, e.NodeTime.Round(time.Second))
}

// Record counts a cluster's node failures and its live nodes' time, as one
// node's membership saw them. Safe for concurrent use.
type Record struct {
	mu       sync.Mutex
	est      Estimate
	alive    int
	since    time.Time
	watching bool
	last     map[string]time.Time // each node's last failure counted
}

// Observe says that from now on alive nodes are live.
func (r *Record) Observe(now time.Time, alive int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(now)
	r.alive, r.since, r.watching = alive, now, true
}

// SameFailure is how close two reports of one node's failure come: a job's
// coordinator sees a node's ranks lost at once, the failure detector declares
// the node dead seconds later, and a node restarted within that time is never
// declared dead at all.
const SameFailure = 10 * time.Second

// Failed counts node's failure at now, once for reports within SameFailure.
func (r *Record) Failed(now time.Time, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(now)
	if last, ok := r.last[node]; ok && now.Sub(last).Abs() < SameFailure {
		return
	}
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	r.last[node] = now
	r.est.Failures++
}

// At returns the estimate as of now.
func (r *Record) At(now time.Time) Estimate {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(now)
	return r.est
}

// advance adds the live nodes' time up to now.
func (r *Record) advance(now time.Time) {
	if r.watching && now.After(r.since) {
		r.est.NodeTime += time.Duration(r.alive) * now.Sub(r.since)
		r.since = now
	}
}
