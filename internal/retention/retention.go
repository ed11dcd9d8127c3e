// Package retention decides which of the data a node holds for jobs may be
// deleted: shards of epochs no restart can use any more, and everything of a
// job that ended longer ago than its grace period (docs/retention.md). It only
// decides: [Decide] and [Drop] are pure functions of what the job store says,
// what the node holds and the time, so that every rule is tested without disks,
// clocks or a cluster; the agent acts on their [Plan] (internal/agent/gc.go).
//
// What the node holds of a job it never heard of (a standalone `shoal run`
// writing into the agent's data directory, or a job this node's replica of the
// store has yet to receive) is never collected automatically: only `shoal gc
// --job` removes it.
package retention

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"shoal/internal/job"
)

// Defaults of [Policy]; docs/retention.md says why.
const (
	// DefaultSucceeded: a succeeded job's shards are useless at once, but its
	// working directories may hold files the program wrote: an hour to copy them.
	DefaultSucceeded = time.Hour
	// DefaultFailed: a failed or cancelled job is kept for inspection until the
	// next working day.
	DefaultFailed = 24 * time.Hour
	// DefaultUnusedFiles: a submission that finds a file cached names it in the
	// job store a moment later; an hour is ample for that moment.
	DefaultUnusedFiles = time.Hour
)

// ErrNotEnded is returned by [Drop] for a job that has not ended: a job still
// running, or taken over by a new coordinator, never loses data it needs.
var ErrNotEnded = errors.New("retention: job has not ended")

// Policy says how long a node keeps what jobs leave behind. Its zero value
// collects everything as soon as it may; start from [DefaultPolicy].
type Policy struct {
	// Succeeded is how long a succeeded job's job and coordinator directories
	// and files stay after its end. Its shards go at once: nothing can restart
	// from them.
	Succeeded time.Duration
	// Failed is how long everything of a failed or cancelled job stays after
	// its end, shards included, for a look at what went wrong.
	Failed time.Duration
	// UnusedFiles is how long a cached job file that no kept job names stays
	// after it was last used (stored, or found cached by a submission), so that
	// a submission between finding it and naming it in the store keeps it.
	UnusedFiles time.Duration
}

// DefaultPolicy returns the policy of an agent started without retention flags.
func DefaultPolicy() Policy {
	return Policy{Succeeded: DefaultSucceeded, Failed: DefaultFailed, UnusedFiles: DefaultUnusedFiles}
}

// Validate reports the first negative field, by name.
func (p Policy) Validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Succeeded", p.Succeeded}, {"Failed", p.Failed}, {"UnusedFiles", p.UnusedFiles}} {
		if f.d < 0 {
			return fmt.Errorf("retention: %s %v: must not be negative", f.name, f.d)
		}
	}
	return nil
}

// Job is what the job store says of one job.
type Job struct {
	ID    string
	State job.State
	// Ended is when the job ended; zero while it has not.
	Ended time.Time
	// Keep is the job's own JobSpec.Keep: 0 for the policy's grace,
	// job.KeepForever to keep its data until removed by hand.
	Keep time.Duration
	// KeepFrom is the oldest epoch a restart of the job may still use
	// (epochs.Book.KeepFrom); every older epoch is garbage. 0: none known.
	KeepFrom uint64
	// Files are the content hashes of the job's staged files.
	Files []string
	// Durable is where the job's newest epoch was kept outside the cluster
	// (job.Durable's Location: s3://BUCKET/PREFIX or a directory); "" when none.
	Durable string
}

// ended reports whether the job is over: a terminal state (job.Terminal)
// with its end recorded. A terminal state without an end time is not trusted
// to be over.
func (j Job) ended() bool {
	switch j.State {
	case job.Succeeded, job.Failed, job.Cancelled:
		return !j.Ended.IsZero()
	}
	return false
}

