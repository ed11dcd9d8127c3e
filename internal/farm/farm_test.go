package farm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		argv []string
		line string
		n    int
		want []string
	}{
		{[]string{"p", "--tile", "{}", "--of", "32"}, "7", 7, []string{"p", "--tile", "7", "--of", "32"}},
		{[]string{"p", "in-{}.txt", "out-{#}"}, "a b", 3, []string{"p", "in-a b.txt", "out-3"}},
		{[]string{"p", "-v"}, "x y", 0, []string{"p", "-v", "x y"}},
		{[]string{"p", "{#}"}, "line", 12, []string{"p", "12", "line"}},
		{[]string{"p"}, "", 0, []string{"p", ""}},
		{[]string{"p", "{}"}, "{#}", 5, []string{"p", "{#}"}},
		{[]string{"{}", "{}{}"}, "z", 1, []string{"{}", "zz"}},
	}
	for _, tt := range tests {
		if got := Expand(tt.argv, tt.line, tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Expand(%q, %q, %d) = %q, want %q", tt.argv, tt.line, tt.n, got, tt.want)
		}
	}
}

// drain hands out every task the scheduler will give now.
func drain(s *Scheduler) map[string][]int {
	got := map[string][]int{}
	for {
		task, node, ok := s.Next()
		if !ok {
			return got
		}
		got[node] = append(got[node], task)
	}
}

func TestSchedulerFillsCoresPlusPrefetch(t *testing.T) {
	s := NewScheduler(20, nil, 2, 0)
	s.AddNode("n1", 4)
	s.AddNode("n2", 1)
	got := drain(s)
	// Load per core decides: n1 takes four before n2 (a tie at one per core
	// goes to the first by name) takes its first.
	want := map[string][]int{"n1": {0, 1, 2, 3, 5, 6}, "n2": {4, 7, 8}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("first dispatch = %v, want %v", got, want)
	}
	// One slot frees on n2: the next task goes there.
	if err := s.Done("n2", 4, 1); err != nil {
		t.Fatal(err)
	}
	if task, node, ok := s.Next(); !ok || task != 9 || node != "n2" {
		t.Errorf("after a task done on n2: Next() = %d, %s, %v, want 9, n2, true", task, node, ok)
	}
}

func TestSchedulerSkipsDone(t *testing.T) {
	s := NewScheduler(5, func(t int) bool { return t%2 == 0 }, 0, 0)
	s.AddNode("n1", 8)
	if got, want := drain(s)["n1"], []int{1, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("tasks handed out = %v, want %v", got, want)
	}
	if got := s.Left(); got != 2 {
		t.Errorf("Left() = %d, want 2", got)
	}
}

func TestSchedulerLearnsSpeed(t *testing.T) {
	s := NewScheduler(10, nil, 0, 0)
	s.AddNode("fast", 2)
	s.AddNode("slow", 2)
	t0, n0, _ := s.Next()
	t1, n1, _ := s.Next()
	if n0 != "fast" || n1 != "slow" {
		t.Fatalf("first two tasks on %s, %s, want fast, slow", n0, n1)
	}
	s.Done(n0, t0, 1)
	s.Done(n1, t1, 4)
	// fast takes 1 s a task, slow 4 s: fast has four times the capacity, so it
	// takes tasks until it holds two (its cores) while slow holds none.
	got := drain(s)
	if want := map[string][]int{"fast": {2, 3}, "slow": {4, 5}}; !reflect.DeepEqual(got, want) {
		t.Errorf("dispatch after learning = %v, want %v", got, want)
	}
}

func TestSchedulerRetriesThenGivesUp(t *testing.T) {
	s := NewScheduler(2, nil, 0, 2)
	s.AddNode("n1", 1)
	for attempt := 1; attempt <= 3; attempt++ {
		task, node, ok := s.Next()
		if !ok || task != 0 {
			t.Fatalf("attempt %d: Next() = %d, %s, %v, want task 0", attempt, task, node, ok)
		}
		again, err := s.Failed(node, task)
		if err != nil {
			t.Fatal(err)
		}
		if want := attempt <= 2; again != want {
			t.Errorf("attempt %d: again = %v, want %v", attempt, again, want)
		}
	}
	if got := s.Attempts(0); got != 3 {
		t.Errorf("Attempts(0) = %d, want 3", got)
	}
	if task, _, ok := s.Next(); !ok || task != 1 {
		t.Errorf("after giving task 0 up: Next() = %d, %v, want 1", task, ok)
	}
	if got := s.Left(); got != 1 {
		t.Errorf("Left() = %d, want 1", got)
	}
}

