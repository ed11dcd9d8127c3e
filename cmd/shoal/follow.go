package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
)

// verbosity is how much of a job's events a command prints.
type verbosity int

const (
	showNone   verbosity = iota // shoal wait: nothing; the exit code says how the job ended
	showOutput                  // shoal logs, shoal run --quiet: rank output, and the lines explaining repeated output
	showAll                     // shoal run: shoal's progress lines too
)

// showEvent reports whether a coordinator event of kind is printed, as a
// "shoal: " line, at verbosity v.
func showEvent(kind string, v verbosity) bool {
	switch kind {
	case job.EventRankLost, job.EventNodeLost, job.EventState, job.EventEnd:
		return false // the restart line that follows says it all; the end has its own line
	case job.EventRestart, job.EventEpochBad:
		return v >= showOutput // output after them repeats work: say why
	}
	return v >= showAll
}

// jobPrinter prints a cluster job's events as `shoal run` prints them: rank
// output to stdout and stderr as the ranks wrote it, shoal's lines to stdout.
type jobPrinter struct {
	stdout, stderr io.Writer
	v              verbosity
}

func (p jobPrinter) print(e job.Event) {
	switch {
	case p.v == showNone:
	case e.Type == job.EventOutput:
		fmt.Fprintln(p.stdout, e.Message)
	case e.Type == job.EventOutputErr:
		fmt.Fprintln(p.stderr, e.Message)
	case showEvent(e.Type, p.v):
		fmt.Fprintf(p.stdout, "shoal: %s\n", e.Message)
	}
}

// jobExit is the exit code of `shoal run` for a job that ended as d says, and of
// every command that reports how a job ended: 0 when it succeeded, 130 when it
// was cancelled, 3 when its ranks kept dying and --max-restarts ran out, the
// program's own exit code when it failed by itself, else 1.
func jobExit(d job.Done) int {
	switch {
	case d.State == job.Succeeded:
		return exitOK
	case d.State == job.Cancelled:
		return exitCancelled
	case d.Exhausted:
		return exitRestarts
	case d.ExitCode > 0:
		return d.ExitCode
	}
	return exitFailure
}

// reportEnd says on stderr, in one line, why job id did not succeed, and
// returns the exit code for how it ended.
func reportEnd(cmd, id string, d job.Done, stderr io.Writer) int {
	switch d.State {
	case job.Succeeded:
	case job.Cancelled:
		fmt.Fprintf(stderr, "shoal %s: job %s cancelled\n", cmd, id)
	default:
		fmt.Fprintf(stderr, "shoal %s: job %s failed: %s\n", cmd, id, d.Reason)
	}
	return jobExit(d)
}

// jobStream reads a job's events through an agent from the first on, and picks a
// broken stream up where it broke: the agent may lose the job's coordinator (its
// node died) while another node takes the job over. Every event is handed on
// once, in order.
type jobStream struct {
	c  *api.Client
	id string
	// follow reads until the job's done event; else until the end of the
	// events recorded so far.
	follow bool
	notes  io.Writer // shoal's lines about the stream itself
	// retryFor bounds the tries to re-attach after a break; the first try waits
	// backoff, each next one twice as long, up to maxBackoff.
	retryFor, backoff, maxBackoff time.Duration
	next                          uint64 // seq of the next event wanted
}

func newJobStream(c *api.Client, id string, follow bool, notes io.Writer) *jobStream {
	return &jobStream{c: c, id: id, follow: follow, notes: notes,
		retryFor: time.Minute, backoff: 250 * time.Millisecond, maxBackoff: 5 * time.Second, next: 1}
}

// agentGoneError says the agent the command talks to stopped answering while it
// followed a job: nothing can be re-attached through it.
type agentGoneError struct {
	addr string
	err  error
}

func (e *agentGoneError) Error() string {
	return fmt.Sprintf("the agent at %s stopped answering", e.addr)
}

func (e *agentGoneError) Unwrap() error { return e.err }

