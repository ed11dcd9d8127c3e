package retention

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

var allStates = []job.State{
	job.Pending, job.Staging, job.Running, job.Moving, job.Restarting,
	job.Succeeded, job.Failed, job.Cancelled,
}

func terminal(s job.State) bool {
	return s == job.Succeeded || s == job.Failed || s == job.Cancelled
}

// heldCombos is every combination of what a node may hold of a job: each
// directory or not, and the checkpoint directory with no epoch, old epochs
// only, or old and usable ones (KeepFrom is 5 where the case sets it), with
// spares or without.
func heldCombos() []Held {
	var out []Held
	for mask := 0; mask < 32; mask++ {
		for _, epochs := range [][]uint64{nil, {1, 2}, {3, 5, 6, 9}} {
			h := Held{Shards: mask&1 != 0, JobDir: mask&2 != 0, CoordDir: mask&4 != 0, Results: mask&8 != 0, Spares: mask&16 != 0}
			if h.Shards {
				h.Epochs = epochs
			} else if epochs != nil || h.Spares {
				continue
			}
			out = append(out, h)
		}
	}
	return out
}

// TestDecideEveryCase checks, for every job state, end, Keep, age against the
// grace, epoch floor and combination of directories, that each directory the
// node holds gets exactly one item and that what is removed is what the rules
// say; and that a job that has not ended, or is unknown, loses nothing a
// restart could use.
func TestDecideEveryCase(t *testing.T) {
	p := Policy{Succeeded: time.Hour, Failed: 24 * time.Hour, UnusedFiles: time.Hour}
	keeps := []time.Duration{0, 2 * time.Hour, time.Duration(job.KeepForever)}
	// Ages relative to the grace: just before it ends, at its end, after.
	offsets := []time.Duration{-time.Second, 0, time.Second}
	n := 0
	for _, state := range allStates {
		for _, endSet := range []bool{false, true} {
			for _, keep := range keeps {
				for _, off := range offsets {
					for _, keepFrom := range []uint64{0, 5} {
						for _, h := range heldCombos() {
							for _, known := range []bool{true, false} {
								n++
								checkCase(t, p, state, endSet, keep, off, keepFrom, h, known)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases", n)
}

func checkCase(t *testing.T, p Policy, state job.State, endSet bool, keep, off time.Duration, keepFrom uint64, h Held, known bool) {
	t.Helper()
	j := Job{ID: "job-1", State: state, Keep: keep, KeepFrom: keepFrom, Files: []string{"f1"}}
	grace := p.Failed
	switch {
	case keep > 0:
		grace = keep
	case state == job.Succeeded:
		grace = p.Succeeded
	}
	now := t0.Add(grace + off)
	if endSet {
		j.Ended = t0
	}
	var jobs []Job
	if known {
		jobs = []Job{j}
	}
	node := Node{Jobs: map[string]Held{"job-1": h}}
	plan := Decide(p, now, jobs, node)
	name := fmt.Sprintf("state=%s ended=%v keep=%v age=grace%+v keepFrom=%d held=%+v known=%v", state, endSet, keep, off, keepFrom, h, known)

	got := map[Kind]bool{}      // kind → removed (directories)
	epochs := map[uint64]bool{} // epoch items, all removals
	for _, it := range plan.Items {
		if it.Job != "job-1" {
			t.Fatalf("%s: item %+v: want job-1", name, it)
		}
		if it.Reason == "" {
			t.Errorf("%s: item %+v has no reason", name, it)
		}
		if it.Kind == KindEpoch {
			if !it.Remove {
				t.Errorf("%s: epoch item %d kept: only removals are listed per epoch", name, it.Epoch)
			}
			epochs[it.Epoch] = true
			continue
		}
		if _, dup := got[it.Kind]; dup {
			t.Errorf("%s: %s listed twice", name, it.Kind)
		}
		got[it.Kind] = it.Remove
	}
	for _, k := range []struct {
		kind Kind
		held bool
	}{{KindShards, h.Shards}, {KindJobDir, h.JobDir}, {KindCoordDir, h.CoordDir}, {KindResults, h.Results}} {
		if _, listed := got[k.kind]; listed != k.held {
			t.Errorf("%s: %s listed %v, want %v", name, k.kind, listed, k.held)
		}
	}

	ended := terminal(state) && endSet
	forever := keep == time.Duration(job.KeepForever)
	past := off >= 0
	var wantDirs, wantShards bool // removed
	switch {
	case !known || !ended || forever:
	case past:
		wantDirs, wantShards = true, true
	default:
		wantShards = state == job.Succeeded && keep == 0
	}
	if h.JobDir && got[KindJobDir] != wantDirs {
		t.Errorf("%s: job dir removed %v, want %v", name, got[KindJobDir], wantDirs)
	}
	if h.CoordDir && got[KindCoordDir] != wantDirs {
		t.Errorf("%s: coord dir removed %v, want %v", name, got[KindCoordDir], wantDirs)
	}
	if h.Results && got[KindResults] != wantDirs {
		t.Errorf("%s: results removed %v, want %v", name, got[KindResults], wantDirs)
	}
	if h.Shards && got[KindShards] != wantShards {
		t.Errorf("%s: shards removed %v, want %v", name, got[KindShards], wantShards)
	}
	// Spares: listed when held and the directory stays; they go once a known
	// job has ended, whatever its grace or Keep.
	if _, listed := got[KindSpares]; listed != (h.Spares && !wantShards) {
		t.Errorf("%s: spares listed %v, want %v", name, listed, h.Spares && !wantShards)
	} else if listed && got[KindSpares] != (known && ended) {
		t.Errorf("%s: spares removed %v, want %v", name, got[KindSpares], known && ended)
	}
	// Epochs: those below KeepFrom go when the directory stays; never one a
	// restart may use; none of an unknown job.
	var wantEpochs []uint64
	if known && h.Shards && !wantShards && keepFrom > 0 {
		for _, e := range h.Epochs {
			if e < keepFrom {
				wantEpochs = append(wantEpochs, e)
			}
		}
	}
	var gotEpochs []uint64
	for e := range epochs {
		gotEpochs = append(gotEpochs, e)
	}
	slices.Sort(gotEpochs)
	if !slices.Equal(gotEpochs, wantEpochs) {
		t.Errorf("%s: epochs removed %v, want %v", name, gotEpochs, wantEpochs)
	}
	// Next: the end of the grace when something of the job waits for it.
	var wantNext time.Time
	if known && ended && !forever && !past {
		wantNext = t0.Add(grace)
	}
	if !plan.Next.Equal(wantNext) {
		t.Errorf("%s: next %v, want %v", name, plan.Next, wantNext)
	}
}

func TestDecideReasons(t *testing.T) {
	p := DefaultPolicy()
	ended := t0.Add(-3 * time.Hour)
	cases := []struct {
		name string
		job  *Job // nil: unknown
		held Held
		want []string // "kind remove: reason", in plan order
	}{
		{"running", &Job{State: job.Running, KeepFrom: 4},
			Held{Shards: true, Epochs: []uint64{2, 4, 5}, JobDir: true},
			[]string{
				"shards keep: job is running",
				"epoch 2 remove: older than epoch 4, the oldest a restart may use",
				"job-dir keep: job is running",
			}},
		{"failed within grace", &Job{State: job.Failed, Ended: ended},
			Held{Shards: true, CoordDir: true},
			[]string{
				"shards keep: failed 3h0m0s ago; kept 24h0m0s after the end",
				"coord-dir keep: failed 3h0m0s ago; kept 24h0m0s after the end",
			}},
		{"succeeded past grace", &Job{State: job.Succeeded, Ended: ended},
			Held{JobDir: true},
			[]string{"job-dir remove: succeeded 3h0m0s ago; kept 1h0m0s after the end"}},
		{"succeeded within grace", &Job{State: job.Succeeded, Ended: t0.Add(-time.Minute)},
			Held{Shards: true, JobDir: true},
			[]string{
				"shards remove: succeeded: nothing restarts from its shards",
				"job-dir keep: succeeded 1m0s ago; kept 1h0m0s after the end",
			}},
		{"kept for ever", &Job{State: job.Cancelled, Ended: t0.Add(-1000 * time.Hour), Keep: time.Duration(job.KeepForever)},
			Held{Shards: true},
			[]string{"shards keep: kept with --keep until `shoal gc --job` removes it"}},
		{"unknown", nil,
			Held{Shards: true, Epochs: []uint64{1}},
			[]string{"shards keep: unknown to the job store (a standalone run, or a job this node has yet to hear of): kept until `shoal gc --job` removes it"}},
	}
	for _, c := range cases {
		var jobs []Job
		if c.job != nil {
			j := *c.job
			j.ID = "j"
			jobs = []Job{j}
		}
		plan := Decide(p, t0, jobs, Node{Jobs: map[string]Held{"j": c.held}})
		var got []string
		for _, it := range plan.Items {
			s := string(it.Kind)
			if it.Kind == KindEpoch {
				s += fmt.Sprint(" ", it.Epoch)
			}
			if it.Remove {
				s += " remove: "
			} else {
				s += " keep: "
			}
			got = append(got, s+it.Reason)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got\n\t%s\nwant\n\t%s", c.name, strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
		}
	}
}

// TestDecideFiles checks that a cached file stays while a kept job names it,
// whether or not the node holds a directory of that job, and otherwise for
// UnusedFiles after its last use.
func TestDecideFiles(t *testing.T) {
	p := Policy{Succeeded: time.Hour, Failed: 24 * time.Hour, UnusedFiles: 10 * time.Minute}
	old := t0.Add(-48 * time.Hour)
	jobs := []Job{
		{ID: "running", State: job.Running, Files: []string{"a", "shared"}},
		{ID: "fresh-fail", State: job.Failed, Ended: t0.Add(-time.Hour), Files: []string{"b"}},
		{ID: "old-fail", State: job.Failed, Ended: old, Files: []string{"c", "shared"}},
		{ID: "forever", State: job.Succeeded, Ended: old, Keep: time.Duration(job.KeepForever), Files: []string{"d"}},
		{ID: "old-ok", State: job.Succeeded, Ended: old, Files: []string{"e", "young"}},
	}
	files := []File{{"a", old}, {"b", old}, {"c", old}, {"d", old}, {"e", old}, {"shared", old}, {"stray", old}, {"young", t0.Add(-time.Minute)}}
	// Node holds directories of some jobs only: files follow jobs, not directories.
	node := Node{Jobs: map[string]Held{"old-fail": {JobDir: true}, "running": {JobDir: true}}, Files: files}
	plan := Decide(p, t0, jobs, node)
	removed := map[string]bool{}
	for _, it := range plan.Items {
		if it.Kind == KindFile {
			removed[it.Sum] = it.Remove
		}
	}
	want := map[string]bool{"a": false, "b": false, "c": true, "d": false, "e": true, "shared": false, "stray": true, "young": false}
	for sum, w := range want {
		if removed[sum] != w {
			t.Errorf("file %s removed %v, want %v", sum, removed[sum], w)
		}
	}
	// The young file is the first thing to become removable (fresh-fail's grace ends later).
	if want := t0.Add(9 * time.Minute); !plan.Next.Equal(want) {
		t.Errorf("next %v, want %v", plan.Next, want)
	}
	var sums []string
	for _, it := range plan.Items {
		if it.Kind == KindFile {
			sums = append(sums, it.Sum)
		}
	}
	if !slices.IsSorted(sums) || len(sums) != len(files) {
		t.Errorf("files listed %v: want each once, sorted", sums)
	}
}

func TestDrop(t *testing.T) {
	p := DefaultPolicy()
	jobs := []Job{
		{ID: "done", State: job.Failed, Ended: t0.Add(-time.Minute), Keep: time.Duration(job.KeepForever), Files: []string{"x"}},
		{ID: "other", State: job.Failed, Ended: t0.Add(-100 * time.Hour)},
	}
	for _, s := range allStates {
		for _, endSet := range []bool{false, true} {
			j := Job{ID: "live", State: s}
			if endSet {
				j.Ended = t0
			}
			_, err := Drop(p, t0, []Job{j}, Node{Jobs: map[string]Held{"live": {Shards: true}}}, "live")
			wantErr := !(terminal(s) && endSet)
			if gotErr := errors.Is(err, ErrNotEnded); gotErr != wantErr {
				t.Errorf("drop of a job %s (end set %v): error %v, want ErrNotEnded %v", s, endSet, err, wantErr)
			}
		}
	}
	node := Node{
		Jobs:  map[string]Held{"done": {Shards: true, JobDir: true}, "other": {JobDir: true}, "standalone": {Shards: true}},
		Files: []File{{"x", t0.Add(-2 * time.Hour)}},
	}
	plan, err := Drop(p, t0, jobs, node, "done")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range plan.Items {
		got = append(got, fmt.Sprintf("%s %s%s %v", it.Job, it.Kind, it.Sum, it.Remove))
	}
	// Only the named job and the files: "other", though collectable, is left to the policy.
	want := []string{"done shards true", "done job-dir true", " filex true"}
	if !slices.Equal(got, want) {
		t.Errorf("drop plan %q, want %q", got, want)
	}
	plan, err = Drop(p, t0, jobs, node, "standalone")
	if err != nil || len(plan.Removals()) != 1 || plan.Removals()[0].Job != "standalone" {
		t.Errorf("drop of an unknown job: %v, %+v; want its shards removed", err, plan.Removals())
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Errorf("default policy: %v", err)
	}
	p := DefaultPolicy()
	p.Failed = -time.Second
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "Failed -1s") {
		t.Errorf("negative Failed: got %v, want an error naming Failed -1s", err)
	}
}

// TestDecideDurable: a job's epochs in an object store go when its shards on
// the nodes would; a directory is never touched; Next is the earliest end of
// a grace.
func TestDecideDurable(t *testing.T) {
	p := DefaultPolicy()
	loc := "s3://lab/jobs/heat"
	ended := func(id string, s job.State, ago, keep time.Duration) Job {
		return Job{ID: id, State: s, Ended: t0.Add(-ago), Keep: keep, Durable: loc}
	}
	jobs := []Job{
		{ID: "running", State: job.Running, Durable: loc},
		ended("ok", job.Succeeded, time.Minute, 0),
		ended("ok-keep-for", job.Succeeded, time.Minute, 2*time.Hour),
		ended("failed-new", job.Failed, time.Hour, 0),
		ended("failed-old", job.Failed, 25*time.Hour, 0),
		ended("cancelled-old", job.Cancelled, 24*time.Hour, 0),
		ended("forever", job.Cancelled, 1000*time.Hour, time.Duration(job.KeepForever)),
		{ID: "dir", State: job.Failed, Ended: t0.Add(-100 * time.Hour), Durable: "/shared/ckpt"},
		{ID: "none", State: job.Failed, Ended: t0.Add(-100 * time.Hour)},
		{ID: "no-end", State: job.Failed, Durable: loc},
	}
	plan := DecideDurable(p, t0, jobs)
	var got []string
	for _, it := range plan.Items {
		if it.Kind != KindDurable {
			t.Errorf("item %+v: kind %s, want durable", it, it.Kind)
		}
		got = append(got, fmt.Sprintf("%s:%v", it.Job, it.Remove))
	}
	want := "running:false ok:true ok-keep-for:false failed-new:false failed-old:true cancelled-old:true forever:false dir:false no-end:false"
	if strings.Join(got, " ") != want {
		t.Errorf("plan\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	// ok-keep-for's grace ends first (in 1 h 59 min), before failed-new's (23 h).
	if wantNext := t0.Add(-time.Minute + 2*time.Hour); !plan.Next.Equal(wantNext) {
		t.Errorf("Next %v, want %v (ok-keep-for's grace)", plan.Next, wantNext)
	}
	for _, it := range plan.Items {
		if it.Job == "dir" && !strings.Contains(it.Reason, "directory") {
			t.Errorf("dir's reason %q does not say why a directory is kept", it.Reason)
		}
	}
}
