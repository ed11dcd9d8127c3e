// Package localrun keeps the record of a job `shoal run` runs on this machine
// alone, without an agent: what identifies the job (its program and
// arguments), how and when its run ended. [Decide] is the rule that says
// whether a new run under the same id resumes from the checkpoints an earlier
// one kept, starts afresh, or is refused; [Store] reads and writes the records
// beside the runs' data, and collects what ended runs leave behind by a
// cluster's retention rules (internal/retention, docs/retention.md).
package localrun

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"shoal/internal/job"
)

// Errors of the package; a refusal of [Decide] is an [*Error] of one.
var (
	// ErrRunning: another shoal run runs the job on this machine now.
	ErrRunning = errors.New("localrun: job is running")
	// ErrOtherRun: the kept checkpoints are another program's or were written
	// with other arguments or another rank count.
	ErrOtherRun = errors.New("localrun: checkpoints of another run")
	// ErrSucceeded: the job succeeded already; its data is kept (--keep,
	// --keep-for) for a look, not for a rerun.
	ErrSucceeded = errors.New("localrun: job succeeded already")
	// ErrUnrecorded: checkpoints are there that no run recorded (an older
	// shoal, or files put there by hand).
	ErrUnrecorded = errors.New("localrun: checkpoints no run recorded")
)

// Error is a refusal of [Decide]: Msg is the whole line, Kind the sentinel
// it unwraps to.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

// Format is the version of the record this package writes and reads.
const Format = 1

// Identity is what makes a run the same job as an earlier one, so that it may
// resume from its checkpoints: the rule of standalone libshoal's manifest
// (docs/shard-format.md: the program's path, size and modification time, and
// its arguments), and the rank count, as for an epoch kept in --durable DIR.
// The environment is not part of it: what must not bind the checkpoints is
// passed there.
type Identity struct {
	Program string `json:"program"` // absolute path
	// Size and ModNs are the program's size and modification time: a program
	// rebuilt since may lay its state out differently.
	Size  int64    `json:"size"`
	ModNs int64    `json:"mod_ns"`
	Args  []string `json:"args"`
	// Ranks is a fixed count (-n); Range an elastic job's ("2 to 8 ranks"),
	// whose count on one machine follows its cores.
	Ranks int    `json:"ranks,omitempty"`
	Range string `json:"range,omitempty"`
}

// IdentityOf is the identity of spec, whose Argv[0] is an absolute path, as
// the program at that path is now.
func IdentityOf(spec job.Spec) (Identity, error) {
	st, err := os.Stat(spec.Argv[0])
	if err != nil {
		return Identity{}, err
	}
	id := Identity{Program: spec.Argv[0], Size: st.Size(), ModNs: st.ModTime().UnixNano(), Args: slices.Clone(spec.Argv[1:])}
	if id.Args == nil {
		id.Args = []string{}
	}
	if spec.Elastic() {
		id.Range = spec.RangeString()
	} else {
		id.Ranks = spec.Ranks
	}
	return id, nil
}

// Differences names, in a user's words, what of now differs from was: none
// when a run of now may resume from the checkpoints of was.
func (was Identity) Differences(now Identity) []string {
	var d []string
	switch {
	case was.Program != now.Program:
		d = append(d, fmt.Sprintf("program %s (now %s)", was.Program, now.Program))
	case was.Size != now.Size || was.ModNs != now.ModNs:
		d = append(d, fmt.Sprintf("%s as it was before it changed at %s", was.Program,
			time.Unix(0, now.ModNs).Format("2006-01-02 15:04:05")))
	}
	if !slices.Equal(was.Args, now.Args) {
		d = append(d, fmt.Sprintf("arguments %s (now %s)", argWords(was.Args), argWords(now.Args)))
	}
	if was.Ranks != now.Ranks || was.Range != now.Range {
		d = append(d, fmt.Sprintf("%s (now %s)", was.ranks(), now.ranks()))
	}
	return d
}

func (id Identity) ranks() string {
	if id.Range != "" {
		return id.Range
	}
	return job.Plural(id.Ranks, "rank")
}

