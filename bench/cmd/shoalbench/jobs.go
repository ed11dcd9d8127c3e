package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/internal/job"
)

// jobKind is one of the long jobs the chaos run keeps running: its program and
// arguments, and the result an uninterrupted run prints.
type jobKind struct {
	name string
	argv []string // PROGRAM ARGS (PROGRAM linked with libshoal)
	key  string   // the result line's key: "checksum", "solutions"
	want string   // the result of an uninterrupted run with plain mpirun
}

const chaosRanks = 4

// jobKinds are heat and nqueens paced to about 40 s, with their results from
// uninterrupted runs of their -plain builds under plain mpirun on this machine.
func jobKinds(root string) ([]jobKind, error) {
	kinds := []jobKind{
		{name: "heat", key: "checksum", argv: []string{"--size", "400", "--steps", "10000", "--pace", "4000"}},
		{name: "nqueens", key: "solutions", argv: []string{"--pace", "150000", "13"}},
	}
	for i, k := range kinds {
		plainArgs := k.argv
		if k.name == "heat" {
			plainArgs = k.argv[:4] // the pace changes timing only
		} else {
			plainArgs = k.argv[2:]
		}
		want, err := reference(root, chaosRanks, k.key, k.name, plainArgs...)
		if err != nil {
			return nil, err
		}
		kinds[i].want = want
		kinds[i].argv = append([]string{filepath.Join(root, "build/examples", k.name)}, k.argv...)
		logf("reference %s: %s %s", k.name, k.key, want)
	}
	return kinds, nil
}

// chaosJob is one job of the chaos run and what became of it.
type chaosJob struct {
	kind      jobKind
	id        string
	submitted time.Time
	interval  string
	ended     bool
	state     string // succeeded, failed, cancelled; "hung" when it never ended
	reason    string // the done event's reason, when it did not succeed
	result    string
	verified  bool
	wrong     bool
	restarts  int
	lost      []uint64 // complete epochs a restart went back past
	notes     []string // restarts from the beginning, coordinators, …
	events    []job.Event
	logs      string // shoal logs JOB once it ended
	// seen is how many events the job had at the last look, at moved the
	// time that number last grew: a job whose events stop hangs.
	seen   int
	moved  time.Time
	lookAt time.Time
}

// jobRunner keeps one job of each kind running while faults are injected.
type jobRunner struct {
	w       *world
	kinds   []jobKind
	rng     *rand.Rand
	mu      sync.Mutex
	jobs    []*chaosJob
	refused []string // submissions that failed
}

func newJobRunner(w *world, kinds []jobKind, seed uint64) *jobRunner {
	return &jobRunner{w: w, kinds: kinds, rng: rand.New(rand.NewPCG(seed, 2))}
}

func (r *jobRunner) all() []*chaosJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*chaosJob(nil), r.jobs...)
}

