package jobstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"shoal/internal/job"
)

func applyCmd(t *testing.T, f *fsm, c Command) error {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	res := f.Apply(&raft.Log{Data: b})
	if res == nil {
		return nil
	}
	return res.(error)
}

func TestFSMSubmitUpdate(t *testing.T) {
	f := newFSM()
	id := job.Job{ID: "heat-1", State: job.Pending, Submitted: time.Unix(5, 0)}
	if err := applyCmd(t, f, Command{Op: OpSubmit, ID: id.ID, Job: &id, Events: []job.Event{{Type: "state", Message: "pending"}}}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if err := applyCmd(t, f, Command{Op: OpSubmit, ID: id.ID, Job: &id}); !errors.Is(err, ErrExists) {
		t.Errorf("second submit: got %v, want ErrExists", err)
	}
	running := id
	running.State = job.Running
	if err := applyCmd(t, f, Command{Op: OpUpdate, ID: id.ID, Job: &running, Book: json.RawMessage(`{"complete":[3]}`),
		Events: []job.Event{{Type: "output", Message: "[0] hi"}, {Type: "launch", Message: "launching"}}}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := applyCmd(t, f, Command{Op: OpUpdate, ID: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of unknown job: got %v, want ErrNotFound", err)
	}
	if err := applyCmd(t, f, Command{Op: "frobnicate"}); !errors.Is(err, ErrBadCommand) {
		t.Errorf("unknown op: got %v, want ErrBadCommand", err)
	}
	r := f.jobs[id.ID]
	if r.Job.State != job.Running || string(r.Book) != `{"complete":[3]}` {
		t.Errorf("record = %+v, want running with the book", r.Job)
	}
	var seqs []uint64
	for _, e := range r.Events {
		seqs = append(seqs, e.Seq)
		if e.Job != id.ID {
			t.Errorf("event %d names job %q, want %q", e.Seq, e.Job, id.ID)
		}
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[2] != 3 {
		t.Errorf("event seqs = %v, want 1 2 3", seqs)
	}
	if got := r.since(2); len(got) != 2 || got[0].Message != "[0] hi" {
		t.Errorf("since(2) = %v, want the last two events", got)
	}
}

// Output beyond the bound drops the oldest lines and counts them; other events are
// kept; a long line is cut; numbering goes on.
func TestFSMBounds(t *testing.T) {
	f := newFSM()
	id := job.Job{ID: "j"}
	applyCmd(t, f, Command{Op: OpSubmit, ID: "j", Job: &id, Events: []job.Event{{Type: "state", Message: "first"}}})
	total := MaxOutputLines + MaxOutputLines/5
	for i := 0; i < total; i += 1000 {
		var evs []job.Event
		for k := 0; k < 1000; k++ {
			evs = append(evs, job.Event{Type: "output", Message: "line"})
		}
		applyCmd(t, f, Command{Op: OpUpdate, ID: "j", Events: evs})
	}
	applyCmd(t, f, Command{Op: OpUpdate, ID: "j", Events: []job.Event{{Type: "output-err", Message: strings.Repeat("x", 2*MaxLineBytes)}}})
	r := f.jobs["j"]
	if r.outputs > MaxOutputLines+MaxOutputLines/10 || r.outputs < MaxOutputLines {
		t.Errorf("kept %d output lines, want about %d", r.outputs, MaxOutputLines)
	}
	if got, want := r.Dropped, uint64(total+1-r.outputs); got != want {
		t.Errorf("dropped %d, want %d", got, want)
	}
	if r.Events[0].Type != "state" {
		t.Errorf("first event = %+v, want the state event kept", r.Events[0])
	}
	last := r.Events[len(r.Events)-1]
	if last.Seq != uint64(total+2) || len(last.Message) != MaxLineBytes {
		t.Errorf("last event seq %d, %d bytes; want seq %d, %d bytes", last.Seq, len(last.Message), total+2, MaxLineBytes)
	}
}

func TestFSMSnapshotRestore(t *testing.T) {
	f := newFSM()
	id := job.Job{ID: "j", State: job.Running}
	applyCmd(t, f, Command{Op: OpSubmit, ID: "j", Job: &id, Book: json.RawMessage(`{"x":1}`),
		Events: []job.Event{{Type: "output", Message: "[0] a"}, {Type: "state"}}})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	snap.Persist(&sink{Buffer: &buf})
	g := newFSM()
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	r := g.jobs["j"]
	if r == nil || r.Job.State != job.Running || r.NextSeq != 3 || r.outputs != 1 || string(r.Book) != `{"x":1}` {
		t.Errorf("restored %+v, want the job with 2 events, 1 output, its book", r)
	}
	if err := g.Restore(io.NopCloser(strings.NewReader("{"))); err == nil {
		t.Error("Restore of a truncated snapshot: no error")
	}
}

type sink struct{ *bytes.Buffer }

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { return nil }
func (s *sink) Close() error  { return nil }

// Replace starts an ended job again with a fresh record and the book given, and
// refuses a job that runs or does not exist.
func TestFSMReplace(t *testing.T) {
	f := newFSM()
	id := job.Job{ID: "farm-1", State: job.Running}
	if err := applyCmd(t, f, Command{Op: OpReplace, ID: id.ID, Job: &id}); !errors.Is(err, ErrNotFound) {
		t.Errorf("replace of an unknown job: got %v, want ErrNotFound", err)
	}
	applyCmd(t, f, Command{Op: OpSubmit, ID: id.ID, Job: &id, Events: []job.Event{{Type: "state"}, {Type: "state"}}})
	if err := applyCmd(t, f, Command{Op: OpReplace, ID: id.ID, Job: &id}); !errors.Is(err, ErrExists) {
		t.Errorf("replace of a running job: got %v, want ErrExists", err)
	}
	ended := id
	ended.State, ended.Ended = job.Failed, time.Unix(9, 0)
	applyCmd(t, f, Command{Op: OpUpdate, ID: id.ID, Job: &ended})
	again := job.Job{ID: id.ID, State: job.Pending}
	if err := applyCmd(t, f, Command{Op: OpReplace, ID: id.ID, Job: &again, Book: json.RawMessage(`{"done":[]}`),
		Events: []job.Event{{Type: "state", Message: "submitted again"}}}); err != nil {
		t.Fatalf("replace of an ended job: %v", err)
	}
	r := f.jobs[id.ID]
	if r.Job.State != job.Pending || !r.Job.Ended.IsZero() || string(r.Book) != `{"done":[]}` {
		t.Errorf("record after replace = %+v, book %s; want pending, not ended, the new book", r.Job, r.Book)
	}
	if len(r.Events) != 1 || r.Events[0].Seq != 1 || r.Events[0].Message != "submitted again" {
		t.Errorf("events after replace = %+v, want only the new one, numbered 1", r.Events)
	}
}