func TestSchedulerRemoveNodeRequeues(t *testing.T) {
	s := NewScheduler(6, nil, 1, 0)
	s.AddNode("n1", 1)
	s.AddNode("n2", 1)
	drain(s) // n1: 0, 2; n2: 1, 3
	if got, want := s.RemoveNode("n2"), []int{1, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("RemoveNode(n2) = %v, want %v", got, want)
	}
	s.Done("n1", 0, 1)
	if task, node, _ := s.Next(); task != 1 || node != "n1" {
		t.Errorf("after n2 lost: Next() = %d on %s, want 1 on n1", task, node)
	}
	if err := s.Done("n2", 3, 1); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("Done on a removed node: err = %v, want ErrUnknownNode", err)
	}
	if err := s.Done("n1", 5, 1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Done of a task not running: err = %v, want ErrNotRunning", err)
	}
	if got := s.RemoveNode("n9"); got != nil {
		t.Errorf("RemoveNode(unknown) = %v, want nil", got)
	}
}

func TestSchedulerNoNodes(t *testing.T) {
	s := NewScheduler(3, nil, 2, 0)
	if _, _, ok := s.Next(); ok {
		t.Error("Next() with no nodes: ok, want nothing")
	}
	s.AddNode("n1", 0) // counts as one core
	if got := len(drain(s)["n1"]); got != 3 {
		t.Errorf("a node of 0 cores, prefetch 2: took %d tasks, want 3", got)
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	var l Ledger
	l.Done(Result{Task: 3, Size: 10, SHA256: "ab", Holders: []string{"n1", "n2"}, Node: "n2"})
	l.Done(Result{Task: 0, Size: 0, SHA256: "cd", Holders: []string{"n1"}, Node: "n1"})
	l.GiveUp(GaveUp{Task: 5, ExitCode: 2, Attempts: 4})
	b, err := json.Marshal(&l)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"done":[[0,0,"cd","n1","n1"],[3,10,"ab","n2","n1","n2"]],"gave_up":[{"task":5,"exit_code":2,"attempts":4}]}`
	if string(b) != want {
		t.Errorf("encoded = %s, want %s", b, want)
	}
	var back Ledger
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Results(), l.Results()) || !reflect.DeepEqual(back.GivenUp(), l.GivenUp()) {
		t.Errorf("decoded %+v %+v, want %+v %+v", back.Results(), back.GivenUp(), l.Results(), l.GivenUp())
	}
	if got, want := back.Held("n2"), []int{3}; !reflect.DeepEqual(got, want) {
		t.Errorf("Held(n2) = %v, want %v", got, want)
	}
	back.Forget(3)
	if back.IsDone(3) || !back.IsDone(0) || back.Len() != 1 {
		t.Errorf("after Forget(3): done 3 %v, done 0 %v, len %d", back.IsDone(3), back.IsDone(0), back.Len())
	}
}

func TestLedgerRejectsBadInput(t *testing.T) {
	for _, in := range []string{`{"done":[[1,2,"x"]]}`, `{"done":[["a",2,"x","n"]]}`, `{"done":[[-1,2,"x","n"]]}`, `{"done":[[1,2,"x","n",5]]}`, `{"done":3}`} {
		var l Ledger
		if err := json.Unmarshal([]byte(in), &l); !errors.Is(err, ErrBadLedger) {
			t.Errorf("Unmarshal(%s): err = %v, want ErrBadLedger", in, err)
		}
	}
}

func TestSchedulerStatic(t *testing.T) {
	for _, tt := range []struct {
		mode string
		want map[string][]int
	}{
		{Cyclic, map[string][]int{"a": {0, 3}, "b": {1, 4}, "c": {2, 5}}},
		{Block, map[string][]int{"a": {0, 1}, "b": {2, 3}, "c": {4, 5}}},
	} {
		s := NewScheduler(6, nil, 10, 0)
		s.AddNode("a", 1)
		s.AddNode("b", 1)
		s.AddNode("c", 1)
		s.SetStatic(tt.mode, []string{"a", "b", "c"})
		if got := drain(s); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: dispatch = %v, want %v", tt.mode, got, tt.want)
		}
	}
	// A node with room takes none of another's tasks; a lost node's tasks go
	// to any node with room.
	s := NewScheduler(4, nil, 0, 0)
	s.AddNode("a", 1)
	s.AddNode("b", 1)
	s.SetStatic(Cyclic, []string{"a", "b"})
	drain(s) // a: 0, b: 1
	s.Done("a", 0, 1)
	if task, node, ok := s.Next(); !ok || task != 2 || node != "a" {
		t.Errorf("a free: Next() = %d, %s, %v; want 2 on a", task, node, ok)
	}
	s.Done("a", 2, 1)
	if task, node, ok := s.Next(); ok {
		t.Errorf("a free, b busy with its own: Next() = %d on %s, want nothing (task 3 is b's)", task, node)
	}
	s.RemoveNode("b") // 1 back in the queue, b's 3 too
	if got := drain(s)["a"]; !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("after b is lost: a takes %v, want [1] (one core)", got)
	}
}

func TestWireRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	req := Request{Task: 4, Argv: []string{"p", "a\nb", `"q"`}, Env: map[string]string{"K": "v"}}
	if err := WriteRequest(&buf, req); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRequest(bufio.NewReader(&buf))
	req.V = WireVersion
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Errorf("ReadRequest = %+v, %v; want %+v", got, err, req)
	}
	buf.Reset()
	rep := Reply{Task: 4, Size: 3, SHA256: "x", Stored: true}
	WriteReply(&buf, rep, []byte("a\nb"))
	WriteReply(&buf, Reply{Task: 5}, nil)
	br := bufio.NewReader(&buf)
	r1, out, err := ReadReply(br, 10)
	rep.V = WireVersion
	if err != nil || !reflect.DeepEqual(r1, rep) || string(out) != "a\nb" {
		t.Errorf("ReadReply = %+v, %q, %v; want %+v and its output", r1, out, err, rep)
	}
	if r2, out, err := ReadReply(br, 10); err != nil || r2.Task != 5 || len(out) != 0 {
		t.Errorf("second ReadReply = %+v, %q, %v; want task 5, no output", r2, out, err)
	}
	if _, _, err := ReadReply(br, 10); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: err = %v, want io.EOF", err)
	}
	if err := WriteReply(&buf, Reply{Size: 2}, []byte("x")); !errors.Is(err, ErrWire) {
		t.Errorf("WriteReply with a wrong size: err = %v, want ErrWire", err)
	}
}

func TestWireRejectsBadMessages(t *testing.T) {
	for _, in := range []string{
		`{"v":2,"task":0,"argv":["p"]}` + "\n",
		`{"v":1,"task":-1,"argv":["p"]}` + "\n",
		`{"v":1,"task":0,"argv":[]}` + "\n",
		`{"v":1,"task":0,"argv":["p"]}`, // unterminated
		"junk\n",
	} {
		if _, err := ReadRequest(bufio.NewReader(strings.NewReader(in))); !errors.Is(err, ErrWire) {
			t.Errorf("ReadRequest(%q): err = %v, want ErrWire", in, err)
		}
	}
	for _, in := range []string{
		`{"v":1,"task":0,"size":5}` + "\nabc", // cut short
		`{"v":1,"task":0,"size":50}` + "\n",   // over the bound
		`{"v":1,"task":0,"size":-1}` + "\n",   // negative
		`{"v":3,"task":0,"size":0}` + "\n",    // another version
	} {
		if _, _, err := ReadReply(bufio.NewReader(strings.NewReader(in)), 10); !errors.Is(err, ErrWire) {
			t.Errorf("ReadReply(%q): err = %v, want ErrWire", in, err)
		}
	}
}