// Held is what a node holds of one job.
type Held struct {
	// Shards: the job's checkpoint directory exists (DATA/ckpt/JOB).
	Shards bool
	// Epochs are the epoch directories in it, oldest first.
	Epochs []uint64
	// Spares: it holds spares (rNNNNNN.spare: shards of pruned epochs kept to be
	// written over by their ranks' next ones, ckpt.JobDir.RetireEpoch).
	Spares bool
	// JobDir: DATA/jobs/JOB exists (the ranks' working directory, with the
	// program's copy and the job's files, and their rank states).
	JobDir bool
	// CoordDir: DATA/coord/JOB exists (a coordinator's launch files and manifest).
	CoordDir bool
	// Results: DATA/results/JOB exists (a task farm's stored results).
	Results bool
}

// File is one file of the node's cache of job files.
type File struct {
	Sum  string
	Used time.Time // last stored, or found cached by a submission
}

// Node is what one node holds: by job id, and its cached files.
type Node struct {
	Jobs  map[string]Held
	Files []File
}

// Kind is what an [Item] is.
type Kind string

// Kinds of items, in the order a plan lists a job's.
const (
	KindShards   Kind = "shards"    // the job's whole checkpoint directory
	KindEpoch    Kind = "epoch"     // one epoch directory of it
	KindSpares   Kind = "spares"    // the spares in it
	KindJobDir   Kind = "job-dir"   // DATA/jobs/JOB
	KindCoordDir Kind = "coord-dir" // DATA/coord/JOB
	KindResults  Kind = "results"   // DATA/results/JOB
	KindFile     Kind = "file"      // DATA/files/SUM
	KindDurable  Kind = "durable"   // the job's epochs in an object store (DecideDurable)
)

// Item is one piece of a node's data and what to do with it.
type Item struct {
	Kind   Kind
	Job    string // "" for a file
	Epoch  uint64 // of a KindEpoch
	Sum    string // of a KindFile
	Remove bool   // false: kept
	Reason string // one line a user understands
}

// Plan is the decision about everything a node holds.
type Plan struct {
	// Items are by job id, then kind (in the order of the Kind constants), then
	// epoch; files last, by hash.
	Items []Item
	// Next is the earliest time at which something kept now may be removed
	// (a grace period ending); zero when nothing will without a change.
	Next time.Time
}

// Removals returns the items to remove.
func (p Plan) Removals() []Item {
	var out []Item
	for _, it := range p.Items {
		if it.Remove {
			out = append(out, it)
		}
	}
	return out
}

// grace returns how long j's data stays after its end, or forever.
func (p Policy) grace(j Job) (d time.Duration, forever bool) {
	switch {
	case j.Keep == time.Duration(job.KeepForever):
		return 0, true
	case j.Keep > 0:
		return j.Keep, false
	case j.State == job.Succeeded:
		return p.Succeeded, false
	default:
		return p.Failed, false
	}
}

// Decide applies the policy at time now to what node holds, given what the job
// store says of every job it knows (jobs). The rules, in order:
//   - a job the store does not know: everything kept;
//   - epochs older than the job's KeepFrom: removed, whatever the job's state;
//   - a job that has not ended: the rest kept;
//   - a job that ended with job.KeepForever: everything kept;
//   - a job that ended: its spares removed at once (they are shards of pruned
//     epochs, kept only to be written over);
//   - a succeeded job without a Keep of its own: its shards removed at once;
//   - a job that ended at least its grace ago: everything removed, else kept
//     until then;
//   - a cached file: kept while a kept job names it, or while it was used less
//     than UnusedFiles ago; removed otherwise.
func Decide(p Policy, now time.Time, jobs []Job, node Node) Plan {
	return decide(p, now, jobs, node, "")
}

// Drop plans the removal of everything of job id now, whatever its grace or
// Keep: `shoal gc --job`. It fails with ErrNotEnded for a known job that has
// not ended. A job the store does not know is removed too: the user named it.
// The plan lists only the job's items and the cached files, which go by the
// usual rule with the job no longer counted as kept.
func Drop(p Policy, now time.Time, jobs []Job, node Node, id string) (Plan, error) {
	for _, j := range jobs {
		if j.ID == id && !j.ended() {
			return Plan{}, fmt.Errorf("%w: %s is %s", ErrNotEnded, id, j.State)
		}
	}
	all := decide(p, now, jobs, node, id)
	plan := Plan{Next: all.Next}
	for _, it := range all.Items {
		if it.Job == id || it.Kind == KindFile {
			plan.Items = append(plan.Items, it)
		}
	}
	return plan, nil
}

