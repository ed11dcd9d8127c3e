package farm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The task runner protocol: a farm's coordinator starts one task runner per
// node (`shoal exec-task`, through the node's agent, as it starts MPI daemons)
// and talks to it over the runner's standard input and output.
//
//   - Coordinator to runner: one [Request] per line, JSON. The end of the
//     input asks the runner to finish the tasks it has and exit.
//   - Runner to coordinator: per finished task, one [Reply] line, JSON,
//     followed by exactly Reply.Size bytes: the task's standard output.
//   - The tasks' standard error reaches the runner's, each line prefixed
//     "[task N] ".
//
// A runner runs as many tasks at once as it was given slots; the others wait
// in its queue, in the order they came.

// WireVersion is the version of the protocol; a runner refuses another.
const WireVersion = 1

// ErrWire: a message of the runner protocol is malformed.
var ErrWire = errors.New("farm: bad task runner message")

// Request asks a runner to run one task.
type Request struct {
	V    int               `json:"v"`
	Task int               `json:"task"`
	Argv []string          `json:"argv"` // the program (a staged file's name, or a path) and its arguments
	Env  map[string]string `json:"env,omitempty"`
}

// Reply says how a task ended; its output follows it.
type Reply struct {
	V        int     `json:"v"`
	Task     int     `json:"task"`
	ExitCode int     `json:"exit_code"`
	Signal   int     `json:"signal,omitempty"` // killed by this signal
	Size     int64   `json:"size"`             // bytes of output that follow
	SHA256   string  `json:"sha256"`
	Seconds  float64 `json:"seconds"`
	// Stored: the runner stored the result in its node's store.
	Stored bool `json:"stored,omitempty"`
	// Error: the runner could not run the task (the program did not start).
	Error string `json:"error,omitempty"`
}

// MaxWireLine bounds a message line.
const MaxWireLine = 1 << 20

// WriteRequest writes r as one line.
func WriteRequest(w io.Writer, r Request) error {
	r.V = WireVersion
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadRequest reads one request; io.EOF at the end of the input.
func ReadRequest(r *bufio.Reader) (Request, error) {
	line, err := readLine(r)
	if err != nil {
		return Request{}, err
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrWire, err)
	}
	if req.V != WireVersion {
		return Request{}, fmt.Errorf("%w: version %d, want %d (the nodes run different versions of shoal)", ErrWire, req.V, WireVersion)
	}
	if req.Task < 0 || len(req.Argv) == 0 || req.Argv[0] == "" {
		return Request{}, fmt.Errorf("%w: task %d with no program", ErrWire, req.Task)
	}
	return req, nil
}

// WriteReply writes rep and the task's output, which must be rep.Size bytes.
func WriteReply(w io.Writer, rep Reply, out []byte) error {
	rep.V = WireVersion
	if int64(len(out)) != rep.Size {
		return fmt.Errorf("%w: size %d, %d bytes of output", ErrWire, rep.Size, len(out))
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// ReadReply reads one reply and its output (at most max bytes); io.EOF at the
// end of the runner's output.
func ReadReply(r *bufio.Reader, max int64) (Reply, []byte, error) {
	line, err := readLine(r)
	if err != nil {
		return Reply{}, nil, err
	}
	var rep Reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return Reply{}, nil, fmt.Errorf("%w: %v", ErrWire, err)
	}
	if rep.V != WireVersion {
		return Reply{}, nil, fmt.Errorf("%w: version %d, want %d", ErrWire, rep.V, WireVersion)
	}
	if rep.Size < 0 || rep.Size > max {
		return Reply{}, nil, fmt.Errorf("%w: task %d: %d bytes of output, at most %d allowed", ErrWire, rep.Task, rep.Size, max)
	}
	out := make([]byte, rep.Size)
	if _, err := io.ReadFull(r, out); err != nil {
		return Reply{}, nil, fmt.Errorf("%w: task %d: output cut short: %v", ErrWire, rep.Task, err)
	}
	return rep, out, nil
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxWireLine {
			return nil, fmt.Errorf("%w: a line over %d bytes", ErrWire, MaxWireLine)
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, fmt.Errorf("%w: last line unterminated: %q", ErrWire, strings.TrimSpace(string(line)))
		}
		return nil, err
	}
}
