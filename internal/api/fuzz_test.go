package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"shoal/internal/job"
)

// requestKinds are the bodies the API decodes, each with its check when it has one.
var requestKinds = []struct {
	name  string
	value func() any
	check func(any) error
}{
	{"job", func() any { return new(job.Spec) }, func(v any) error { return v.(*job.Spec).Validate() }},
	{"launch", func() any { return new(LaunchRequest) }, func(v any) error { return v.(*LaunchRequest).Validate() }},
	{"grant", func() any { return new(GrantRequest) }, func(v any) error { return v.(*GrantRequest).Validate() }},
	{"fetch", func() any { return new(FetchRequest) }, func(v any) error { return v.(*FetchRequest).Validate() }},
	{"encode", func() any { return new(EncodeRequest) }, func(v any) error { return v.(*EncodeRequest).Validate() }},
	{"rebuild", func() any { return new(RebuildRequest) }, func(v any) error { return v.(*RebuildRequest).Validate(1) }},
	{"leave", func() any { return new(LeaveRequest) }, nil},
	{"rebalance", func() any { return new(RebalanceRequest) }, nil},
	{"evacuate", func() any { return new(EvacuateRequest) }, nil},
	{"checkpoint", func() any { return new(CheckpointRequest) }, nil},
}

// FuzzDecodeRequest feeds arbitrary bodies to the decoder every route uses, then to
// the request's own check. Neither may panic, every refusal must be a bad request
// (a 400, never a 500), and a body that passes both must survive a round trip
// through JSON unchanged in meaning (it decodes again and passes again).
func FuzzDecodeRequest(f *testing.F) {
	for i, body := range []string{
		`{"ranks": 4, "argv": ["./heat", "--steps", "10"], "env": {"A": "b"}, "files": [{"name": "in/x", "sha256": "` + EmptySHA256 + `", "size": 0, "mode": 420}], "max_oversubscribe": 2, "wait_for_nodes": "5s"}`,
		`{"job": "heat-1", "argv": ["orted", "-mca", "ess", "\"env\""], "env": {"K": "V"}}`,
		`{"job": "heat-1", "coordinator": "n1", "ranks": 2, "ttl": "10m"}`,
		`{"from": "10.0.0.2:7947"}`,
		`{"timeout": "30s"}`,
		`{}`,
		`{"node": "n3"}`,
		`{"hold": true}`,
		`{"ranks": 1, "argv": ["./heat", "a\u0000b"], "env": {"A": "\u001b[2J"}, "files": [{"name": "in\nput", "sha256": "` + EmptySHA256 + `"}]}`,
		`{"job": "heat-1", "argv": ["orted", "\t", "\u009b"], "env": {"K\r": "V"}}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		k := requestKinds[int(kind)%len(requestKinds)]
		v := k.value()
		r, _ := http.NewRequest("POST", "/", strings.NewReader(string(body)))
		err := decodeJSON(r, v, true)
		if err == nil && k.check != nil {
			err = k.check(v)
		}
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%s body %q: error %v does not wrap ErrBadRequest", k.name, body, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s body %q: error is not one line: %q", k.name, body, err)
			}
			return
		}
		if spec, ok := v.(*job.Spec); ok {
			noControl(t, body, spec)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: accepted value does not encode: %v", k.name, err)
		}
		w := k.value()
		r, _ = http.NewRequest("POST", "/", strings.NewReader(string(again)))
		if err := decodeJSON(r, w, true); err != nil {
			t.Fatalf("%s: accepted %q, re-encoded as %s, which decodes with %v", k.name, body, again, err)
		}
		if k.check != nil {
			if err := k.check(w); err != nil {
				t.Fatalf("%s: accepted %q, re-encoded as %s, which fails its check: %v", k.name, body, again, err)
			}
		}
	})
}

// noControl fails if an accepted spec holds a control character (a tab aside)
// in a text that reaches a command line, a file name or a log.
func noControl(t *testing.T, body []byte, s *job.Spec) {
	t.Helper()
	texts := append([]string{s.ID, s.ResumeFrom}, s.Argv...)
	for k, v := range s.Env {
		texts = append(texts, k, v)
	}
	for _, f := range s.Files {
		texts = append(texts, f.Name)
	}
	if s.Owner != nil {
		texts = append(texts, s.Owner.Name)
	}
	if s.Farm != nil {
		texts = append(texts, s.Farm.Tasks...)
	}
	for _, text := range texts {
		if strings.ContainsFunc(text, func(r rune) bool { return r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f) }) {
			t.Fatalf("job body %q: accepted with the control character in %q", body, text)
		}
	}
}