func decide(p Policy, now time.Time, jobs []Job, node Node, drop string) Plan {
	var plan Plan
	later := func(t time.Time) {
		if t.After(now) && (plan.Next.IsZero() || t.Before(plan.Next)) {
			plan.Next = t
		}
	}
	known := make(map[string]Job, len(jobs))
	for _, j := range jobs {
		known[j.ID] = j
	}
	// needs names, for each cached file, a kept job that names it.
	needs := map[string]string{}
	note := func(j Job, why string) {
		for _, s := range j.Files {
			if _, ok := needs[s]; !ok {
				needs[s] = fmt.Sprintf("job %s names it (%s)", j.ID, why)
			}
		}
	}
	for _, j := range jobs {
		if _, here := node.Jobs[j.ID]; !here && j.ID != drop {
			// The job holds its files here even with no directory of its own
			// (a submitting node that ran no rank).
			if why, kept := keptWithoutData(p, now, j); kept {
				note(j, why)
				if j.ended() {
					g, _ := p.grace(j)
					later(j.Ended.Add(g))
				}
			}
		}
	}
	ids := make([]string, 0, len(node.Jobs))
	for id := range node.Jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		h := node.Jobs[id]
		j, ok := known[id]
		items, why, kept := decideJob(p, now, id, j, ok, h, id == drop)
		plan.Items = append(plan.Items, items...)
		if ok && kept {
			note(j, why)
			if j.ended() {
				if g, forever := p.grace(j); !forever {
					later(j.Ended.Add(g))
				}
			}
		}
	}
	files := slices.Clone(node.Files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Sum, b.Sum) })
	for _, f := range files {
		it := Item{Kind: KindFile, Sum: f.Sum}
		idle := now.Sub(f.Used)
		switch why, needed := needs[f.Sum]; {
		case needed:
			it.Reason = why
		case idle < p.UnusedFiles:
			it.Reason = fmt.Sprintf("no kept job names it; used %s ago, kept %s after its last use", round(idle), round(p.UnusedFiles))
			later(f.Used.Add(p.UnusedFiles))
		default:
			it.Remove = true
			it.Reason = fmt.Sprintf("no kept job names it; last used %s ago", round(idle))
		}
		plan.Items = append(plan.Items, it)
	}
	return plan
}

// keptWithoutData reports whether a known job of which the node holds no
// directory still counts as kept (so its files stay), and why.
func keptWithoutData(p Policy, now time.Time, j Job) (string, bool) {
	if !j.ended() {
		return string(j.State), true
	}
	g, forever := p.grace(j)
	if forever {
		return "kept with --keep", true
	}
	if now.Sub(j.Ended) < g {
		return fmt.Sprintf("%s %s ago", j.State, round(now.Sub(j.Ended))), true
	}
	return "", false
}