// each hands every event to on, the done event included, and returns the job's
// end once its done event is read (nil when, without follow, the stream ends
// before it). An error before the first event is the agent's answer as it came
// (an unknown job is errkind.NotFound).
func (s *jobStream) each(on func(job.Event)) (*job.Done, error) {
	stream, err := s.c.Events(context.Background(), s.id, s.next, s.follow)
	if err != nil {
		return nil, err
	}
	for {
		done, err := s.read(stream, on)
		stream.Close()
		if err == nil {
			return done, nil
		}
		if stream, err = s.reattach(); err != nil {
			return nil, err
		}
	}
}

// errStreamEnded is a followed stream that ended before the job's done event.
var errStreamEnded = errors.New("the event stream ended before the job")

func (s *jobStream) read(stream *api.EventStream, on func(job.Event)) (*job.Done, error) {
	for {
		e, err := stream.Next()
		if errors.Is(err, io.EOF) {
			if s.follow {
				return nil, errStreamEnded
			}
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Seq < s.next {
			continue // seen before the break
		}
		s.next = e.Seq + 1
		on(e)
		if e.Type == job.EventEnd {
			var d job.Done
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return nil, fmt.Errorf("job %s: malformed done event: %v", s.id, err)
			}
			return &d, nil
		}
	}
}

// reattach opens the stream again from the next event, after it broke: at once
// if the agent answers for the job, else with growing waits for up to retryFor.
// An agent that does not answer at all is given up at once.
func (s *jobStream) reattach() (*api.EventStream, error) {
	if gone := s.agentGone(); gone != nil {
		return nil, gone
	}
	fmt.Fprintln(s.notes, "shoal: lost contact with the job's coordinator; re-attaching")
	deadline := time.Now().Add(s.retryFor)
	wait := s.backoff
	for {
		stream, err := s.c.Events(context.Background(), s.id, s.next, s.follow)
		if err == nil {
			fmt.Fprintln(s.notes, "shoal: re-attached")
			return stream, nil
		}
		if errors.Is(err, errkind.Unreachable) {
			return nil, &agentGoneError{addr: s.c.Addr(), err: err}
		}
		if errors.Is(err, errkind.Unauthorized) || errors.Is(err, errkind.BadRequest) {
			return nil, err // asking again will not help
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("could not re-attach within %.0f s: %s", s.retryFor.Seconds(), errorLine(err))
		}
		time.Sleep(wait)
		wait = min(2*wait, s.maxBackoff)
	}
}

// agentGone checks, after a stream broke, whether the agent itself still
// answers.
func (s *jobStream) agentGone() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := s.c.Health(ctx); err != nil {
		return &agentGoneError{addr: s.c.Addr(), err: err}
	}
	return nil
}

// followFailed says in one line why following job id failed, and returns the
// exit code: exitNoJob for a job the agent does not know.
func followFailed(cmd, id string, c *api.Client, err error, stderr io.Writer) int {
	var gone *agentGoneError
	switch {
	case errors.As(err, &gone):
		fmt.Fprintf(stderr, "shoal %s: %s: cannot follow job %s any more (another node's agent may: shoal wait %s)\n", cmd, gone, id, id)
	case errors.Is(err, errkind.NotFound):
		fmt.Fprintf(stderr, "shoal %s: no job %q known to the agent at %s\n", cmd, id, c.Addr())
		return exitNoJob
	default:
		fmt.Fprintf(stderr, "shoal %s: job %s: %s\n", cmd, id, errorLine(err))
	}
	return exitFailure
}

// awaitJob follows job id to its end through c, printing its events as p says,
// and returns the exit code `shoal run` gives for how it ended. A line on
// stderr says when the cluster loses its quorum meanwhile, and when it has one
// again (watchQuorum).
func awaitJob(cmd string, c *api.Client, id string, p jobPrinter, stderr io.Writer) int {
	stop := watchQuorum(c, cmd, id, stderr)
	d, err := newJobStream(c, id, true, stderr).each(p.print)
	stop()
	if err != nil {
		return followFailed(cmd, id, c, err, stderr)
	}
	return reportEnd(cmd, id, *d, stderr)
}