// loop submits a job of each kind whenever none of that kind runs, and
// collects the jobs that end, until stop is closed and every job has ended or
// hung.
func (r *jobRunner) loop(ctx context.Context, stop <-chan struct{}) {
	active := map[string]*chaosJob{} // kind → its running job
	stopping := false
	for {
		select {
		case <-stop:
			stopping = true
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if !stopping {
			for _, k := range r.kinds {
				if active[k.name] == nil {
					if j := r.submit(k); j != nil {
						active[k.name] = j
					}
				}
			}
		}
		if len(active) == 0 {
			if stopping {
				return
			}
			continue
		}
		states := r.states()
		for name, j := range active {
			st, known := states[j.id]
			switch {
			case known && (st.State == job.Succeeded || st.State == job.Failed || st.State == job.Cancelled):
				r.finish(j, string(st.State), st.Reason)
				delete(active, name)
			case time.Since(j.submitted) > r.w.cfg.jobTimeout:
				r.finish(j, "hung", fmt.Sprintf("not ended %v after its submission", r.w.cfg.jobTimeout))
				delete(active, name)
			case r.stalled(j):
				r.finish(j, "hung", fmt.Sprintf("no new event for %v", r.w.cfg.stall))
				delete(active, name)
			}
		}
	}
}

// submit starts a job of kind k from a healthy host; nil when none accepted it.
func (r *jobRunner) submit(k jobKind) *chaosJob {
	interval := []string{"1s", "1500ms", "2s"}[r.rng.IntN(3)]
	args := append([]string{"-n", strconv.Itoa(chaosRanks), "--ckpt-interval", interval,
		"--max-oversubscribe", "2", "--max-restarts", "20", "--"}, k.argv...)
	var errs []string
	for _, h := range r.w.healthy(r.rng) {
		id, err := r.w.c.submit(h, args...)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		j := &chaosJob{kind: k, id: id, submitted: time.Now(), interval: interval, moved: time.Now()}
		logf("job %s submitted from %s (checkpoint every %s)", id, h, interval)
		r.mu.Lock()
		r.jobs = append(r.jobs, j)
		r.mu.Unlock()
		return j
	}
	if len(errs) > 0 {
		r.mu.Lock()
		r.refused = append(r.refused, errs[0])
		r.mu.Unlock()
	}
	return nil
}

// stalled looks at j's events every few seconds and reports whether none came
// for cfg.stall: a running heat prints a line every 10 % of its steps and a
// running job completes an epoch every few seconds.
func (r *jobRunner) stalled(j *chaosJob) bool {
	if time.Since(j.lookAt) < 5*time.Second {
		return false
	}
	j.lookAt = time.Now()
	for _, h := range r.w.healthy(r.rng) {
		if evs, err := r.w.c.events(h, j.id); err == nil {
			if len(evs) > j.seen {
				j.seen, j.moved = len(evs), time.Now()
			}
			break
		}
	}
	return time.Since(j.moved) > r.w.cfg.stall
}

// states is every job's state as the first healthy host that answers says.
func (r *jobRunner) states() map[string]job.Job {
	for _, h := range r.w.healthy(r.rng) {
		jobs, err := r.w.c.jobs(h)
		if err != nil {
			continue
		}
		m := map[string]job.Job{}
		for _, j := range jobs {
			m[j.ID] = j
		}
		return m
	}
	return nil
}

// finish reads an ended (or hung) job's events and output and checks its result
// against the uninterrupted run's; why is the reason `shoal jobs` gives, or why it hung.
func (r *jobRunner) finish(j *chaosJob, state, why string) {
	j.ended, j.state = true, state
	var logs string
	for _, h := range r.w.healthy(r.rng) {
		evs, err := r.w.c.events(h, j.id)
		if err != nil {
			continue
		}
		out, code, err := r.w.c.run(h, 30*time.Second, "logs", j.id)
		if err != nil || code != 0 {
			continue
		}
		j.events, logs, j.logs = evs, out, out
		break
	}
	j.reason = why
	if state != "hung" && state != "succeeded" {
		j.reason = "(no done event; shoal jobs says: " + why + ")"
		for _, e := range j.events {
			if e.Type == "done" {
				j.reason = e.Message
			}
		}
	}
	if state == "hung" {
		if n := len(j.events); n > 0 {
			e := j.events[n-1]
			j.reason += fmt.Sprintf("; its last event: %s %s %s", e.Time.Format("15:04:05.000"), e.Type, e.Message)
		}
	}
	j.restarts, j.lost, j.notes = epochsLost(j.events)
	j.result = field(logs, j.kind.key)
	if state == "succeeded" {
		j.verified = j.result == j.kind.want && (j.kind.name != "nqueens" || strings.Contains(logs, "check: matches"))
		j.wrong = !j.verified
	}
	verdict := map[bool]string{true: "verified", false: "WRONG RESULT " + j.result + ", want " + j.kind.want}[j.verified]
	if state != "succeeded" {
		verdict = j.reason
	}
	logf("job %s %s after %s, %d restarts, %d complete epochs lost: %s", j.id, state,
		time.Since(j.submitted).Round(time.Second), j.restarts, len(j.lost), verdict)
}

var (
	epochDone = regexp.MustCompile(`^epoch (\d+) complete`)
	fromEpoch = regexp.MustCompile(`from epoch (\d+)`)
)

// epochsLost reads a job's events: how often it was launched again, the
// complete epochs newer than the one each relaunch started from (work done and
// saved, then lost), and notes on relaunches from the beginning.
func epochsLost(evs []job.Event) (restarts int, lost []uint64, notes []string) {
	complete := map[uint64]bool{}
	counted := map[uint64]bool{}
	launches := 0
	for _, e := range evs {
		switch e.Type {
		case "epoch":
			if m := epochDone.FindStringSubmatch(e.Message); m != nil {
				n, _ := strconv.ParseUint(m[1], 10, 64)
				complete[n] = true
			}
		case "coordinator":
			notes = append(notes, e.Message)
		case "launch":
			launches++
			if launches == 1 {
				continue
			}
			restarts++
			var from uint64
			if m := fromEpoch.FindStringSubmatch(e.Message); m != nil {
				from, _ = strconv.ParseUint(m[1], 10, 64)
			} else if len(complete) > 0 {
				notes = append(notes, fmt.Sprintf("relaunched from the beginning with %d complete epochs", len(complete)))
			}
			for n := range complete {
				if n > from && !counted[n] {
					counted[n] = true
					lost = append(lost, n)
				}
			}
		}
	}
	return restarts, lost, notes
}