// decideJob decides about what a node holds of job id (known: the store has
// it as j); kept reports whether the job still counts as kept for its files,
// and why.
func decideJob(p Policy, now time.Time, id string, j Job, known bool, h Held, drop bool) (items []Item, why string, kept bool) {
	add := func(k Kind, epoch uint64, remove bool, reason string) {
		items = append(items, Item{Kind: k, Job: id, Epoch: epoch, Remove: remove, Reason: reason})
	}
	// all decides the same for every directory of the job, except for the
	// shards when shards is set; old epochs go in any case, and an ended job's
	// spares.
	all := func(remove bool, reason string, shards *Item) {
		if h.Shards {
			if shards != nil {
				add(KindShards, 0, shards.Remove, shards.Reason)
			} else {
				add(KindShards, 0, remove, reason)
			}
		}
		if !remove && (shards == nil || !shards.Remove) {
			if known && j.KeepFrom > 0 {
				for _, e := range h.Epochs {
					if e < j.KeepFrom {
						add(KindEpoch, e, true, fmt.Sprintf("older than epoch %d, the oldest a restart may use", j.KeepFrom))
					}
				}
			}
			switch {
			case !h.Spares:
			case known && j.ended():
				add(KindSpares, 0, true, fmt.Sprintf("%s: shards of pruned epochs, kept only for the ranks' next ones to be written over", j.State))
			default:
				add(KindSpares, 0, false, reason)
			}
		}
		if h.JobDir {
			add(KindJobDir, 0, remove, reason)
		}
		if h.CoordDir {
			add(KindCoordDir, 0, remove, reason)
		}
		if h.Results {
			add(KindResults, 0, remove, reason)
		}
	}
	switch {
	case drop:
		all(true, "removed by request", nil)
		return items, "", false
	case !known:
		all(false, "unknown to the job store (a standalone run, or a job this node has yet to hear of): kept until `shoal gc --job` removes it", nil)
		return items, "", false
	case !j.ended():
		all(false, fmt.Sprintf("job is %s", j.State), nil)
		return items, string(j.State), true
	}
	g, forever := p.grace(j)
	age := now.Sub(j.Ended)
	switch {
	case forever:
		all(false, "kept with --keep until `shoal gc --job` removes it", nil)
		return items, "kept with --keep", true
	case age >= g:
		all(true, fmt.Sprintf("%s %s ago; kept %s after the end", j.State, round(age), round(g)), nil)
		return items, "", false
	}
	reason := fmt.Sprintf("%s %s ago; kept %s after the end", j.State, round(age), round(g))
	var shards *Item
	if j.State == job.Succeeded && j.Keep == 0 {
		shards = &Item{Remove: true, Reason: "succeeded: nothing restarts from its shards"}
	}
	all(false, reason, shards)
	return items, fmt.Sprintf("%s %s ago", j.State, round(age)), true
}

// DecideDurable applies the policy at time now to what jobs keep outside the
// cluster: one item for each job with a durable location, by the rules of the
// job's data on the nodes (see Decide), so that a job's epochs in an object
// store go when its shards would:
//   - a job that has not ended, or ended with job.KeepForever: kept;
//   - a succeeded job without a Keep of its own: removed at once (nothing
//     resumes from it; shoal run removes it itself when it sees the end);
//   - a job that ended at least its grace ago: removed, else kept until then;
//   - a directory (shoal run --durable DIR): always kept. It is a path the
//     job's user named, which root does not touch; shoal run clears it.
//
// Only one node acts on the plan (the job store's leader): the store is
// shared. Items are in the order of jobs.
func DecideDurable(p Policy, now time.Time, jobs []Job) Plan {
	var plan Plan
	for _, j := range jobs {
		if j.Durable == "" {
			continue
		}
		it := Item{Kind: KindDurable, Job: j.ID}
		g, forever := p.grace(j)
		age := now.Sub(j.Ended)
		switch {
		case !strings.HasPrefix(j.Durable, "s3://"):
			it.Reason = "a directory the job's user named: shoal run clears it, root does not"
		case !j.ended():
			it.Reason = fmt.Sprintf("job is %s", j.State)
		case forever:
			it.Reason = "kept with --keep until `shoal gc --job` removes it"
		case j.State == job.Succeeded && j.Keep == 0:
			it.Remove, it.Reason = true, "succeeded: nothing resumes from its epochs"
		case age >= g:
			it.Remove, it.Reason = true, fmt.Sprintf("%s %s ago; kept %s after the end", j.State, round(age), round(g))
		default:
			it.Reason = fmt.Sprintf("%s %s ago; kept %s after the end", j.State, round(age), round(g))
			if t := j.Ended.Add(g); plan.Next.IsZero() || t.Before(plan.Next) {
				plan.Next = t
			}
		}
		plan.Items = append(plan.Items, it)
	}
	return plan
}

func round(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d.Round(time.Second)
}
