package launch

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// FrameType is the first byte of a frame of the launch protocol.
type FrameType byte

// Frame types (docs/api.md, "The launch protocol"). Client → agent: Stdin,
// StdinClose, Signal. Agent → client: Stdout, Stderr, Exit.
const (
	FrameStdin      FrameType = 1 // bytes for the command's standard input
	FrameStdinClose FrameType = 2 // no payload: close the command's standard input
	FrameSignal     FrameType = 3 // 4 bytes: signal number, big-endian (Linux numbering)
	FrameStdout     FrameType = 4 // bytes the command wrote to standard output
	FrameStderr     FrameType = 5 // bytes the command wrote to standard error
	FrameExit       FrameType = 6 // 5 bytes: how the command ended ([Exit]); the last frame
)

var frameNames = map[FrameType]string{
	FrameStdin: "stdin", FrameStdinClose: "stdin-close", FrameSignal: "signal",
	FrameStdout: "stdout", FrameStderr: "stderr", FrameExit: "exit",
}

func (t FrameType) String() string {
	if n, ok := frameNames[t]; ok {
		return n
	}
	return fmt.Sprintf("frame type %d", byte(t))
}

const (
	// HeaderSize is the size of a frame header: type, then payload length as a
	// big-endian uint32.
	HeaderSize = 5
	// MaxPayload is the largest payload a receiver accepts; a larger length is
	// a protocol error.
	MaxPayload = 1 << 20
	// chunk is the largest data payload this package sends.
	chunk = 32 << 10
)

// Frame is one message of the launch protocol.
type Frame struct {
	Type    FrameType
	Payload []byte
}

// ReadFrame reads one frame. It returns io.EOF only when r ends cleanly
// before a frame; a frame cut short is io.ErrUnexpectedEOF. An unknown type, a
// payload over [MaxPayload] or a malformed control payload wraps
// [ErrProtocol].
func ReadFrame(r io.Reader) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: FrameType(h[0])}
	n := binary.BigEndian.Uint32(h[1:])
	if _, ok := frameNames[f.Type]; !ok {
		return Frame{}, fmt.Errorf("%w: unknown %v", ErrProtocol, f.Type)
	}
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %v frame of %d bytes (at most %d)", ErrProtocol, f.Type, n, MaxPayload)
	}
	if want, fixed := fixedSize(f.Type); fixed && int(n) != want {
		return Frame{}, fmt.Errorf("%w: %v frame of %d bytes, want %d", ErrProtocol, f.Type, n, want)
	}
	f.Payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, nil
}

// fixedSize is the payload size of control frames.
func fixedSize(t FrameType) (int, bool) {
	switch t {
	case FrameStdinClose:
		return 0, true
	case FrameSignal:
		return 4, true
	case FrameExit:
		return 5, true
	}
	return 0, false
}

// WriteFrame writes one frame in a single Write call.
func WriteFrame(w io.Writer, t FrameType, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("%w: %v payload of %d bytes (at most %d)", ErrProtocol, t, len(payload), MaxPayload)
	}
	b := make([]byte, HeaderSize+len(payload))
	b[0] = byte(t)
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	copy(b[HeaderSize:], payload)
	_, err := w.Write(b)
	return err
}

// Exit is how a launched command ended: exited with Code, or killed by
// Signal when Signal > 0.
type Exit struct {
	Code   int
	Signal int
}

// ExitCode is the status a shell would report: Code, or 128 + Signal.
func (e Exit) ExitCode() int {
	if e.Signal > 0 {
		return 128 + e.Signal
	}
	return e.Code
}

func (e Exit) String() string {
	if e.Signal > 0 {
		return fmt.Sprintf("killed by signal %d", e.Signal)
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// encode is the payload of an exit frame: 0 and the exit code, or 1 and the
// signal number, as a big-endian uint32.
func (e Exit) encode() []byte {
	b := make([]byte, 5)
	if e.Signal > 0 {
		b[0] = 1
		binary.BigEndian.PutUint32(b[1:], uint32(e.Signal))
	} else {
		binary.BigEndian.PutUint32(b[1:], uint32(e.Code))
	}
	return b
}

func decodeExit(p []byte) (Exit, error) {
	if len(p) != 5 || p[0] > 1 {
		return Exit{}, fmt.Errorf("%w: malformed exit frame %x", ErrProtocol, p)
	}
	v := int(binary.BigEndian.Uint32(p[1:]))
	if p[0] == 1 {
		return Exit{Signal: v}, nil
	}
	return Exit{Code: v}, nil
}

func encodeSignal(sig int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(sig)) }

// frameWriter serialises frames from several goroutines onto one connection
// and remembers the first write error.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (fw *frameWriter) write(t FrameType, p []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err == nil {
		fw.err = WriteFrame(fw.w, t, p)
	}
	return fw.err
}

// frameStream is an io.Writer that sends what it is given as data frames of
// one type, in chunks.
type frameStream struct {
	fw *frameWriter
	t  FrameType
}

func (s frameStream) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), chunk)
		if err := s.fw.write(s.t, p[:c]); err != nil {
			return n, err
		}
		n += c
		p = p[c:]
	}
	return n, nil
}