// argWords shows arguments as a user typed them, "none" for none.
func argWords(args []string) string {
	if len(args) == 0 {
		return "none"
	}
	return strings.Join(args, " ")
}

// Record is what this machine keeps of a job `shoal run` ran here alone,
// beside its data, from its start until the data is removed.
type Record struct {
	Format int    `json:"format"`
	Job    string `json:"job"`
	Identity
	// State is running from the start until the run ends; then succeeded,
	// failed or cancelled. A record left running by a shoal run that was
	// killed is one whose lock nobody holds ([Store.Lock]).
	State  job.State `json:"state"`
	Reason string    `json:"reason,omitempty"` // why it ended, one line
	// Started and Ended are when the run began and ended (zero until then).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Keep is the run's --keep (job.KeepForever) or --keep-for; 0 for the
	// retention policy's grace.
	Keep job.Duration `json:"keep,omitempty"`
	// Farm is the spec of a task farm run here (`shoal farm` without an
	// agent, internal/localfarm), whose Identity is then empty; nil for a
	// `shoal run` job.
	Farm *job.Spec `json:"farm,omitempty"`
}

// Action is what a new run of a job does with what an earlier run kept.
type Action int

// Actions of a [Decision].
const (
	Fresh  Action = iota + 1 // start from the beginning, removing what is kept
	Resume                   // start from the newest complete epoch kept
	Refuse                   // do not run; Decision.Err says why
)

// Decision is what a new run does, and why.
type Decision struct {
	Action Action
	// Why names the earlier run for a resume ("an earlier run, cancelled 12 s
	// ago"); Err says why a run is refused.
	Why string
	Err error
}

// Decide says what a new run of job id with identity now does, given the
// record of the earlier run (nil: none), whether checkpoints of the job are
// kept (held), and --fresh. It is a pure function of its arguments; the lock
// that keeps two runs of one job apart is taken before ([Store.Lock]).
//   - the id of a task farm run here (shoal farm): refused, --fresh too;
//   - --fresh: start afresh, whatever is kept;
//   - no record and nothing kept: a first run;
//   - checkpoints without a record: refused (nothing says whose they are);
//   - a run that succeeded (its data kept by --keep or --keep-for): refused;
//   - another program, build, arguments or rank count: refused, naming each;
//   - else: resume.
func Decide(id string, old *Record, held, fresh bool, now Identity, at time.Time) Decision {
	again := "give --fresh to remove them and start from the beginning, or choose another --job-id"
	switch {
	case old != nil && old.Farm != nil:
		return Decision{Action: Refuse, Err: &Error{ErrOtherRun, fmt.Sprintf("job %s is a task farm run on this machine (shoal farm), not a job of shoal run; choose another --job-id", id)}}
	case fresh:
		return Decision{Action: Fresh}
	case old == nil && !held:
		return Decision{Action: Fresh}
	case old == nil:
		return Decision{Action: Refuse, Err: &Error{ErrUnrecorded, fmt.Sprintf("job %s: the checkpoints kept under this id were written by no run shoal recorded; %s", id, again)}}
	case old.State == job.Succeeded:
		return Decision{Action: Refuse, Err: &Error{ErrSucceeded, fmt.Sprintf("job %s succeeded %s; its data is kept to be looked at, not resumed: give --fresh to run it again from the beginning, or choose another --job-id", id, ago(old.Ended, at))}}
	}
	if d := old.Differences(now); len(d) > 0 {
		return Decision{Action: Refuse, Err: &Error{ErrOtherRun, fmt.Sprintf("job %s: its checkpoints were written by another run: %s; run it as before to resume, or %s", id, strings.Join(d, "; "), again)}}
	}
	return Decision{Action: Resume, Why: "an earlier run, " + old.ending(at)}
}

// ending says how and when the run ended: "cancelled 12 s ago".
func (r *Record) ending(at time.Time) string {
	if r.State == job.Running || r.State == "" {
		return "interrupted (shoal run was killed) " + ago(r.Started, at) + " or later"
	}
	return fmt.Sprintf("%s %s", r.State, ago(r.Ended, at))
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return job.Seconds(max(now.Sub(t), 0).Round(time.Second)) + " ago"
}
