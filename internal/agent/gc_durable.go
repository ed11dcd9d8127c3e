package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"shoal/internal/api"
	"shoal/internal/durable"
	"shoal/internal/job"
	"shoal/internal/retention"
)

// durableTimeout bounds the removal of one job's epochs from an object store.
const durableTimeout = time.Minute

// durableRetention is what the collector remembers of the epochs jobs keep in
// object stores. Only the collector's loop uses it.
type durableRetention struct {
	// removed: jobs whose epochs this node removed (or found none of) while it
	// led; a new leader lists each once more.
	removed map[string]bool
	// warned: jobs whose epochs are due to go but stay, for want of credentials,
	// already logged.
	warned map[string]bool
}

// durablePass applies the retention policy to the epochs that ended jobs keep
// in object stores (retention.DecideDurable), on the job store's leader only,
// since the store is shared and one node acts for the cluster: each goes when
// the job's shards on the nodes would. The agent removes them with its own
// credentials, and only the epochs whose manifests name the job
// (durable.S3Store.RemoveJob): the location is one the job's user named. It
// returns when something kept now may go (zero: nothing will without a change).
func (c *collector) durablePass(now time.Time) time.Time {
	if !c.a.store.IsLeader() {
		return time.Time{}
	}
	if c.durable.removed == nil {
		c.durable = durableRetention{removed: map[string]bool{}, warned: map[string]bool{}}
	}
	var jobs []retention.Job
	kept := map[string]*job.Durable{}
	for _, j := range c.a.store.Jobs() {
		if j.Durable == nil || c.durable.removed[j.ID] {
			continue
		}
		kept[j.ID] = j.Durable
		jobs = append(jobs, retention.Job{ID: j.ID, State: j.State, Ended: j.Ended,
			Keep: time.Duration(j.Spec.Keep), Durable: j.Durable.Location})
	}
	plan := retention.DecideDurable(c.policy, now, jobs)
	for _, it := range plan.Removals() {
		d := kept[it.Job]
		if !durable.HasCredentials() {
			if !c.durable.warned[it.Job] {
				c.durable.warned[it.Job] = true
				c.a.log.Warn("a job's epochs in an object store are due to go, but this agent has no credentials for it: they stay",
					"job", it.Job, "location", d.Location, "reason", it.Reason)
			}
			continue
		}
		n, err := removeDurable(it.Job, d)
		if err != nil {
			c.a.log.Warn("could not remove a job's epochs from its object store", "job", it.Job, "location", d.Location, "err", err)
			continue
		}
		c.durable.removed[it.Job] = true
		if n > 0 {
			c.a.log.Info("removed job data", "what", it.Kind, "job", it.Job, "location", d.Location, "epochs", n, "reason", it.Reason)
		}
	}
	return plan.Next
}

// dropDurable is the part of `shoal gc --job ID` that falls to the job store's
// leader: the epochs job id keeps in an object store (its record's kept epoch,
// or the store its coordinator copies to) removed now, as the retention pass
// removes them once their grace ends, with this agent's credentials. ok is
// false when this node does not lead or the job keeps nothing in an object
// store. The caller has checked that the job has ended.
func (c *collector) dropDurable(id string, dryRun bool) (it api.GCItem, ok bool) {
	if !c.a.store.IsLeader() {
		return it, false
	}
	j, _, err := c.a.store.Job(id)
	if err != nil {
		return it, false
	}
	var d *job.Durable
	switch {
	case j.Durable != nil && strings.HasPrefix(j.Durable.Location, "s3://"):
		d = j.Durable
	case j.Spec.Durable != nil:
		d = &job.Durable{Location: j.Spec.Durable.Location, Endpoint: j.Spec.Durable.Endpoint}
	default:
		return it, false
	}
	it = api.GCItem{Job: id, What: string(retention.KindDurable), Path: d.Location, Removed: true, Reason: "removed by request"}
	switch {
	case dryRun:
	case !durable.HasCredentials():
		it.Removed, it.Error = false, "this agent has no credentials for the object store: the epochs stay"
	default:
		n, err := removeDurable(id, d)
		if err != nil {
			it.Removed, it.Error = false, err.Error()
			break
		}
		it.Reason = fmt.Sprintf("removed by request (%s)", job.Plural(n, "epoch"))
		c.a.log.Info("removed job data", "what", it.What, "job", id, "location", d.Location, "epochs", n, "reason", "removed by request")
	}
	return it, true
}

// removeDurable removes what d's object store keeps of job id; it returns how
// many epochs it removed.
func removeDurable(id string, d *job.Durable) (int, error) {
	loc, err := durable.ParseLocation(d.Location)
	if err != nil {
		return 0, err
	}
	st, err := durable.NewS3Store(loc, durable.S3Options{Endpoint: d.Endpoint})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), durableTimeout)
	defer cancel()
	return st.RemoveJob(ctx, id)
}
