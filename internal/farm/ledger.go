package farm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// ErrBadLedger: a stored ledger does not decode.
var ErrBadLedger = errors.New("farm: bad ledger")

// Result is where one task's result (its standard output) is stored.
type Result struct {
	Task    int      `json:"task"`
	Size    int64    `json:"size"`
	SHA256  string   `json:"sha256"`  // hex hash of the result
	Holders []string `json:"holders"` // the nodes that store a copy
	Node    string   `json:"node"`    // the node that ran it
}

// GaveUp is a task that failed every time it ran.
type GaveUp struct {
	Task     int `json:"task"`
	ExitCode int `json:"exit_code"`
	Attempts int `json:"attempts"`
}

// Ledger is a farm's record of its finished tasks: what the job store keeps of
// it. Its zero value is empty and ready.
type Ledger struct {
	done   map[int]Result
	gaveUp map[int]GaveUp
}

// ledgerJSON is the ledger as stored: results in task order, each as a short
// array [task, size, sha256, node, holder…], so that a ledger of many tasks
// stays small.
type ledgerJSON struct {
	Done   [][]any  `json:"done,omitempty"`
	GaveUp []GaveUp `json:"gave_up,omitempty"`
}

// Done records a task's stored result; a task given up before is not any more.
func (l *Ledger) Done(r Result) {
	if l.done == nil {
		l.done = map[int]Result{}
	}
	l.done[r.Task] = r
	delete(l.gaveUp, r.Task)
}

// GiveUp records a task that failed for good.
func (l *Ledger) GiveUp(g GaveUp) {
	if l.gaveUp == nil {
		l.gaveUp = map[int]GaveUp{}
	}
	l.gaveUp[g.Task] = g
}

// Forget drops a task's result (its copies are lost): it must run again.
func (l *Ledger) Forget(task int) { delete(l.done, task) }

// Result returns the stored result of task.
func (l *Ledger) Result(task int) (Result, bool) {
	r, ok := l.done[task]
	return r, ok
}

// IsDone reports whether task has a stored result.
func (l *Ledger) IsDone(task int) bool {
	_, ok := l.done[task]
	return ok
}

// Results returns the stored results in task order.
func (l *Ledger) Results() []Result {
	out := make([]Result, 0, len(l.done))
	for _, r := range l.done {
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Task < out[b].Task })
	return out
}

// GivenUp returns the tasks given up, in task order.
func (l *Ledger) GivenUp() []GaveUp {
	out := make([]GaveUp, 0, len(l.gaveUp))
	for _, g := range l.gaveUp {
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Task < out[b].Task })
	return out
}

// Len returns how many tasks have a stored result.
func (l *Ledger) Len() int { return len(l.done) }

// Held returns, in task order, the results of which node holds a copy.
func (l *Ledger) Held(node string) []int {
	var out []int
	for _, r := range l.done {
		if slices.Contains(r.Holders, node) {
			out = append(out, r.Task)
		}
	}
	sort.Ints(out)
	return out
}

// MarshalJSON encodes the ledger compactly, in task order.
func (l *Ledger) MarshalJSON() ([]byte, error) {
	var j ledgerJSON
	for _, r := range l.Results() {
		e := []any{r.Task, r.Size, r.SHA256, r.Node}
		for _, h := range r.Holders {
			e = append(e, h)
		}
		j.Done = append(j.Done, e)
	}
	j.GaveUp = l.GivenUp()
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (l *Ledger) UnmarshalJSON(b []byte) error {
	var j struct {
		Done   []json.RawMessage `json:"done"`
		GaveUp []GaveUp          `json:"gave_up"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("%w: %v", ErrBadLedger, err)
	}
	*l = Ledger{}
	for _, raw := range j.Done {
		var e []any
		if err := json.Unmarshal(raw, &e); err != nil || len(e) < 4 {
			return fmt.Errorf("%w: result %s", ErrBadLedger, raw)
		}
		task, ok1 := e[0].(float64)
		size, ok2 := e[1].(float64)
		sum, ok3 := e[2].(string)
		from, ok4 := e[3].(string)
		if !ok1 || !ok2 || !ok3 || !ok4 || task < 0 || size < 0 {
			return fmt.Errorf("%w: result %s", ErrBadLedger, raw)
		}
		r := Result{Task: int(task), Size: int64(size), SHA256: sum, Node: from}
		for _, h := range e[4:] {
			name, ok := h.(string)
			if !ok {
				return fmt.Errorf("%w: result %s", ErrBadLedger, raw)
			}
			r.Holders = append(r.Holders, name)
		}
		l.Done(r)
	}
	for _, g := range j.GaveUp {
		l.GiveUp(g)
	}
	return nil
}
