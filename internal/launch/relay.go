package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// DefaultSignalGrace is how long [Relay] waits for the exit frame after
// forwarding a signal.
const DefaultSignalGrace = 3 * time.Second

// Relay is the client side of the launch protocol, what `shoal rsh` runs on
// the connection [api.Client.Launch] returns: it sends Stdin, writes the
// command's output to Stdout and Stderr, forwards Signals, and returns the
// command's exit status.
type Relay struct {
	// Stdin is sent to the command; nil sends none (stdin-close at once).
	// Reading it goes on in a goroutine that may outlive Run if Stdin never
	// ends (os.Stdin of a process that exits afterwards is fine).
	Stdin io.Reader
	// Stdout and Stderr receive the command's output; nil discards it.
	// Write errors are ignored: the command keeps running, as under ssh.
	Stdout, Stderr io.Writer
	// Signals are forwarded to the command's process group. After the first
	// one, Run waits SignalGrace for the exit frame; then it closes the
	// connection, which makes the agent kill the command, and returns as if
	// the command had died of the signal.
	Signals <-chan os.Signal
	// SignalGrace: default [DefaultSignalGrace].
	SignalGrace time.Duration
}

// Run relays until the exit frame arrives, and closes conn. A connection that
// ends first is [ErrConnLost]; a frame the agent must not send is
// [ErrProtocol].
func (r *Relay) Run(conn io.ReadWriteCloser) (Exit, error) {
	defer conn.Close()
	fw := &frameWriter{w: conn}
	go r.sendStdin(fw)

	type result struct {
		exit Exit
		err  error
	}
	done := make(chan result, 1)
	go func() {
		stdout, stderr := orDiscard(r.Stdout), orDiscard(r.Stderr)
		for {
			f, err := ReadFrame(conn)
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					err = fmt.Errorf("%w: %v", ErrConnLost, err)
				}
				done <- result{err: err}
				return
			}
			switch f.Type {
			case FrameStdout:
				stdout.Write(f.Payload)
			case FrameStderr:
				stderr.Write(f.Payload)
			case FrameExit:
				e, err := decodeExit(f.Payload)
				done <- result{exit: e, err: err}
				return
			default:
				done <- result{err: fmt.Errorf("%w: the agent sent a %v frame", ErrProtocol, f.Type)}
				return
			}
		}
	}()

	grace := r.SignalGrace
	if grace <= 0 {
		grace = DefaultSignalGrace
	}
	var (
		timeout <-chan time.Time
		first   syscall.Signal
	)
	for {
		select {
		case res := <-done:
			return res.exit, res.err
		case s := <-r.Signals:
			sig, ok := s.(syscall.Signal)
			if !ok {
				continue
			}
			fw.write(FrameSignal, encodeSignal(int(sig)))
			if timeout == nil {
				first, timeout = sig, time.After(grace)
			}
		case <-timeout:
			return Exit{Signal: int(first)}, nil
		}
	}
}

// sendStdin sends Stdin in stdin frames, then stdin-close.
func (r *Relay) sendStdin(fw *frameWriter) {
	if r.Stdin != nil {
		buf := make([]byte, chunk)
		for {
			n, err := r.Stdin.Read(buf)
			if n > 0 && fw.write(FrameStdin, buf[:n]) != nil {
				return
			}
			if err != nil {
				break
			}
		}
	}
	fw.write(FrameStdinClose, nil)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
